// The filesystem core: what each FUSE operation means, with no FUSE in it.
// Methods take paths and return plain values or throw (KnowledgeError or
// ErrnoError); the adapter turns that into callbacks and errnos, and tests
// drive this class directly, in-process.
//
// Hot path: getattr, readdir and read are synchronous Map/Buffer work on the
// current tree and the handle table; only `open` goes to the network.
//
// Open:
//   1. any write intent → EROFS; not in the tree → ENOENT; a directory → EISDIR;
//   2. the per-scope grant (cached ≤ --grant-ttl) and the content (memory →
//      disk → control plane, verified against the plan's sha256) are
//      obtained in parallel; both must succeed, within --request-timeout;
//      a miss may read the rest of the directory ahead (read-ahead.ts);
//   3. denied → ENOENT and the scope leaves the tree at once (onDenied);
//      the file vanished on the control plane → ENOENT and a sync is asked for;
//   4. the verified Buffer is pinned to the handle: every read of that handle
//      serves that version, never another, while the tree holds its scope
//      (a revoked scope's handles read ESTALE).
//
// With a binding whose versions of a path share one page cache
// (`changedFiles` set; see changed-files.ts), an open of a recently changed
// path first waits until the kernel will drop the old pages, and a read of a
// handle whose path now holds another version fails with ESTALE, so old
// bytes never re-enter the cache a later open reads.

import { constants } from 'node:fs';
import { KnowledgeError, isKnowledgeError } from '../core/errors.js';
import type { FileNode, NodeStat, Tree } from '../core/tree/tree.js';
import type { ChangedFiles } from './fuse/changed-files.js';
import { EBADF, EISDIR, ENOTDIR, ESTALE, ErrnoError } from './fuse/errno.js';
import type { ContentFetcher } from './content/fetcher.js';
import type { GrantCache, GrantListener } from './content/grant-cache.js';
import type { DirectoryReadAhead } from './content/read-ahead.js';

export interface FilesystemDeps {
  /** The current tree; swapped whole by the sync loop. */
  readonly tree: () => Tree;
  readonly grants: GrantCache;
  readonly fetcher: ContentFetcher;
  /** Told of every open whose bytes are not in memory (directory read-ahead). */
  readonly readAhead?: Pick<DirectoryReadAhead, 'onMiss'>;
  /** Bound on one open, grant and fetch together (--request-timeout). */
  readonly requestTimeoutMs: number;
  /** The control plane denied `scope`: remove it from the tree now. */
  readonly onDenied?: (scope: string) => void;
  /** The control plane no longer has a file the tree shows: sync soon. */
  readonly onMissing?: (path: string) => void;
  /**
   * Set when the FUSE binding shares one page cache among all versions of a
   * path: recently changed paths (opens wait), and stale handles get ESTALE.
   */
  readonly changedFiles?: ChangedFiles;
}

/** The version a handle serves. */
interface Pinned {
  readonly path: string;
  readonly scope: FileNode['scope'];
  readonly sha256: string;
  readonly bytes: Buffer;
}

export interface StatFs {
  readonly bsize: number;
  readonly frsize: number;
  readonly blocks: number;
  readonly bfree: number;
  readonly bavail: number;
  readonly files: number;
  readonly ffree: number;
  readonly favail: number;
  readonly namemax: number;
}

const WRITE_FLAGS = constants.O_WRONLY | constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | constants.O_APPEND;
const W_OK = constants.W_OK;
/** Handle numbers wrap well below 2^31 (fuse-native passes them as int). */
const MAX_HANDLE = 0x3fffffff;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function isCode(err: unknown, code: string): boolean {
  return isKnowledgeError(err) && err.code === code;
}

function isDenial(err: unknown): boolean {
  return isCode(err, 'denied') || isCode(err, 'forbidden');
}

export class KnowledgeFilesystem {
  private readonly handles = new Map<number, Pinned>();
  private nextHandle = 1;

  constructor(private readonly deps: FilesystemDeps) {}

  getattr(path: string): NodeStat {
    const node = this.deps.tree().get(path);
    if (node === undefined) throw new KnowledgeError('not_found', `no such file: ${path}`);
    return node.stat;
  }

