// How `gc --delete` and `publish` stay out of each other's way in one
// bucket, which offers neither transactions nor conditional deletes (pure:
// no I/O; the edges are store/gc/gc.ts and store/publication/publish.ts).
//
// A DeleteObjects request may reach the store at any later moment after gc
// decided what it deletes (a slow network, a proxy holding it), so nothing
// gc checks first can protect an object a publish touches meanwhile. Three
// rules, together safe in every ordering (the model test,
// test/gc-publish-model.test.ts, tries them all):
//
// 1. The fence (gc.json under the prefix). gc writes it "deleting", with a
//    fresh run id, before it reads the pointer for its mark, renews it
//    before every batch, and writes it "idle" once every delete it sent has
//    been answered. publish reads it before it decides what to reuse and
//    again before it writes the pointer: unless both reads saw the same
//    idle fence, a gc may have deleted what it counted on, so it waits for
//    the fence to be idle and decides again. A fence not renewed by its
//    expiry is a gc that died: taken as idle.
// 2. Reuse only the young (publish): a stored object the previous pointer
//    does not name, blob, index or directory.json alike, is reused only
//    when written within REUSE_YOUNGER_THAN_MS; an older one is uploaded
//    again, which makes it young.
// 3. Check before deleting (gc): before each batch, every key is asked for
//    its LastModified again and the roots read again (pointer and history);
//    only what is still old and still named by none is deleted.
//
// Rule 1 alone closes the orderings in which a delete lands after a
// publish's upload; rules 2 and 3 the ones in which a publish that passed
// its fence before gc began names what gc listed as garbage.

import { PublicationError } from './publication.js';

export const GC_FENCE_KEY = 'gc.json';
/** Largest gc.json a reader accepts. */
export const MAX_GC_FENCE_BYTES = 64 * 1024;
/**
 * A stored object no publication names is reused only when written within
 * this long; older ones are uploaded again. gc's grace must exceed it plus
 * the longest publish.
 */
export const REUSE_YOUNGER_THAN_MS = 3_600_000;
/** A "deleting" fence expires this long after gc last renewed it (gc renews it before every batch). */
export const GC_FENCE_TTL_MS = 10 * 60_000;

export interface GcFence {
  readonly state: 'deleting' | 'idle';
  /** Unique per gc run: a fence rewritten by another run is never mistaken for the one seen before. */
  readonly run: string;
  /** ISO 8601, by gc's clock: after it, a "deleting" fence is a gc that died. */
  readonly expiresAt: string;
}

export function serializeGcFence(fence: GcFence): Buffer {
  return Buffer.from(`${JSON.stringify({ state: fence.state, run: fence.run, expiresAt: fence.expiresAt })}\n`);
}

export function parseGcFence(bytes: Buffer): GcFence {
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new PublicationError(GC_FENCE_KEY, 'not valid JSON');
  }
  const d = doc as Partial<Record<keyof GcFence, unknown>>;
  if (typeof doc !== 'object' || doc === null || (d.state !== 'deleting' && d.state !== 'idle') || typeof d.run !== 'string' || typeof d.expiresAt !== 'string' || Number.isNaN(Date.parse(d.expiresAt))) {
    throw new PublicationError(GC_FENCE_KEY, 'expected {"state":"deleting"|"idle","run":…,"expiresAt":…}');
  }
  return { state: d.state, run: d.run, expiresAt: d.expiresAt };
}

/** What publish saw of the fence: none, or its bytes (a read that failed to parse counts as a fence being rewritten). */
export type FenceSeen = null | { readonly bytes: string; readonly fence: GcFence | null };

/** Whether `seen` lets a publish go on: no fence, an idle one, or one whose gc died (expired). */
export function fenceIsIdle(seen: FenceSeen, now: number): boolean {
  if (seen === null) return true;
  if (seen.fence === null) return false;
  return seen.fence.state === 'idle' || Date.parse(seen.fence.expiresAt) < now;
}

/**
 * Rule 1: a publish may write its pointer when the fence it reads now is the
 * one it read before deciding what to reuse, and that one is idle: no gc
 * began deleting in between, and none was deleting then.
 */
export function mayCommit(before: FenceSeen, after: FenceSeen, now: number): boolean {
  const same = before === null ? after === null : after !== null && before.bytes === after.bytes;
  return same && fenceIsIdle(after, now);
}

/** Rule 2: a stored object the previous pointer does not name is reused only when written at `since` or later. */
export function mayReuse(lastModified: number | null, since: number): boolean {
  return lastModified !== null && lastModified >= since;
}

/** Rule 3 (and the listing's own test): gc deletes only what no root names and what was written before the grace began. */
export function mayDelete(key: string, lastModified: number | null, named: ReadonlySet<string>, windowStart: number): boolean {
  return lastModified !== null && !named.has(key) && lastModified < windowStart;
}
