// `knowledgefs gc`: removes from a bucket the objects no publication worth
// keeping names (mark: gc-roots.ts), and only those older than the grace.
//
// Safe while replicas read and publishes run, because an object is deleted
// only when it is (a) named by none of the roots and (b) older than the
// grace, both checked when listed and again just before its batch is sent;
// and because gc raises the fence (gc.json) before it marks and lowers it
// only once every delete has been answered, so a publish never switches the
// pointer across a delete it could not see (the rules and why they hold in
// every ordering: core/gc-fence.ts). Replicas serve publications that are
// current, in the history within the grace, or reported by their
// heartbeat. The grace must exceed the reuse hour plus the longest publish,
// and the longest a replica may lag behind.
//
// Only keys of the publication layout are ever deleted (blobs/<sha256>,
// indexes/<scope>/<version>.json, directories/<sha256>.json,
// publications/*.json); current.json and anything else under the prefix
// are left alone and counted (gc.json among them). Deletions are idempotent
// and each batch only removes what no root needs, so gc can be killed at
// any point: the bucket stays servable, publishes wait out the fence's
// expiry at most, and the next run finishes the job.

import { POINTER_KEY, HISTORY_PREFIX, type Pointer } from '../../core/publication.js';
import { mayDelete } from '../../core/gc-fence.js';
import { RootMarker, requirePublication, type Root } from './gc-roots.js';
import { FenceWriter } from './gc-fence-writer.js';
import { eachLimited } from '../publication/blob-presence.js';
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
  /**
   * Listed as garbage, then kept by the check before its batch: written
   * again, named by a publication made current since, or already gone.
   */
  readonly spared: Tally;
  /** What was (or, in a dry run, would be) deleted, in total and by kind. */
  readonly swept: Tally;
  readonly sweptByKind: Readonly<Record<GcKind, Tally>>;
}

const tally = (): Tally => ({ objects: 0, bytes: 0 });
const add = (t: Tally, bytes: number) => {
  t.objects++;
  t.bytes += bytes;
};
const take = (t: Tally, bytes: number) => {
  t.objects--;
  t.bytes -= bytes;
};

interface Doomed {
  readonly key: string;
  readonly size: number;
  readonly kind: GcKind;
}

export async function collectGarbage(options: GcOptions): Promise<GcResult> {
  const { store } = options;
  const clock = options.now ?? Date.now;
  const now = clock();
  const windowStart = now - options.graceMs;
  // The fence goes up before the mark reads the pointer (core/gc-fence.ts, rule 1).
  // A prefix without a pointer gets no fence either: gc writes nothing into a wrong --store.
  await requirePublication(store);
  const fence = options.delete ? new FenceWriter(store, clock) : null;
  await fence?.deleting();
  try {
    return await sweep(options, windowStart, fence);
  } catch (err) {
    // Nothing in doubt (no unanswered delete, the lock still ours): publishes need not wait for the expiry.
    if (err instanceof LockLost) throw err.reason;
    if (fence !== null) await fence.idle().catch(() => undefined);
    throw err;
  }
}

/** What beforeDelete threw: the lock went to another gc, whose fence this one must leave alone. */
class LockLost extends Error {
  constructor(readonly reason: unknown) {
    super('the gc lock was lost');
  }
}

async function checkLock(options: GcOptions): Promise<void> {
  try {
    await options.beforeDelete?.();
  } catch (err) {
    throw new LockLost(err);
  }
}

async function sweep(options: GcOptions, windowStart: number, fence: FenceWriter | null): Promise<GcResult> {
  const { store } = options;
  const now = windowStart + options.graceMs;
  const marker = new RootMarker({ store, keep: options.keep, graceMs: options.graceMs, now, served: options.served, log: options.log });
  const marked = await marker.mark();

  const every = options.progressIntervalMs ?? 1_000;
  let lastReport = performance.now();
  const report = (p: GcProgress, force = false) => {
    if (options.progress === undefined) return;
    const t = performance.now();
    if (!force && t - lastReport < every) return;
    lastReport = t;
    options.progress(p);
  };

  const result = { listed: tally(), marked: tally(), young: tally(), other: tally(), swept: tally(), spared: tally() };
  const sweptByKind: Record<GcKind, Tally> = { blobs: tally(), indexes: tally(), directories: tally(), publications: tally() };
  const doomed: Doomed[] = [];
  for await (const entry of store.listObjects('')) {
    add(result.listed, entry.size);
    report({ phase: 'listed', done: result.listed.objects });
    const kind = entry.key === POINTER_KEY ? null : kindOf(entry.key);
    if (kind === null) add(result.other, entry.size);
    else if (marked.keys.has(entry.key)) add(result.marked, entry.size);
    else if (!mayDelete(entry.key, entry.lastModified, marked.keys, windowStart)) add(result.young, entry.size);
    else {
      add(result.swept, entry.size);
      add(sweptByKind[kind], entry.size);
      doomed.push({ key: entry.key, size: entry.size, kind });
    }
  }
  report({ phase: 'listed', done: result.listed.objects }, true);
  if (fence === null) return { deleted: false, roots: marked.roots, ...result, sweptByKind };

  let done = 0;
  let roots = marked.roots;
  for (let i = 0; i < doomed.length; i += DELETE_BATCH) {
    await checkLock(options);
    await fence.deleting();
    const listed = doomed.slice(i, i + DELETE_BATCH);
    // Rule 3: each key's age again, then the roots again (in that order: a
    // publish uploads before it points at what it uploaded).
    const ages = new Map<string, number | null>();
    await eachLimited(listed, 16, async ({ key }) => {
      ages.set(key, await store.lastModified(key));
    });
    const again = await marker.mark();
    roots = again.roots;
    const batch: string[] = [];
    for (const d of listed) {
      if (mayDelete(d.key, ages.get(d.key) ?? null, again.keys, windowStart)) batch.push(d.key);
      else {
        take(result.swept, d.size);
        take(sweptByKind[d.kind], d.size);
        add(result.spared, d.size);
      }
    }
    await fence.renewIfDue();
    if (batch.length > 0) await fence.sending(() => store.deleteMany(batch));
    done += listed.length;
    // A line a batch (1 000 objects): what is gone is never in doubt.
    report({ phase: 'deleted', done, total: doomed.length }, true);
  }
  await checkLock(options);
  await fence.idle();
  return { deleted: true, roots, ...result, sweptByKind };
}
