// Which blobs a bucket holds, asked cheaply: one HEAD each when there are a
// few, one listing of blobs/ when there are many (a HEAD costs a round trip;
// a listing page names 1 000 keys). Shared by `publish` (what to upload) and
// replicas (is a new publication whole).

import { BLOB_PREFIX, blobKey } from '../../core/publication.js';
import { isSha256 } from '../../core/sha256.js';
import type { ObjectStore, SweepableStore } from '../objects/object-store.js';

/** Above this many blobs to ask about, one listing of blobs/ beats a HEAD each. */
export const HEAD_AT_MOST = 256;
/** Requests in flight at once when asking blob by blob. */
const PARALLEL = 16;

/** Runs `work` over `items`, `limit` at a time; the first error stops new work and is thrown. */
export async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: { error: unknown } | null = null;
  const worker = async () => {
    while (failed === null && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        failed ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed !== null) throw (failed as { error: unknown }).error;
}

/** The subset of `wanted` (sha256s) the store holds. `has` wraps each HEAD (e.g. with retries). */
export async function presentBlobs(
  store: ObjectStore,
  wanted: readonly string[],
  has: (key: string) => Promise<boolean> = (key) => store.has(key),
): Promise<Set<string>> {
  const present = new Set<string>();
  if (wanted.length <= HEAD_AT_MOST) {
    await eachLimited(wanted, PARALLEL, async (sha) => {
      if (await has(blobKey(sha))) present.add(sha);
    });
    return present;
  }
  const want = new Set(wanted);
  for await (const key of store.list(BLOB_PREFIX)) {
    const sha = key.slice(BLOB_PREFIX.length);
    if (isSha256(sha) && want.has(sha)) present.add(sha);
  }
  return present;
}

/**
 * The subset of `wanted` the store holds that was written at `since` or
 * later: what `publish` may reuse without uploading it again. An older blob
 * no publication names may be one `gc` is deleting right now; uploading it
 * again makes it young, and gc keeps what is younger than its grace.
 */
export async function recentBlobs(
  store: SweepableStore,
  wanted: readonly string[],
  since: number,
  lastModified: (key: string) => Promise<number | null> = (key) => store.lastModified(key),
): Promise<Set<string>> {
  const recent = new Set<string>();
  if (wanted.length <= HEAD_AT_MOST) {
    await eachLimited(wanted, PARALLEL, async (sha) => {
      const at = await lastModified(blobKey(sha));
      if (at !== null && at >= since) recent.add(sha);
    });
    return recent;
  }
  const want = new Set(wanted);
  for await (const entry of store.listObjects(BLOB_PREFIX)) {
    const sha = entry.key.slice(BLOB_PREFIX.length);
    if (isSha256(sha) && want.has(sha) && entry.lastModified >= since) recent.add(sha);
  }
  return recent;
}