  readdir(path: string): readonly string[] {
    const node = this.deps.tree().get(path);
    if (node === undefined) throw new KnowledgeError('not_found', `no such directory: ${path}`);
    if (node.kind !== 'dir') throw new ErrnoError(ENOTDIR, `not a directory: ${path}`);
    return node.names;
  }

  /**
   * A directory's names with each entry's stat, from one tree. The stats give
   * `find` (and anything walking with d_type) each entry's type in the
   * listing itself, so it needs no lookup per file; without them the kernel
   * sends one per entry once the 1 s entry cache has expired.
   */
  readdirPlus(path: string): { names: readonly string[]; stats: readonly NodeStat[] } {
    const tree = this.deps.tree();
    const node = tree.get(path);
    if (node === undefined) throw new KnowledgeError('not_found', `no such directory: ${path}`);
    if (node.kind !== 'dir') throw new ErrnoError(ENOTDIR, `not a directory: ${path}`);
    const prefix = path === '/' ? '/' : `${path}/`;
    const stats: NodeStat[] = [];
    for (const name of node.names) {
      const child = tree.get(prefix + name);
      if (child === undefined) return { names: node.names, stats: [] }; // cannot happen in one tree; names alone still work
      stats.push(child.stat);
    }
    return { names: node.names, stats };
  }

  /** `access(2)`: existence, and no write permission ever. */
  access(path: string, mode: number): void {
    this.getattr(path);
    if ((mode & W_OK) !== 0) throw new KnowledgeError('read_only', 'read-only file system');
  }

  statfs(): StatFs {
    const tree = this.deps.tree();
    return {
      bsize: 4096,
      frsize: 4096,
      blocks: Math.min(0xffffffff, Math.ceil(tree.totalBytes / 4096)),
      bfree: 0,
      bavail: 0,
      files: Math.min(0xffffffff, tree.fileCount),
      ffree: 0,
      favail: 0,
      namemax: 255,
    };
  }

  /**
   * Opens `path` for reading. Synchronous (a number) when the scope's grant is
   * fresh and the bytes are in memory, the warm `grep -r` case: no promise, no
   * timer. Otherwise a promise bounded by --request-timeout. Invalid opens
   * throw synchronously.
   */
  open(path: string, flags: number): number | Promise<number> {
    if ((flags & WRITE_FLAGS) !== 0) throw new KnowledgeError('read_only', 'read-only file system');
    const node = this.deps.tree().get(path);
    if (node === undefined) throw new KnowledgeError('not_found', `no such file: ${path}`);
    if (node.kind !== 'file') throw new ErrnoError(EISDIR, `is a directory: ${path}`);
    const waitMs = this.deps.changedFiles?.waitMs(path) ?? 0;
    if (waitMs === 0 && this.deps.grants.isFresh(node.scope)) {
      const cached = this.deps.fetcher.cached(node.sha256);
      if (cached !== undefined) {
        this.deps.grants.reused++;
        return this.pin(node, cached);
      }
    }
    if (!this.deps.fetcher.isCached(node.sha256)) this.deps.readAhead?.onMiss(node);
    const loaded = this.withDeadline(this.authoriseAndLoad(node));
    // The wait runs alongside the grant and fetch, not after them.
    const ready = waitMs === 0 ? loaded : Promise.all([loaded, delay(waitMs)]).then(([buf]) => buf);
    return ready.then((buf) => this.pin(node, buf));
  }

  private pin(node: FileNode, bytes: Buffer): number {
    const fd = this.allocateHandle();
    this.handles.set(fd, { path: node.path, scope: node.scope, sha256: node.sha256, bytes });
    return fd;
  }

  /**
   * Up to `length` bytes at `position` of the pinned version, without copying
   * (a view of the pinned Buffer). With a shared page cache, ESTALE once the
   * path holds another version (or is gone): those bytes would land in the
   * cache new opens read. With any binding, ESTALE once the tree no longer
   * holds the handle's scope (revoked, or the session is gone): a descriptor
   * does not outlive the right to read what it opened.
   */
  slice(fd: number, length: number, position: number): Buffer {
    const pinned = this.handles.get(fd);
    if (pinned === undefined) throw new ErrnoError(EBADF, `bad file handle ${fd}`);
    if (!this.deps.tree().hasScope(pinned.scope)) {
      throw new ErrnoError(ESTALE, `${pinned.path}: this session no longer sees ${pinned.scope}`);
    }
    if (this.deps.changedFiles !== undefined) {
      const node = this.deps.tree().get(pinned.path);
      if (node?.kind !== 'file' || node.sha256 !== pinned.sha256) {
        throw new ErrnoError(ESTALE, `${pinned.path} changed since it was opened; open it again`);
      }
    }
    const buf = pinned.bytes;
    if (position >= buf.length) return buf.subarray(0, 0);
    return buf.subarray(position, Math.min(buf.length, position + length));
  }

