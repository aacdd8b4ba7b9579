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
// Which objects are present: those named by the previous publication are
// taken as present (its readers need them); others (blobs, indexes,
// directory.json alike) are asked about (blob-presence.ts), and reused only
// when written within the last hour: an older one nothing names may be one
// `gc` is deleting (publish-uploads.ts). Around that stage publish reads
// gc's fence (gc.json) twice, and decides and uploads again when a gc was
// deleting in between (core/gc-fence.ts): only then does it write the
// pointer.

import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import type { PlanFile, ScopeSnapshot } from '../../core/session/plan.js';
import {
  MAX_INDEX_BYTES,
  MAX_POINTER_BYTES,
  POINTER_KEY,
  PublicationError,
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
import { DirPackStore } from '../data-dir/dir-pack-store.js';
import { readDirectoryFile } from '../data-dir/directory.js';
import { eachLimited } from './blob-presence.js';
import { FenceReader } from './gc-fence-reader.js';
import { uploadBlobs, uploadUnlessRecent, withRetry, type PublishProgress, type Stage } from './publish-uploads.js';
import { REUSE_YOUNGER_THAN_MS, mayCommit } from '../../core/gc-fence.js';
import type { ObjectStore } from '../objects/object-store.js';

export { REUSE_YOUNGER_THAN_MS } from '../../core/gc-fence.js';
export type { PublishProgress } from './publish-uploads.js';

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
  /** How often to look again while a gc is deleting in the bucket (default 1 s). */
  readonly gcPollMs?: number;
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

  // Decide and upload until no gc deleted anything meanwhile (core/gc-fence.ts, rule 1).
  const uploaded = { blobs: 0, bytes: 0, indexes: 0, directories: 0 };
  const fences = new FenceReader(store, log, options.gcPollMs ?? 1_000);
  for (;;) {
    const before = await fences.whenIdle();
    const stage: Stage = { store, packs, dataDir, concurrency, since: Date.now() - REUSE_YOUNGER_THAN_MS, ...(options.progress ? { progress: options.progress } : {}), progressIntervalMs: options.progressIntervalMs ?? 1_000 };
    const blobs = await uploadBlobs(stage, unknown, sources);
    uploaded.blobs += blobs.blobs;
    uploaded.bytes += blobs.bytes;
    await eachLimited(snapshots, concurrency, async (s) => {
      if (previous?.scopes[s.scope] === s.version) return;
      if (await uploadUnlessRecent(stage, indexKey(s.scope, s.version), () => serializeIndex(s))) uploaded.indexes++;
    });
    if (previous?.directory !== directorySha && (await uploadUnlessRecent(stage, directoryKey(directorySha), () => directoryBytes))) uploaded.directories++;
    if (mayCommit(before, await fences.read(), Date.now())) break;
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
    uploaded,
    blobs: sources.size,
  };
}
