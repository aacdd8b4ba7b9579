// The upload stage of `publish` (publish.ts): the blobs, indexes and
// directory.json the bucket lacks, or holds only as old objects nothing
// names (core/gc-fence.ts, rule 2: such an object may be one gc is
// deleting; uploading it again makes it young, and gc spares the young).
// Retries each request a few times; a file that changed while publishing
// stops the publish before the pointer.

import { join } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import { mayReuse } from '../../core/gc-fence.js';
import { blobKey } from '../../core/publication.js';
import type { PlanFile } from '../../core/session/plan.js';
import type { ScopeName } from '../../core/scope.js';
import { scopeDir, type DirPackStore } from '../data-dir/dir-pack-store.js';
import { eachLimited, presentBlobs, recentBlobs } from './blob-presence.js';
import { isObjectStoreError, isSweepable, type ObjectStore } from '../objects/object-store.js';

const ATTEMPTS = 3;

export async function withRetry<T>(what: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await what();
    } catch (err) {
      if (attempt >= ATTEMPTS || !isObjectStoreError(err) || err.failure === 'too_large') throw err;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt * attempt));
    }
  }
}

export interface PublishProgress {
  readonly blobsDone: number;
  readonly blobsTotal: number;
  readonly bytesDone: number;
  readonly bytesTotal: number;
}

export interface Stage {
  readonly store: ObjectStore;
  readonly packs: DirPackStore;
  readonly dataDir: string;
  readonly concurrency: number;
  /** Stored objects written at this instant or later are reused; older ones are uploaded again. */
  readonly since: number;
  readonly progress?: (p: PublishProgress) => void;
  readonly progressIntervalMs: number;
}

/** Uploads the blobs of `wanted` (sha256s) the store lacks or holds only as old objects. */
export async function uploadBlobs(
  stage: Stage,
  wanted: readonly string[],
  sources: ReadonlyMap<string, { scope: ScopeName; file: PlanFile }>,
): Promise<{ blobs: number; bytes: number }> {
  const { store, packs, dataDir } = stage;
  const present = isSweepable(store)
    ? await recentBlobs(store, wanted, stage.since, (key) => withRetry(() => store.lastModified(key)))
    : await presentBlobs(store, wanted, (key) => withRetry(() => store.has(key)));
  const missing = wanted.filter((sha) => !present.has(sha)).map((sha) => sources.get(sha) as { scope: ScopeName; file: PlanFile });

  const progress = { blobsDone: 0, blobsTotal: missing.length, bytesDone: 0, bytesTotal: missing.reduce((n, m) => n + m.file.size, 0) };
  const report = stage.progress;
  // Short uploads print nothing; long ones a line a second and a last one when done.
  let reported = false;
  const timer = report && missing.length > 0
    ? setInterval(() => {
        reported = true;
        report({ ...progress });
      }, stage.progressIntervalMs)
    : null;
  try {
    await eachLimited(missing, stage.concurrency, async ({ scope, file }) => {
      const read = await packs.read(scope, file.path);
      const where = join(scopeDir(dataDir, scope) ?? dataDir, file.path);
      if (read === null || read.sha256 !== file.sha256) {
        throw new KnowledgeError('unavailable', `${where} changed or vanished while publishing; nothing was switched: run publish again`);
      }
      await withRetry(() => store.put(blobKey(file.sha256), read.bytes));
      progress.blobsDone++;
      progress.bytesDone += read.bytes.length;
    });
  } finally {
    if (timer !== null) clearInterval(timer);
  }
  if (report && reported) report({ ...progress });
  return { blobs: missing.length, bytes: progress.bytesDone };
}

/** Uploads an index or directory.json unless the store holds it written since `stage.since`; true when it uploaded. */
export async function uploadUnlessRecent(stage: Stage, key: string, bytes: () => Buffer): Promise<boolean> {
  const { store } = stage;
  const reusable = isSweepable(store) ? mayReuse(await withRetry(() => store.lastModified(key)), stage.since) : await withRetry(() => store.has(key));
  if (reusable) return false;
  await withRetry(() => store.put(key, bytes(), 'application/json'));
  return true;
}