  /** `slice`, copied into `target` (for bindings that hand a buffer to fill). */
  read(fd: number, target: Buffer, length: number, position: number): number {
    return this.slice(fd, length, position).copy(target, 0);
  }

  release(fd: number): void {
    this.handles.delete(fd);
  }

  /** The grant deadlines of every scope, now and from now on (for a binding that answers warm opens itself). */
  watchGrants(listener: GrantListener): void {
    this.deps.grants.watch(listener);
  }

  /** Asks for `scope`'s grant again ahead of its expiry (GrantCache.renew), for a binding whose opens of it go on. */
  renewGrant(scope: string): void {
    this.deps.grants.renew(scope);
  }

  /**
   * A read of an open the binding answered itself (its fast path) for `node`,
   * a version it opened: the same rules as `slice` (ESTALE once the tree no
   * longer holds the scope), the bytes from memory, else fetched and verified
   * again (memory may have let them go since the open).
   */
  sliceNode(node: FileNode, length: number, position: number): Buffer | Promise<Buffer> {
    if (!this.deps.tree().hasScope(node.scope)) {
      throw new ErrnoError(ESTALE, `${node.path}: this session no longer sees ${node.scope}`);
    }
    const cut = (buf: Buffer): Buffer => (position >= buf.length ? buf.subarray(0, 0) : buf.subarray(position, Math.min(buf.length, position + length)));
    const cached = this.deps.fetcher.cached(node.sha256);
    if (cached !== undefined) return cut(cached);
    return this.withDeadline(this.deps.fetcher.get(node)).then(cut);
  }

  /**
   * Resolves once `node`'s scope has a fresh grant (asked for if need be,
   * within --request-timeout), for a binding whose kernel opens files without
   * asking (kernel-grant-bound.ts): it hands out an entry only after this. A
   * refusal is ENOENT and the scope leaves the tree, as for an open.
   */
  authorise(node: FileNode): Promise<void> {
    return this.withDeadline(this.deps.grants.check(node.scope)).catch((err: unknown) => {
      throw this.refused(node, err);
    });
  }

  openHandles(): number {
    return this.handles.size;
  }

  private async authoriseAndLoad(node: FileNode): Promise<Buffer> {
    const [grant, content] = await Promise.allSettled([this.deps.grants.check(node.scope), this.deps.fetcher.get(node)]);
    if (grant.status === 'rejected') throw this.refused(node, grant.reason);
    if (content.status === 'rejected') {
      if (isDenial(content.reason)) {
        this.deps.onDenied?.(node.scope);
        throw new KnowledgeError('not_found', `no such file: ${node.path}`);
      }
      if (isCode(content.reason, 'not_found')) {
        // The scope is granted, so the file itself is gone: the plan is behind.
        this.deps.onMissing?.(node.path);
        throw new KnowledgeError('not_found', `no such file: ${node.path}`);
      }
      throw content.reason;
    }
    return content.value;
  }

  /** A grant refused for `node`'s scope: a personal session's denial looks exactly like a missing file (404), and the scope leaves the tree. */
  private refused(node: FileNode, reason: unknown): unknown {
    if (!isDenial(reason) && !isCode(reason, 'not_found')) return reason;
    this.deps.onDenied?.(node.scope);
    return new KnowledgeError('not_found', `no such file: ${node.path}`);
  }

  private withDeadline<T>(work: Promise<T>): Promise<T> {
    const ms = this.deps.requestTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new KnowledgeError('unavailable', `no answer from the control plane within ${ms} ms`)), ms);
      work.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  private allocateHandle(): number {
    for (;;) {
      const fd = this.nextHandle;
      this.nextHandle = fd >= MAX_HANDLE ? 1 : fd + 1;
      if (!this.handles.has(fd)) return fd;
    }
  }
}
