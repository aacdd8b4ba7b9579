// The mark phase of `knowledgefs gc`: which publications are roots, and
// every key they name. Roots:
//
//   - the current pointer (current.json);
//   - the last N publications of the history (publications/, written by
//     publish before each pointer, so it holds every pointer ever current);
//   - every publication that was current at some moment within the grace:
//     the history entries written within it, and the newest one before it
//     (current at the start of the window). A publish that began within the
//     grace trusts the blobs of the pointer current when it began without
//     uploading them again, so that pointer must stay whole;
//   - every publication a replica reported serving within the grace
//     (knowledgefs_replicas), when gc knows them (--state).
//
// A root's keys: its directory.json, its indexes, and every blob its
// indexes name. An index that is gone is a warning (there is nothing left
// to protect); one that cannot be read or parsed stops gc, since its blobs
// cannot be known.

import { KnowledgeError } from '../../core/errors.js';
import {
  HISTORY_PREFIX,
  MAX_INDEX_BYTES,
  MAX_POINTER_BYTES,
  POINTER_KEY,
  PublicationError,
  blobKey,
  historyKey,
  indexKey,
  parseIndex,
  parsePointer,
  pointerKeys,
  type Pointer,
} from '../../core/publication.js';
import { sha256Hex } from '../../core/sha256.js';
import { serializePointer } from '../../core/publication.js';
import { eachLimited } from '../publication/blob-presence.js';
import type { ListedObject, SweepableStore } from '../objects/object-store.js';

export type RootReason = 'current' | 'last' | 'within-grace' | 'served';

export interface Root {
  readonly id: string;
  readonly publishedAt: string;
  readonly reasons: RootReason[];
}

export interface Marked {
  readonly roots: readonly Root[];
  /** Every key the roots name, and the roots' own history entries. */
  readonly keys: ReadonlySet<string>;
}

export interface MarkOptions {
  readonly store: SweepableStore;
  readonly keep: number;
  readonly graceMs: number;
  /** When the grace window ends (gc's start). */
  readonly now: number;
  /** Pointers replicas served within the grace; null when not known (no --state). */
  readonly served: readonly Pointer[] | null;
  readonly log: (line: string) => void;
}

function idOf(pointer: Pointer): string {
  return sha256Hex(serializePointer(pointer));
}

async function readPointer(store: SweepableStore, key: string): Promise<Pointer | null> {
  const got = await store.get(key, { maxBytes: MAX_POINTER_BYTES });
  if (got === null || got === 'not-modified') return null;
  return parsePointer(got.bytes, key);
}

/** History entries chosen as roots: the last `keep`, those written within the grace, and the newest one before it. */
export function historyRoots(entries: readonly ListedObject[], keep: number, windowStart: number): Map<string, RootReason[]> {
  const sorted = [...entries].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const chosen = new Map<string, RootReason[]>();
  const add = (key: string, reason: RootReason) => chosen.set(key, [...(chosen.get(key) ?? []), reason]);
  for (const e of sorted.slice(Math.max(0, sorted.length - keep))) add(e.key, 'last');
  let before: ListedObject | undefined;
  for (const e of sorted) {
    if (e.lastModified >= windowStart) add(e.key, 'within-grace');
    else if (before === undefined || e.lastModified >= before.lastModified) before = e;
  }
  if (before !== undefined) add(before.key, 'within-grace');
  return chosen;
}

/** The current pointer; refuses a store without one (a wrong --store must not look like a bucket full of garbage). */
export async function requirePublication(store: SweepableStore): Promise<Pointer> {
  const current = await readPointer(store, POINTER_KEY);
  if (current === null) {
    throw new KnowledgeError('unavailable', `${store.description}: no ${POINTER_KEY}: not a publication (a wrong --store?); gc collects nothing without one`);
  }
  return current;
}

/**
 * The roots and their keys, read again on every call: gc marks once before
 * listing and again before every batch of deletions, so a publication made
 * current (or entered in the history) while gc runs is a root before
 * anything it names is deleted. Only what the last call had not read yet is
 * read (each history entry and each index once); keys only ever grow.
 */
export class RootMarker {
  private readonly roots = new Map<string, { pointer: Pointer; reasons: RootReason[] }>();
  private readonly keys = new Set<string>();
  private readonly historyRead = new Set<string>();
  private readonly indexesRead = new Set<string>();

  constructor(private readonly options: MarkOptions) {}

  private addRoot(pointer: Pointer, reasons: readonly RootReason[]): void {
    const id = idOf(pointer);
    const root = this.roots.get(id) ?? { pointer, reasons: [] };
    for (const r of reasons) if (!root.reasons.includes(r)) root.reasons.push(r);
    this.roots.set(id, root);
  }

  async mark(): Promise<Marked> {
    const { store, log } = this.options;
    const current = await requirePublication(store);
    this.addRoot(current, ['current']);

    const history: ListedObject[] = [];
    for await (const entry of store.listObjects(HISTORY_PREFIX)) history.push(entry);
    const chosen = historyRoots(history, this.options.keep, this.options.now - this.options.graceMs);
    await eachLimited([...chosen], 16, async ([key, reasons]) => {
      this.keys.add(key);
      if (this.historyRead.has(key)) return;
      try {
        const pointer = await readPointer(store, key);
        if (pointer !== null) this.addRoot(pointer, reasons);
        this.historyRead.add(key);
      } catch (err) {
        if (!(err instanceof PublicationError)) throw err;
        this.historyRead.add(key);
        log(`warning: ${err.message}; not a root`);
      }
    });
    for (const pointer of this.options.served ?? []) this.addRoot(pointer, ['served']);

    // Each index once, however many roots name it.
    const indexes = new Map<string, { scope: string; version: string }>();
    for (const { pointer } of this.roots.values()) {
      // A root's history copy stays with it, whatever made it a root.
      this.keys.add(historyKey(pointer));
      for (const key of pointerKeys(pointer)) this.keys.add(key);
      for (const [scope, version] of Object.entries(pointer.scopes)) {
        const key = indexKey(scope, version);
        if (!this.indexesRead.has(key)) indexes.set(key, { scope, version });
      }
    }
    await eachLimited([...indexes], 16, async ([key, { scope, version }]) => {
      const got = await store.get(key, { maxBytes: MAX_INDEX_BYTES });
      if (got === null || got === 'not-modified') {
        log(`warning: ${key} is named by a publication gc keeps but is not in the store`);
        return;
      }
      let index;
      try {
        index = parseIndex(got.bytes, scope, version, Number.MAX_SAFE_INTEGER);
      } catch (err) {
        if (!(err instanceof PublicationError)) throw err;
        throw new KnowledgeError('unavailable', `${err.message}: a publication gc keeps names it and its blobs cannot be known; nothing more was deleted (repair or republish first)`);
      }
      for (const f of index.files) this.keys.add(blobKey(f.sha256));
      this.indexesRead.add(key);
    });
    return {
      roots: [...this.roots].map(([id, r]) => ({ id, publishedAt: r.pointer.publishedAt, reasons: [...r.reasons] })),
      keys: this.keys,
    };
  }
}

/** The roots and their keys, read once. */
export function mark(options: MarkOptions): Promise<Marked> {
  return new RootMarker(options).mark();
}
