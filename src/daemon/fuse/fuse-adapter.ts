// The only file that imports fuse-native. Each callback calls one method of
// the filesystem core and answers cb(0, …) or cb(-errno); there is no policy
// here. Write-type operations all answer EROFS from one table.
//
// Options that matter (see FUSE-NOTES.md):
// - auto_cache: the kernel keeps a file's pages while its size and mtime are
//   unchanged; the tree guarantees a changed file reports a changed mtime.
// - Files are named by path, so every version of a path is one kernel inode
//   with one page cache (VERSIONS_SHARE_PAGE_CACHE): the daemon then makes
//   opens of just-changed files wait and stale handles fail (changed-files.ts).
// - attr/entry timeouts ~1 s: metadata is cached briefly by the kernel, so a
//   removed file may stay visible (not readable) for up to that long.
// - readdir hands each entry's stat along with its name (libfuse2 turns it
//   into the entry's d_type): `find` then walks without one lookup per file.
//   It lists `.` and `..` first, as real filesystems do (`ls -a`).
// - fuse-native drops numeric 0 options, so zero timeouts are passed as '0'.
// - fuse-native answers ETIMEDOUT after its per-op timeout (15 s default);
//   ours is set above --request-timeout so the core's clean EIO always wins.
// - The process must never touch its own mount point (deadlock): nothing in
//   the daemon does after mounting.

import { createRequire } from 'node:module';
import { KnowledgeError } from '../../core/errors.js';
import { parentPath, type NodeStat, type Tree } from '../../core/tree/tree.js';
import type { FuseOp } from '../../core/metrics.js';
import { EROFS, ErrnoMapper } from './errno.js';
import type { FuseOpMeter } from './fuse-op-meter.js';
import type { KnowledgeFilesystem, StatFs } from '../filesystem.js';
import { FUSE_NATIVE_INSTALL, fuseNativeInstalled } from './fuse-native-presence.js';
import { mountEntry } from './stale-mount.js';

type Cb<T extends unknown[] = []> = (code: number, ...result: Partial<T>) => void;

interface FuseOps {
  init?(cb: Cb): void;
  getattr(path: string, cb: Cb<[NodeStat]>): void;
  fgetattr(path: string, fd: number, cb: Cb<[NodeStat]>): void;
  readdir(path: string, cb: Cb<[readonly string[], readonly NodeStat[]]>): void;
  access(path: string, mode: number, cb: Cb): void;
  statfs(path: string, cb: Cb<[StatFs]>): void;
  open(path: string, flags: number, cb: Cb<[number]>): void;
  read(path: string, fd: number, buf: Buffer, len: number, pos: number, cb: (bytesOrErr: number) => void): void;
  release(path: string, fd: number, cb: Cb): void;
  [writeOp: string]: unknown;
}

interface FuseInstance {
  mount(cb: (err: Error | null) => void): void;
  unmount(cb: (err: Error | null) => void): void;
}

interface FuseConstructor {
  new (mountpoint: string, ops: FuseOps, opts: Record<string, unknown>): FuseInstance;
  unmount(mountpoint: string, cb: (err: Error | null) => void): void;
}

const require = createRequire(import.meta.url);
let FuseClass: FuseConstructor | undefined;

/** Loads the binding lazily so commands that never mount don't need libfuse. */
function loadFuse(): FuseConstructor {
  if (FuseClass === undefined) {
    if (!fuseNativeInstalled()) throw new KnowledgeError('config', `cannot load the FUSE binding fuse-native: it is not installed (an optional peer of knowledgefs: ${FUSE_NATIVE_INSTALL})`);
    try {
      FuseClass = require('fuse-native') as FuseConstructor;
    } catch (err) {
      throw new KnowledgeError(
        'config',
        `cannot load the FUSE binding (fuse-native): ${err instanceof Error ? err.message.split('\n')[0] : String(err)}. ` +
          'Install libfuse2 (Debian/Ubuntu: apt-get install -y libfuse2 fuse) and run npm ci.',
      );
    }
  }
  return FuseClass;
}

/** Every operation that would change something: one answer for all. */
export const WRITE_OPS = [
  'write', 'create', 'mknod', 'unlink', 'rename', 'mkdir', 'rmdir', 'symlink', 'link',
  'chmod', 'chown', 'truncate', 'ftruncate', 'utimens', 'setxattr', 'removexattr',
] as const;

/** libfuse2's default, which this adapter keeps unless told otherwise. */
export const DEFAULT_ATTR_TIMEOUT_SEC = 1;

/**
 * True for this binding: libfuse2's high-level API gives a path one inode
 * whatever its version, so all versions share one page cache. A binding
 * with a node id per version would say false.
 */
export const VERSIONS_SHARE_PAGE_CACHE = true;

export interface FuseMountOptions {
  readonly allowOther?: boolean;
  /** Upper bound the core's own timeouts stay under (ms). */
  readonly requestTimeoutMs: number;
  readonly attrTimeoutSec?: number;
  readonly entryTimeoutSec?: number;
  /** 'auto' (default) keeps pages while size+mtime hold; 'none' drops them on every open. */
  readonly pageCache?: 'auto' | 'none';
  /** The kernel checks permissions against the mode bits (default_permissions). */
  readonly defaultPermissions?: boolean;
  readonly log: (line: string) => void;
  /** Counts and times every operation (metrics, `knowledgefs status`). */
  readonly meter?: FuseOpMeter;
}

