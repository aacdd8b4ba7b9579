// The pack store of scale-out replicas: packs read from a publication in
// object storage (format: core/publication.ts), not from a directory.
//
// `refresh()` follows the pointer: a conditional GET of current.json (an
// unchanged pointer costs one 304), and for a new one the directory.json and
// every index it names (indexes are immutable, so those already held are
// reused), then a check that every blob they name exists. Only when all of
// it is whole and valid does the store switch, in one assignment; a
// malformed publication (bad JSON, an index that does not hash to its
// version, a missing index, directory or blob, a pointer to nothing) is
// refused whole, logged once, and the previous one stays served.
//
// A refused pointer is not asked for again while its etag stands, except
// every REFUSED_RECHECK_POLLS polls, when it is read in full: a store that
// is not atomic (s3rver writes the new etag before the body is on disk)
// can answer a new pointer torn once, and that etag must not stay refused
// for good. A pointer whose bytes are the ones refused is refused again
// without loading anything.
//
// `read` looks the file up in the current snapshot (a denied request never
// gets here: routes decide first), then takes its blob from the cache or the
// store; bytes that do not match the sha256 are an integrity error and never
// served. A store that is down or slow is an `unavailable` error (503 with a
// retry hint); plans keep being served from the last good publication.

import { KnowledgeError } from '../../core/errors.js';
import { findFile, type PlanFile, type ScopeSnapshot } from '../../core/session/plan.js';
import {
  MAX_DIRECTORY_BYTES,
  MAX_INDEX_BYTES,
  MAX_POINTER_BYTES,
  MAX_PUBLICATION_INDEX_BYTES,
  POINTER_KEY,
  PublicationError,
  blobKey,
  directoryKey,
  indexKey,
  parseIndex,
  parsePointer,
  samePublication,
  type Pointer,
} from '../../core/publication.js';
import { sha256Hex } from '../../core/sha256.js';
import { CONTROL_PLANE_METRICS as M, NO_METRICS, type MetricsRecorder } from '../../core/metrics.js';
import { compareScopes, type ScopeName } from '../../core/scope.js';
import { formatBytes } from '../../core/text/units.js';
import { eachLimited, presentBlobs } from './blob-presence.js';
import { isObjectStoreError, type ObjectStore } from '../objects/object-store.js';
import { BlobCache } from './blob-cache.js';
import { ByteBudget } from './byte-budget.js';
import { parseDirectory, type Directory } from '../data-dir/directory.js';
import type { PackFile, PackStore } from '../pack-store.js';

const PARALLEL = 16;
/** A refused pointer is read in full again every this many polls (one small GET). */
export const REFUSED_RECHECK_POLLS = 10;

export interface BucketPackStoreOptions {
  readonly store: ObjectStore;
  readonly maxFileSize: number;
  readonly cacheBytes: number;
  readonly cacheDir?: string | undefined;
  readonly cacheDiskBytes?: number;
  readonly log: (line: string) => void;
  readonly metrics?: MetricsRecorder;
  /** Index bytes that may be loading at once, all indexes together (default MAX_INDEX_BYTES: one of the largest). */
  readonly indexLoadBudgetBytes?: number;
  /** A publication whose indexes total more is refused (default MAX_PUBLICATION_INDEX_BYTES). */
  readonly maxPublicationIndexBytes?: number;
}

interface Publication {
  readonly pointer: Pointer;
  readonly etag: string | undefined;
  readonly directory: Directory;
  readonly byScope: ReadonlyMap<ScopeName, ScopeSnapshot>;
  readonly sorted: readonly ScopeSnapshot[];
  /** Every blob the publication names (checked present when it was taken). */
  readonly blobs: ReadonlySet<string>;
  /** The size of each scope's index, in bytes: their total is capped. */
  readonly indexBytes: ReadonlyMap<ScopeName, number>;
}

export type RefreshOutcome = 'unchanged' | 'switched' | 'refused';

export class BucketPackStore implements PackStore {
  private current: Publication | null = null;
  /** The publication before `current`: opens that name its versions still get them (see `read`). */
  private previous: Publication | null = null;
  /** The pointer that was refused: its etag (not asked for again until it changes) and its bytes' sha256. */
  private refused: { readonly etag: string | undefined; readonly sha256: string; polls: number } | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly blobs: BlobCache;
  private readonly logged = new Set<string>();
  generation = 0;
  private readonly metrics: MetricsRecorder;
  private readonly indexBudget: ByteBudget;
  private readonly maxPublicationIndexBytes: number;

