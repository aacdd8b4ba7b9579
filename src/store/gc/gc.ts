// `knowledgefs gc`: removes from a bucket the objects no publication worth
// keeping names (mark: gc-roots.ts), and only those older than the grace.
//
// Safe while replicas read and publishes run, because an object is deleted
// only when it is (a) named by none of the roots and (b) older than the
// grace: a publish in progress uploads new objects (young), and reuses the
// blobs of the pointer current when it began (a root: it was current
// within the grace); replicas serve publications that are current, in the
// history within the grace, or reported by their heartbeat. The grace must
// exceed the longest publish and the longest a replica may lag behind.
//
// Only keys of the publication layout are ever deleted (blobs/<sha256>,
// indexes/<scope>/<version>.json, directories/<sha256>.json,
// publications/*.json); current.json and anything else under the prefix
// are left alone and counted. Deletions are idempotent and each batch only
// removes what no root needs, so gc can be killed at any point: the bucket
// stays servable and the next run finishes the job.

import { POINTER_KEY, HISTORY_PREFIX, type Pointer } from '../../core/publication.js';
import { mark, type Root } from './gc-roots.js';
import type { SweepableStore } from '../objects/object-store.js';

/** Keys per DeleteObjects request. */
const DELETE_BATCH = 1_000;

export type GcKind = 'blobs' | 'indexes' | 'directories' | 'publications';

const KIND_OF: readonly [RegExp, GcKind][] = [
  [/^blobs\/[0-9a-f]{64}$/, 'blobs'],
  [/^indexes\/[a-z0-9_-]+\/[0-9a-f]{64}\.json$/, 'indexes'],
  [/^directories\/[0-9a-f]{64}\.json$/, 'directories'],
  [new RegExp(`^${HISTORY_PREFIX}[^/]+\\.json$`), 'publications'],
];

export function kindOf(key: string): GcKind | null {
  for (const [pattern, kind] of KIND_OF) if (pattern.test(key)) return kind;
  return null;
}

export interface Tally {
  objects: number;
  bytes: number;
}

export interface GcProgress {
  readonly phase: 'listed' | 'deleted';
  readonly done: number;
  /** Objects to delete (for 'deleted'). */
  readonly total?: number;
}

export interface GcOptions {
  readonly store: SweepableStore;
  /** Publications of the history kept, newest first. */
  readonly keep: number;
  readonly graceMs: number;
  /** Delete; otherwise a dry run that only reports. */
  readonly delete: boolean;
  /** Publications replicas served within the grace; null when not known. */
  readonly served: readonly Pointer[] | null;
  /** Called before every batch of deletions; throws to stop (the lock was lost). */
  readonly beforeDelete?: () => Promise<void>;
  readonly log: (line: string) => void;
  readonly progress?: (p: GcProgress) => void;
  readonly progressIntervalMs?: number;
  readonly now?: () => number;
}

export interface GcResult {
  readonly deleted: boolean;
  readonly roots: readonly Root[];
  readonly listed: Tally;
  /** Kept because a root names them (or they are a root's history entry). */
  readonly marked: Tally;
  /** Unnamed but younger than the grace. */
  readonly young: Tally;
  /** current.json and keys outside the layout: never deleted. */
  readonly other: Tally;
  /** What was (or, in a dry run, would be) deleted, in total and by kind. */
  readonly swept: Tally;
  readonly sweptByKind: Readonly<Record<GcKind, Tally>>;
}

const tally = (): Tally => ({ objects: 0, bytes: 0 });
const add = (t: Tally, bytes: number) => {
  t.objects++;
  t.bytes += bytes;
};

export async function collectGarbage(options: GcOptions): Promise<GcResult> {
  const { store } = options;
  const now = (options.now ?? Date.now)();
  const windowStart = now - options.graceMs;
  const marked = await mark({ store, keep: options.keep, graceMs: options.graceMs, now, served: options.served, log: options.log });

  const every = options.progressIntervalMs ?? 1_000;
  let lastReport = performance.now();
  const report = (p: GcProgress, force = false) => {
    if (options.progress === undefined) return;
    const t = performance.now();
    if (!force && t - lastReport < every) return;
    lastReport = t;
    options.progress(p);
  };

  const result = { listed: tally(), marked: tally(), young: tally(), other: tally(), swept: tally() };
  const sweptByKind: Record<GcKind, Tally> = { blobs: tally(), indexes: tally(), directories: tally(), publications: tally() };
  const doomed: string[] = [];
  for await (const entry of store.listObjects('')) {
    add(result.listed, entry.size);
    report({ phase: 'listed', done: result.listed.objects });
    const kind = entry.key === POINTER_KEY ? null : kindOf(entry.key);
    if (kind === null) add(result.other, entry.size);
    else if (marked.keys.has(entry.key)) add(result.marked, entry.size);
    else if (entry.lastModified >= windowStart) add(result.young, entry.size);
    else {
      add(result.swept, entry.size);
      add(sweptByKind[kind], entry.size);
      doomed.push(entry.key);
    }
  }
  report({ phase: 'listed', done: result.listed.objects }, true);

  if (options.delete) {
    let done = 0;
    for (let i = 0; i < doomed.length; i += DELETE_BATCH) {
      await options.beforeDelete?.();
      const batch = doomed.slice(i, i + DELETE_BATCH);
      await store.deleteMany(batch);
      done += batch.length;
      // A line a batch (1 000 objects): what is gone is never in doubt.
      report({ phase: 'deleted', done, total: doomed.length }, true);
    }
  }
  return { deleted: options.delete, roots: marked.roots, ...result, sweptByKind };
}