/** A mounted binding; either adapter returns one. */
export interface FuseMount {
  unmount(): Promise<void>;
  /** The daemon swapped `before` for `after`: a binding that caches long drops what changed. */
  treeChanged?(before: Tree, after: Tree): void;
  /** Requests the binding answered without the daemon's JavaScript (the native fast path), for the metrics. */
  answeredByBinding?(): { readonly opens: number; readonly releases: number; readonly opendirs: number; readonly releasedirs: number };
}

/** The metric name of each operation; every write-type one is `write`. */
export const OP_KINDS: Readonly<Record<string, FuseOp>> = {
  getattr: 'getattr',
  fgetattr: 'getattr',
  readdir: 'readdir',
  access: 'access',
  statfs: 'statfs',
  open: 'open',
  read: 'read',
  release: 'release',
  ...Object.fromEntries(WRITE_OPS.map((name) => [name, 'write' as const])),
};

/** A fuse-native option value that survives its "drop falsy values" rule. */
function seconds(value: number | undefined, fallback: number): number | string {
  const v = value ?? fallback;
  return v === 0 ? '0' : v;
}

export function buildOps(fs: KnowledgeFilesystem, errors: ErrnoMapper): FuseOps {
  const fail = (err: unknown) => -errors.toErrno(err);
  const ops: FuseOps = {
    getattr(path, cb) {
      let stat: NodeStat;
      try {
        stat = fs.getattr(path);
      } catch (err) {
        cb(fail(err));
        return;
      }
      cb(0, stat);
    },
    fgetattr(path, _fd, cb) {
      ops.getattr(path, cb);
    },
    readdir(path, cb) {
      let listing: { names: readonly string[]; stats: readonly NodeStat[] };
      let self: NodeStat;
      let parent: NodeStat;
      try {
        listing = fs.readdirPlus(path);
        self = fs.getattr(path);
        // The mount root's `..` is outside the mount: the kernel answers for it, any directory stat will do.
        parent = path === '/' ? self : fs.getattr(parentPath(path));
      } catch (err) {
        cb(fail(err));
        return;
      }
      const stats = listing.stats.length === listing.names.length ? [self, parent, ...listing.stats] : [];
      cb(0, ['.', '..', ...listing.names], stats);
    },
    access(path, mode, cb) {
      try {
        fs.access(path, mode);
      } catch (err) {
        cb(fail(err));
        return;
      }
      cb(0);
    },
    statfs(_path, cb) {
      cb(0, fs.statfs());
    },
    open(path, flags, cb) {
      let opened: number | Promise<number>;
      try {
        opened = fs.open(path, flags);
      } catch (err) {
        cb(fail(err));
        return;
      }
      if (typeof opened === 'number') {
        cb(0, opened);
        return;
      }
      opened.then(
        (fd) => cb(0, fd),
        (err: unknown) => cb(fail(err)),
      );
    },
    read(_path, fd, buf, len, pos, cb) {
      let n: number;
      try {
        n = fs.read(fd, buf, len, pos);
      } catch (err) {
        cb(fail(err));
        return;
      }
      cb(n);
    },
    release(_path, fd, cb) {
      fs.release(fd);
      cb(0);
    },
  };
  for (const name of WRITE_OPS) {
    ops[name] = (...args: unknown[]) => {
      const cb = args[args.length - 1];
      if (typeof cb === 'function') (cb as Cb)(-EROFS);
    };
  }
  return ops;
}

export function mountFuse(mountpoint: string, fs: KnowledgeFilesystem, opts: FuseMountOptions): Promise<FuseMount> {
  const Fuse = loadFuse();
  const errors = new ErrnoMapper(opts.log);
  const ops = buildOps(fs, errors);
  const fuse = new Fuse(mountpoint, opts.meter ? opts.meter.wrapOps(ops, OP_KINDS) : ops, {
    fsname: 'knowledgefs',
    subtype: 'knowledgefs',
    allowOther: opts.allowOther === true,
    defaultPermissions: opts.defaultPermissions === true,
    autoCache: (opts.pageCache ?? 'auto') === 'auto',
    attrTimeout: seconds(opts.attrTimeoutSec, DEFAULT_ATTR_TIMEOUT_SEC),
    entryTimeout: seconds(opts.entryTimeoutSec, DEFAULT_ATTR_TIMEOUT_SEC),
    // Above our own bound: the core answers EIO first; this only stops a bug from hanging a reader.
    timeout: { default: opts.requestTimeoutMs + 10_000 },
    mkdir: true,
  });
  return new Promise((resolve, reject) => {
    fuse.mount((err) => {
      if (err) {
        reject(new KnowledgeError('config', `cannot mount ${mountpoint}: ${err.message}`));
        return;
      }
      let unmounted: Promise<void> | undefined;
      resolve({
        unmount: () => {
          unmounted ??= new Promise<void>((done) => {
            fuse.unmount((unmountErr) => {
              if (unmountErr === null) return done();
              // Detached underneath us (fusermount -uz, a container runtime): nothing left to unmount.
              void mountEntry(mountpoint).then((entry) => {
                const why = unmountErr.message.trim().split('\n').pop() ?? '';
                opts.log(entry === undefined ? `${mountpoint} was already detached (${why}); stopping` : `unmount ${mountpoint}: ${unmountErr.message}`);
                done();
              });
            });
          });
          return unmounted;
        },
      });
    });
  });
}

/** `fusermount -uz`: detaches a mount even when the daemon behind it is gone. */
export function forceUnmount(mountpoint: string): Promise<void> {
  return new Promise((resolve, reject) => {
    loadFuse().unmount(mountpoint, (err) => (err ? reject(err) : resolve()));
  });
}