  constructor(private readonly options: BucketPackStoreOptions) {
    const store = options.store;
    this.metrics = options.metrics ?? NO_METRICS;
    this.indexBudget = new ByteBudget(options.indexLoadBudgetBytes ?? MAX_INDEX_BYTES);
    this.maxPublicationIndexBytes = options.maxPublicationIndexBytes ?? MAX_PUBLICATION_INDEX_BYTES;
    this.blobs = new BlobCache({
      memoryBytes: options.cacheBytes,
      diskDir: options.cacheDir,
      // Stryker disable next-line ConditionalExpression: a diskBytes of undefined is the cache's default, as when it is left out
      ...(options.cacheDiskBytes !== undefined ? { diskBytes: options.cacheDiskBytes } : {}),
      log: options.log,
      fetch: async (sha, size) => {
        let got;
        try {
          got = await store.get(blobKey(sha), { maxBytes: size });
        } catch (err) {
          if (isObjectStoreError(err) && err.failure === 'too_large') throw this.corrupt(sha, `larger than the ${size} bytes its index says`);
          throw err;
        }
        if (got === null || got === 'not-modified') {
          throw new KnowledgeError('unavailable', `${store.description}: ${blobKey(sha)} is missing (deleted after it was published?)`);
        }
        if (got.bytes.length !== size) throw this.corrupt(sha, `${got.bytes.length} bytes, its index says ${size}`);
        return got.bytes;
      },
      // A bad copy on disk is logged by the cache itself, which drops it and fetches the blob again.
      corrupt: (sha, actual, source) => (source === 'disk' ? this.integrityError(sha, `cached copy on disk hashes to ${actual}`) : this.corrupt(sha, `hashes to ${actual}`)),
    });
  }

  private integrityError(sha: string, problem: string): KnowledgeError {
    return new KnowledgeError('integrity', `${this.options.store.description}: ${blobKey(sha)} is corrupt (${problem}); not served`);
  }

  /** The integrity error of bytes the store answered, logged once. */
  private corrupt(sha: string, problem: string): KnowledgeError {
    const err = this.integrityError(sha, problem);
    this.logOnce(err.message);
    return err;
  }

  /** Logs `line` unless it was logged already; true when it was logged now. */
  private logOnce(line: string): boolean {
    if (this.logged.has(line)) return false;
    // Stryker disable next-line ConditionalExpression,EqualityOperator,CallExpression: a bound on memory only; each line is still logged once between clears
    if (this.logged.size > 10_000) this.logged.clear();
    this.logged.add(line);
    this.options.log(line);
    return true;
  }

  /** The publication being served; null before the first `refresh` succeeded. */
  get pointer(): Pointer | null {
    return this.current?.pointer ?? null;
  }

  /** Every publication served now: the current one, then the previous one opens may still name. */
  get servedPointers(): Pointer[] {
    return [this.current, this.previous].flatMap((p) => (p === null ? [] : [p.pointer]));
  }

  /** directory.json of the publication being served. */
  get directory(): Directory {
    if (this.current === null) throw new KnowledgeError('unavailable', `${this.options.store.description}: no publication loaded yet`);
    return this.current.directory;
  }

  cacheCounts(): { hits: number; misses: number } {
    return { hits: this.blobs.hits, misses: this.blobs.misses };
  }

  scopes(): readonly ScopeSnapshot[] {
    return this.current?.sorted ?? [];
  }

  snapshot(scope: ScopeName): ScopeSnapshot | undefined {
    return this.current?.byScope.get(scope);
  }

