// `knowledgefs publish`: turns a data directory into a publication in object
// storage (format: core/publication.ts).
//
// Order is the safety property: scan and hash the directory, upload the
// blobs the bucket lacks, then the indexes and directory.json, and only when
// every one of those is stored, the pointer. A publish that fails anywhere
// before the pointer leaves the previous publication current (what it did
// upload is immutable and content-addressed: harmless, and reused by the
// next attempt). Publishing the same directory twice uploads nothing and
// leaves the pointer alone.
//
// Which blobs are present: those named by the previous publication's
// indexes are taken as present (its readers need them); others are asked
// about (blob-presence.ts), and reused only when written within the last
// hour: an older one nothing names may be one `gc` is deleting.

import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import type { PlanFile, ScopeSnapshot } from '../../core/session/plan.js';
import {
  MAX_INDEX_BYTES,
  MAX_POINTER_BYTES,
  POINTER_KEY,
  PublicationError,
  blobKey,
  directoryKey,
  historyKey,
  indexKey,
  parseIndex,
  parsePointer,
  pointerFor,
  samePublication,
  serializeIndex,
  serializePointer,
  type Pointer,
} from '../../core/publication.js';
import { sha256Hex } from '../../core/sha256.js';
import type { ScopeName } from '../../core/scope.js';
import { DirPackStore, scopeDir } from '../data-dir/dir-pack-store.js';
import { readDirectoryFile } from '../data-dir/directory.js';
import { eachLimited, presentBlobs, recentBlobs } from './blob-presence.js';
import { isObjectStoreError, isSweepable, type ObjectStore } from '../objects/object-store.js';

const ATTEMPTS = 3;
/**
 * A stored blob no publication names is reused only when written within
 * this long; older ones are uploaded again (gc may be deleting them: see
 * recentBlobs). gc's grace must exceed it plus the longest publish.
 */
export const REUSE_YOUNGER_THAN_MS = 3_600_000;

export interface PublishProgress {
  readonly blobsDone: number;
  readonly blobsTotal: number;
  readonly bytesDone: number;
  readonly bytesTotal: number;
}

export interface PublishOptions {
  readonly dataDir: string;
  readonly store: ObjectStore;
  readonly maxFileSize: number;
  /** Uploads in flight at once. Default 16. */
  readonly concurrency?: number;
  /** Warnings (skipped files, a malformed previous pointer). */
  readonly log: (line: string) => void;
  /** Called about every `progressIntervalMs` while blobs upload, and once at the end. */
  readonly progress?: (p: PublishProgress) => void;
  readonly progressIntervalMs?: number;
  readonly now?: () => number;
}

export type ScopeStatus = 'added' | 'changed' | 'removed' | 'unchanged';

export interface ScopeChange {
  readonly scope: ScopeName;
  readonly status: ScopeStatus;
  readonly files: number;
  /** File counts against the previous version; absent when it could not be read. */
  readonly added?: number;
  readonly modified?: number;
  readonly removed?: number;
}

export interface PublishResult {
  /** False when the bucket already held exactly this publication (nothing written). */
  readonly changed: boolean;
  readonly pointer: Pointer;
  readonly previous: Pointer | null;
  readonly scopes: readonly ScopeChange[];
  readonly directory: 'added' | 'changed' | 'unchanged';
  readonly uploaded: { readonly blobs: number; readonly bytes: number; readonly indexes: number; readonly directories: number };
  /** Distinct blobs the publication names. */
  readonly blobs: number;
}

async function withRetry<T>(what: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await what();
    } catch (err) {
      if (attempt >= ATTEMPTS || !isObjectStoreError(err) || err.failure === 'too_large') throw err;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt * attempt));
    }
  }
}

async function readPrevious(store: ObjectStore, log: (line: string) => void): Promise<Pointer | null> {
  const got = await withRetry(() => store.get(POINTER_KEY, { maxBytes: MAX_POINTER_BYTES }));
  if (got === null || got === 'not-modified') return null;
  try {
    return parsePointer(got.bytes);
  } catch (err) {
    if (!(err instanceof PublicationError)) throw err;
    log(`warning: the current publication's pointer is malformed (${err.message}); this publish replaces it`);
    return null;
  }
}

/** The previous version's index, for the diff and the blobs it vouches for; null when unreadable. */
async function readIndex(store: ObjectStore, scope: ScopeName, version: string): Promise<ScopeSnapshot | null> {
  try {
    const got = await withRetry(() => store.get(indexKey(scope, version), { maxBytes: MAX_INDEX_BYTES }));
    if (got === null || got === 'not-modified') return null;
    return parseIndex(got.bytes, scope, version, Number.MAX_SAFE_INTEGER);
  } catch (err) {
    if (err instanceof PublicationError) return null;
    throw err;
  }
}

function diff(before: ScopeSnapshot, after: ScopeSnapshot): { added: number; modified: number; removed: number } {
  const old = new Map(before.files.map((f) => [f.path, f.sha256]));
  let added = 0;
  let modified = 0;
  for (const f of after.files) {
    const sha = old.get(f.path);
    if (sha === undefined) added++;
    else if (sha !== f.sha256) modified++;
    old.delete(f.path);
  }
  return { added, modified, removed: old.size };
}