  /**
   * Follows the pointer. Throws an ObjectStoreError when the store is
   * unreachable (nothing changes), and an `unavailable` KnowledgeError when
   * there is no valid publication at all yet; once one is served, a
   * malformed new one is logged and answered `'refused'`.
   */
  refresh(): Promise<RefreshOutcome> {
    const next = this.queue.then(() => this.doRefresh());
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async doRefresh(): Promise<RefreshOutcome> {
    const store = this.options.store;
    const refused = this.refused;
    // Stryker disable next-line UpdateOperator: counting down, -10 % 10 is -0, which === 0 too: the same polls are rechecks
    const recheck = refused !== null && ++refused.polls % REFUSED_RECHECK_POLLS === 0;
    const known = recheck ? undefined : (refused?.etag ?? this.current?.etag);
    // Stryker disable next-line ConditionalExpression: an ifNoneMatch of undefined sends no condition, as when it is left out
    const got = await store.get(POINTER_KEY, { maxBytes: MAX_POINTER_BYTES, ...(known !== undefined ? { ifNoneMatch: known } : {}) });
    if (got === 'not-modified') return refused !== null ? 'refused' : 'unchanged';
    if (got !== null && refused !== null && sha256Hex(got.bytes) === refused.sha256) return 'refused';
    try {
      if (got === null) throw new PublicationError(POINTER_KEY, 'missing: there is no publication (run knowledgefs publish --data DIR --store ...)');
      const pointer = parsePointer(got.bytes);
      const current = this.current;
      if (current !== null && samePublication(current.pointer, pointer)) {
        this.current = { ...current, pointer, etag: got.etag };
        this.refused = null;
        return 'unchanged';
      }
      const next = await this.load(pointer, got.etag);
      this.install(next);
      this.metrics.inc(M.publications, { result: 'taken' });
      return 'switched';
    } catch (err) {
      if (!(err instanceof PublicationError)) throw err;
      const where = `${store.description}: refusing the publication: ${err.message}`;
      if (this.current === null) throw new KnowledgeError('unavailable', where);
      // A pointer that is gone is asked for again every poll: count (and log) each refusal once.
      if (this.logOnce(`${where}; still serving the one published ${this.current.pointer.publishedAt}`)) this.metrics.inc(M.publications, { result: 'refused' });
      this.refused = got === null ? null : { etag: got.etag, sha256: sha256Hex(got.bytes), polls: 0 };
      return 'refused';
    }
  }

  private async load(pointer: Pointer, etag: string | undefined): Promise<Publication> {
    const store = this.options.store;
    let directory: Directory;
    if (this.current !== null && this.current.pointer.directory === pointer.directory) directory = this.current.directory;
    else {
      const key = directoryKey(pointer.directory);
      const got = await store.get(key, { maxBytes: MAX_DIRECTORY_BYTES });
      if (got === null || got === 'not-modified') throw new PublicationError(key, `missing (named by ${POINTER_KEY})`);
      if (sha256Hex(got.bytes) !== pointer.directory) throw new PublicationError(key, 'does not hash to its name');
      try {
        directory = parseDirectory(JSON.parse(got.bytes.toString('utf8')), key);
      } catch (err) {
        throw new PublicationError(key, err instanceof KnowledgeError ? err.message.replace(`${key}: `, '') : `not valid JSON (${err instanceof Error ? err.message : String(err)})`);
      }
    }
    const byScope = new Map<ScopeName, ScopeSnapshot>();
    const indexBytes = new Map<ScopeName, number>();
    let total = 0;
    const count = (scope: ScopeName, version: string, bytes: number): void => {
      indexBytes.set(scope, bytes);
      total += bytes;
      if (total > this.maxPublicationIndexBytes) {
        throw new PublicationError(indexKey(scope, version), `the publication's indexes total more than ${formatBytes(this.maxPublicationIndexBytes)}, the most a replica holds for them`);
      }
    };
    await eachLimited(Object.entries(pointer.scopes), PARALLEL, async ([scope, version]) => {
      const held = this.current?.byScope.get(scope);
      if (held !== undefined && held.version === version) {
        // Stryker disable next-line OptionalChaining: `held` came from this.current, so it is there
        count(scope, version, this.current?.indexBytes.get(scope) ?? 0);
        byScope.set(scope, held);
        return;
      }
      const loaded = await this.loadIndex(scope, version);
      count(scope, version, loaded.bytes);
      byScope.set(scope, loaded.snapshot);
    });
    const blobs = new Set<string>();
    for (const s of byScope.values()) for (const f of s.files) blobs.add(f.sha256);
    await this.checkBlobs(blobs, byScope);
    const sorted = [...byScope.values()].sort((a, b) => compareScopes(a.scope, b.scope));
    return { pointer, etag, directory, byScope, sorted, blobs, indexBytes };
  }

  /**
   * One index, fetched and parsed within the index load budget, so that
   * indexes loading at once hold at most that many bytes together (every
   * replica loads the same pointer at start; 16 padded indexes of 256 MiB
   * would be 4 GiB). Each first reserves a share of the budget and asks for
   * no more; one larger than that is asked for again holding the budget's
   * largest reservation (a declared length over the limit costs one refused
   * request, read no further).
   */
  private async loadIndex(scope: ScopeName, version: string): Promise<{ snapshot: ScopeSnapshot; bytes: number }> {
    const key = indexKey(scope, version);
    const attempt = (maxBytes: number) =>
      this.indexBudget.with(maxBytes, async () => {
        const got = await this.options.store.get(key, { maxBytes });
        if (got === null || got === 'not-modified') throw new PublicationError(key, `missing (named by ${POINTER_KEY})`);
        return { snapshot: parseIndex(got.bytes, scope, version, this.options.maxFileSize), bytes: got.bytes.length };
      });
    const tooLarge = (err: unknown) => isObjectStoreError(err) && err.failure === 'too_large';
    const share = Math.min(MAX_INDEX_BYTES, Math.floor(this.indexBudget.total / PARALLEL));
    const largest = Math.min(MAX_INDEX_BYTES, this.indexBudget.total);
    try {
      return await attempt(share);
    } catch (err) {
      if (!tooLarge(err) || share === largest) throw this.oversized(err, key, largest);
    }
    try {
      return await attempt(largest);
    } catch (err) {
      throw this.oversized(err, key, largest);
    }
  }

  private oversized(err: unknown, key: string, largest: number): unknown {
    if (!isObjectStoreError(err) || err.failure !== 'too_large') return err;
    const limit = largest === MAX_INDEX_BYTES ? 'the largest index a replica accepts' : 'the index load budget';
    return new PublicationError(key, `larger than ${formatBytes(largest)}, ${limit}`);
  }

  /** Every blob the new publication names must exist; those the current one names were checked already. */
  private async checkBlobs(blobs: ReadonlySet<string>, byScope: ReadonlyMap<ScopeName, ScopeSnapshot>): Promise<void> {
    const unseen = [...blobs].filter((sha) => this.current?.blobs.has(sha) !== true);
    const present = await presentBlobs(this.options.store, unseen);
    const missing = unseen.find((sha) => !present.has(sha));
    if (missing === undefined) return;
    // The message names the first file whose blob it is.
    let named: string | undefined;
    for (const s of byScope.values()) {
      const f = s.files.find((file) => file.sha256 === missing);
      if (f !== undefined) {
        named = `${s.scope}/${f.path}`;
        break;
      }
    }
    throw new PublicationError(blobKey(missing), `missing (the blob of ${named ?? missing})`);
  }

  private install(next: Publication): void {
    this.previous = this.current;
    this.current = next;
    this.refused = null;
    this.generation++;
  }

  private locate(scope: ScopeName, path: string, publication = this.current): PlanFile | undefined {
    return findFile(publication?.byScope.get(scope), path);
  }

  /**
   * With `version` (the sha256 the caller's plan names) other than the
   * current one, the previous publication's version of the path is served
   * when it is that one: a mount whose plan is one publication behind
   * reads the version its tree shows, whole, instead of failing the open.
   * Only a path the current publication still has: one it removed is gone
   * at once, whatever version is named (a file published by mistake must
   * not stay readable for one more publication).
   */
  async read(scope: ScopeName, path: string, version?: string): Promise<PackFile | null> {
    const current = this.locate(scope, path);
    if (current === undefined) return null;
    const earlier = current.sha256 === version ? undefined : this.locate(scope, path, this.previous);
    const file = earlier !== undefined && earlier.sha256 === version ? earlier : current;
    const bytes = await this.blobs.get(file.sha256, file.size);
    return { bytes, sha256: file.sha256, size: file.size, mtimeMs: file.mtimeMs };
  }

  /** Only blobs already in memory: anything else needs the store (`read`). */
  readSmallSync(scope: ScopeName, path: string): PackFile | null | undefined {
    const file = this.locate(scope, path);
    if (file === undefined) return null;
    const bytes = this.blobs.peek(file.sha256);
    if (bytes === undefined) return undefined;
    return { bytes, sha256: file.sha256, size: file.size, mtimeMs: file.mtimeMs };
  }
}