export async function publish(options: PublishOptions): Promise<PublishResult> {
  const { dataDir, store, log } = options;
  const concurrency = options.concurrency ?? 16;
  if (!(await stat(dataDir).then((s) => s.isDirectory(), () => false))) {
    throw new KnowledgeError('config', `--data ${dataDir}: not a directory (it needs directory.json, account/ and teams/<id>/)`);
  }
  // directory.json first: an invalid one stops the publish before anything is uploaded.
  const { bytes: directoryBytes } = await readDirectoryFile(join(dataDir, 'directory.json'));
  const directorySha = sha256Hex(directoryBytes);

  const packs = new DirPackStore(dataDir, { maxFileSize: options.maxFileSize, log: (line) => log(`warning: ${line}`) });
  await packs.scan();
  const snapshots = packs.scopes();

  const previous = await readPrevious(store, log);
  const previousIndexes = new Map<ScopeName, ScopeSnapshot>();
  if (previous !== null) {
    await eachLimited(Object.entries(previous.scopes), concurrency, async ([scope, version]) => {
      const index = await readIndex(store, scope, version);
      if (index !== null) previousIndexes.set(scope, index);
    });
  }

  // Blobs: each distinct sha256 once, from the first file that has it.
  const known = new Set<string>();
  for (const index of previousIndexes.values()) for (const f of index.files) known.add(f.sha256);
  const sources = new Map<string, { scope: ScopeName; file: PlanFile }>();
  for (const s of snapshots) for (const file of s.files) if (!sources.has(file.sha256)) sources.set(file.sha256, { scope: s.scope, file });
  const unknown = [...sources.keys()].filter((sha) => !known.has(sha));
  const now = options.now ?? Date.now;
  const present = isSweepable(store)
    ? await recentBlobs(store, unknown, Date.now() - REUSE_YOUNGER_THAN_MS, (key) => withRetry(() => store.lastModified(key)))
    : await presentBlobs(store, unknown, (key) => withRetry(() => store.has(key)));
  const missing = unknown.filter((sha) => !present.has(sha)).map((sha) => sources.get(sha) as { scope: ScopeName; file: PlanFile });

  const progress: PublishProgress & { blobsDone: number; bytesDone: number } = {
    blobsDone: 0,
    blobsTotal: missing.length,
    bytesDone: 0,
    bytesTotal: missing.reduce((n, m) => n + m.file.size, 0),
  };
  const report = options.progress;
  // Short uploads print nothing; long ones a line a second and a last one when done.
  let reported = false;
  const timer = report && missing.length > 0
    ? setInterval(() => {
        reported = true;
        report({ ...progress });
      }, options.progressIntervalMs ?? 1_000)
    : null;
  try {
    await eachLimited(missing, concurrency, async ({ scope, file }) => {
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

  let indexes = 0;
  await eachLimited(snapshots, concurrency, async (s) => {
    if (previous?.scopes[s.scope] === s.version) return;
    const key = indexKey(s.scope, s.version);
    if (await withRetry(() => store.has(key))) return;
    await withRetry(() => store.put(key, serializeIndex(s), 'application/json'));
    indexes++;
  });
  let directories = 0;
  if (previous?.directory !== directorySha && !(await withRetry(() => store.has(directoryKey(directorySha))))) {
    await withRetry(() => store.put(directoryKey(directorySha), directoryBytes, 'application/json'));
    directories++;
  }

  let pointer = pointerFor(directorySha, snapshots, new Date(now()).toISOString());
  const changed = previous === null || !samePublication(previous, pointer);
  if (changed) {
    // The history copy first: every pointer that was ever current is in the history gc reads.
    await withRetry(() => store.put(historyKey(pointer), serializePointer(pointer), 'application/json'));
    await withRetry(() => store.put(POINTER_KEY, serializePointer(pointer), 'application/json'));
  }
  else pointer = previous;

  const scopes: ScopeChange[] = [];
  for (const s of snapshots) {
    const before = previous?.scopes[s.scope];
    const old = previousIndexes.get(s.scope);
    const status: ScopeStatus = before === undefined ? 'added' : before === s.version ? 'unchanged' : 'changed';
    scopes.push({ scope: s.scope, status, files: s.files.length, ...(status === 'changed' && old !== undefined ? diff(old, s) : {}) });
  }
  for (const scope of Object.keys(previous?.scopes ?? {})) {
    if (!snapshots.some((s) => s.scope === scope)) scopes.push({ scope, status: 'removed', files: 0 });
  }
  return {
    changed,
    pointer,
    previous,
    scopes,
    directory: previous === null ? 'added' : previous.directory === directorySha ? 'unchanged' : 'changed',
    uploaded: { blobs: missing.length, bytes: progress.bytesDone, indexes, directories },
    blobs: sources.size,
  };
}
