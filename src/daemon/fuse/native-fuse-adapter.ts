// The libfuse 3 binding: the only file that drives the addon in native/.
// Like fuse-adapter.ts, each request calls the filesystem core and
// answers; there is no policy here beyond what the kernel's node ids need.
//
// Node ids are the tree's inode numbers (tree.ts): a file's id names one
// version of its content, a directory's id lasts while its path stays a
// directory. So:
// - entries and attributes are cached by the kernel for an hour
//   (NATIVE_CACHE_SEC) and dropped on every tree swap for exactly what changed
//   (tree-changes.ts → notify_inval_entry / notify_inval_inode);
// - `open` answers keep_cache: the kernel keeps a file's pages across opens,
//   and a new version is a new inode with no pages yet;
// - a descriptor held across a change stays on the inode it opened and
//   keeps reading that version (the handle pins its bytes), but not across a
//   revocation: when a scope leaves the tree, the kernel is told to drop the
//   pages and listings of every node of it it holds, and the daemon answers
//   their reads ESTALE and their listings empty;
// - every `open` is authorised by the core the first time, and again
//   whenever its scope's grant has expired; an open of an inode the tree has
//   since replaced answers ESTALE (the kernel looks the path up again and
//   retries once). A node opened here once is opened by the addon afterwards
//   while its scope's grant is fresh (native-fast-path.ts); its reads
//   (FAST_FH) come here and are served by node id. Likewise a directory
//   (FAST_DIR_BIT); its listings are cached by the kernel (cache_readdir,
//   keep_cache) until its inode is invalidated, and a READDIR the cache
//   missed starts its listing here, from the tree of that moment.
// With --kernel-opens on the kernel opens files by itself (OPEN answered
// ENOSYS once: no OPEN, RELEASE or FLUSH for files from then on) and the
// authorisation bound moves to the entries it holds (kernel-grant-bound.ts);
// reads then come with handle 0 and are served by node id, as FAST_FH's.
// The kernel's lookup count per node id is kept in native-kernel-nodes.ts,
// what the addon answers alone in native-fast-path.ts. Replies go out from
// this thread, possibly later (opens that wait for the control plane); there
// is no per-operation timeout beyond the core's --request-timeout.

import { constants } from 'node:os';
import { performance } from 'node:perf_hooks';
import { KnowledgeError } from '../../core/errors.js';
import { treeChanges } from '../../core/tree/tree-changes.js';
import type { DirNode, NodeStat, Tree, TreeNode } from '../../core/tree/tree.js';
import { ErrnoMapper } from './errno.js';
import type { KnowledgeFilesystem } from '../filesystem.js';
import { FAST_FH, OP, OP_KINDS, loadNativeAddon, type NativeAddon } from './native-addon-api.js';
import { NativeFastPath } from './native-fast-path.js';
import { childPath, DirHandles, listingStats } from './native-listing.js';
import type { FuseMount, FuseMountOptions } from './fuse-adapter.js';
import { devFdPath } from './handed-mount.js';
import { stopNative } from './native-stop.js';
import { KernelNodes } from './native-kernel-nodes.js';
import { KernelGrantBound } from './kernel-grant-bound.js';

const E = constants.errno;

/** A node id per version: each version has its own page cache (fuse-binding.ts, changed-files.ts). */
export const VERSIONS_SHARE_PAGE_CACHE = false;

/** Default kernel cache time for entries and attributes: changes are pushed, so it can be long. */
export const NATIVE_CACHE_SEC = 3600;

export interface NativeMountOptions extends FuseMountOptions {
  /** The tree the core serves from, read at every request. */
  readonly tree: () => Tree;
  /** Serve this already-mounted /dev/fuse descriptor (handed-mount.ts) instead of mounting. */
  readonly fuseFd?: number | undefined;
  /** --kernel-opens on: the kernel opens files without asking (never with --grant-ttl 0: the caller decides). */
  readonly kernelOpens?: boolean;
}

export class NativeFuseSession implements FuseMount {
  private readonly known = new KernelNodes();
  private readonly dirs = new DirHandles();
  private readonly fast: NativeFastPath;
  /** Set with --kernel-opens on: entries of files bounded by their scope's grant. */
  private readonly bound: KernelGrantBound | undefined;
  private readonly errors: ErrnoMapper;
  private readonly cacheSec: number;
  private readonly ended: Promise<void>;
  private markEnded!: () => void;
  private unmounted: Promise<void> | undefined;
  /** Set once the kernel has closed the session (after our unmount, or a detach underneath us). */
  private hasEnded = false;
  private mountpoint = '';

  constructor(
    private readonly native: NativeAddon,
    private readonly fs: KnowledgeFilesystem,
    private readonly opts: NativeMountOptions,
  ) {
    this.errors = new ErrnoMapper(opts.log);
    this.cacheSec = opts.attrTimeoutSec ?? NATIVE_CACHE_SEC;
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
    this.fast = new NativeFastPath(native, (scope) => this.fs.renewGrant(scope));
    const bound = { renew: (scope: string) => this.fs.renewGrant(scope), holdsScope: (scope: string) => this.known.holdsFileOf(scope), lapsed: (scope: string) => this.dropEntries(scope, this.opts.tree()) };
    this.bound = opts.kernelOpens === true ? new KernelGrantBound(bound) : undefined;
  }

  mount(mountpoint: string): void {
    this.mountpoint = mountpoint;
    // ro: the kernel refuses writes itself, and never invalidates attributes for an atime update after a READ or READDIR.
    const options = ['fsname=knowledgefs', 'subtype=knowledgefs', 'ro'];
    if (this.opts.allowOther === true) options.push('allow_other');
    if (this.opts.defaultPermissions === true) options.push('default_permissions');
    // A handed-over descriptor: libfuse serves `/dev/fd/N` as it is (the kernel options were the mounter's).
    const target = this.opts.fuseFd === undefined ? mountpoint : devFdPath(this.opts.fuseFd);
    try {
      this.native.mount(target, options.join(','), (op, req, ino, fh, a, b, extra) => this.dispatch(op, req, ino, fh, a, b, extra));
    } catch (err) {
      throw new KnowledgeError('config', `cannot mount ${mountpoint}: ${err instanceof Error ? err.message : String(err)}`);
    }
    this.fs.watchGrants((scope, untilMs) => {
      this.fast.grantChanged(scope, untilMs);
      this.bound?.grantChanged(scope, untilMs);
    });
  }

  answeredByBinding(): { opens: number; releases: number; opendirs: number; releasedirs: number } {
    return this.fast.counts();
  }

  /** Tells the kernel what changed between two trees (queued; sent from the addon's own thread). */
  treeChanged(before: Tree, after: Tree): void {
    this.fast.dropReplaced(after);
    const changes = treeChanges(before, after);
    for (const e of changes.entries) if (this.known.holds(e.parentIno)) this.native.invalEntry(e.parentIno, e.name);
    for (const ino of changes.dirs) if (this.known.holds(ino)) this.native.invalInode(ino);
    this.dropRemovedScopes(before, after);
  }

  /**
   * A scope the session lost: the kernel drops the pages and listings it
   * cached of every node of it that it holds, so a descriptor still open there
   * reaches the daemon, which no longer serves it (ESTALE for files, an empty
   * listing for directories). An edit keeps the old inode's pages (a new
   * version is a new inode); a revocation must not.
   */
  private dropRemovedScopes(before: Tree, after: Tree): void {
    const removed = new Set(before.scopes.filter((scope) => !after.hasScope(scope)));
    if (removed.size === 0) return;
    for (const scope of removed) this.dropEntries(scope, before);
    for (const ino of this.known.ofScopes(removed)) this.native.invalInode(ino);
  }

  /** With --kernel-opens on: the kernel forgets every entry of a file of `scope` it holds, so its next path walk there asks. */
  private dropEntries(scope: string, tree: Tree): void {
    if (this.bound === undefined || this.hasEnded) return;
    for (const e of [...this.known.fileEntriesOf(scope, tree)]) this.native.invalEntry(e.parentIno, e.name);
  }

  unmount(): Promise<void> {
    this.unmounted ??= stopNative({
      native: this.native,
      mountpoint: this.mountpoint,
      handed: this.opts.fuseFd !== undefined,
      hasEnded: () => this.hasEnded,
      ended: this.ended,
      log: this.opts.log,
    });
    return this.unmounted;
  }

  private dispatch(op: number, req: number, ino: number, fh: number, a: number, b: number, extra: string | Float64Array | undefined): void {
    const started = this.opts.meter === undefined ? 0 : performance.now();
    let code: number | undefined;
    try {
      code = this.answer(op, req, ino, fh, a, b, extra);
    } catch (err) {
      const errno = this.errors.toErrno(err);
      if (req === 0) return; // FORGET and the session's end have no one to answer
      this.native.replyErr(req, errno);
      code = -errno;
    }
    if (code !== undefined) this.count(op, started, code);
  }

  /** Records one answered request (metrics); FORGET and the end of the session are not requests. */
  private count(op: number, started: number, code: number): void {
    const kind = OP_KINDS[op];
    if (kind !== undefined) this.opts.meter?.done(kind, started, code);
  }

  /**
   * Answers one request: 0 or -errno once answered, undefined when the
   * answer comes later (and is counted then) or there is none to send.
   */
  private answer(op: number, req: number, ino: number, fh: number, a: number, b: number, extra: string | Float64Array | undefined): number | undefined {
    switch (op) {
      case OP.lookup:
        return this.lookup(req, ino, extra as string);
      case OP.forget:
        this.known.forget(extra as Float64Array, (gone) => this.fast.drop(gone));
        return undefined;
      case OP.getattr:
        this.replyAttr(req, this.nodeOf(ino).stat);
        return 0;
      case OP.open:
        return this.open(req, ino, a);
      case OP.read:
        if (fh === FAST_FH || (fh === 0 && this.bound !== undefined)) return this.readFast(req, ino, a, b);
        this.native.replyBuf(req, this.fs.slice(fh, a, b));
        return 0;
      case OP.release:
        if (fh !== FAST_FH) this.fs.release(fh);
        this.native.replyErr(req, 0);
        return 0;
      case OP.opendir:
        this.opendir(req, ino);
        return 0;
      case OP.readdir:
        this.readdir(req, ino, fh, a, b, false);
        return 0;
      case OP.readdirplus:
        this.readdir(req, ino, fh, a, b, true);
        return 0;
      case OP.releasedir:
        this.dirs.release(fh);
        this.native.replyErr(req, 0);
        return 0;
      case OP.statfs: {
        const s = this.fs.statfs();
        this.native.replyStatfs(req, s.blocks, s.files);
        return 0;
      }
      case OP.access:
        this.fs.access(this.nodeOf(ino).path, a);
        this.native.replyErr(req, 0);
        return 0;
      case OP.ended:
        if (this.unmounted === undefined) {
          // A handed-over mount is detached by its mounter first when it stops (mount-helper), then this process is signalled.
          const by = this.opts.fuseFd === undefined ? 'the mount was detached' : 'the process that mounted it detached the mount';
          this.opts.log(`${this.mountpoint}: the kernel closed the FUSE session (${by}); file operations there now fail`);
        }
        this.hasEnded = true;
        this.known.clear();
        this.fast.end();
        this.bound?.end();
        this.dirs.clear();
        this.markEnded();
        return undefined;
      default:
        this.native.replyErr(req, E.ENOSYS);
        return -E.ENOSYS;
    }
  }

  private nodeOf(ino: number): TreeNode {
    return this.known.nodeOf(ino, this.opts.tree());
  }

  /** The directory behind `ino` if the current tree still has it. */
  private currentDir(ino: number): DirNode {
    const node = this.nodeOf(ino);
    const now = this.opts.tree().get(node.path);
    if (now === undefined || now.stat.ino !== ino) throw new KnowledgeError('not_found', `no such directory: ${node.path}`);
    if (now.kind !== 'dir') throw new KnowledgeError('not_found', `not a directory: ${node.path}`);
    return now;
  }

  private lookup(req: number, parentIno: number, name: string): number | undefined {
    const dir = this.currentDir(parentIno);
    const node = this.opts.tree().get(childPath(dir.path, name));
    if (node === undefined) {
      // A cached "no such entry": a later tree that adds the name invalidates it.
      this.native.replyEntry(req, 0, 0, 0, 0, 0, 0, 0, 0, this.cacheSec);
      return -E.ENOENT;
    }
    if (this.bound === undefined || node.kind !== 'file' || this.bound.isFresh(node.scope)) {
      this.replyEntry(req, node);
      return 0;
    }
    // The kernel may open what a file's entry names without asking: one only with a fresh grant (the tree may move meanwhile).
    return this.replyWhen(OP.lookup, req, this.fs.authorise(node), () => {
      const now = this.opts.tree().get(node.path);
      if (now === undefined) this.native.replyEntry(req, 0, 0, 0, 0, 0, 0, 0, 0, 0);
      else this.replyEntry(req, now);
    });
  }

  /** How long the kernel may keep `node`'s entry: with --kernel-opens on, a file's never past its scope's grant deadline. */
  private entrySec(node: TreeNode): number {
    if (this.bound === undefined || node.kind !== 'file') return this.cacheSec;
    return this.bound.entrySec(node.scope, this.cacheSec);
  }

  private replyEntry(req: number, node: TreeNode): void {
    const s = node.stat;
    this.known.hold(node);
    this.native.replyEntry(req, s.ino, s.mode, s.size, s.mtime, s.nlink, s.uid, s.gid, this.entrySec(node), this.cacheSec);
  }

  private replyAttr(req: number, s: NodeStat): void {
    this.native.replyAttr(req, s.ino, s.mode, s.size, s.mtime, s.nlink, s.uid, s.gid, this.cacheSec);
  }

  private open(req: number, ino: number, flags: number): number | undefined {
    const node = this.nodeOf(ino);
    const now = this.opts.tree().get(node.path);
    if (now === undefined || now.stat.ino !== ino) {
      // The path moved on since the kernel looked it up: it looks it up again and retries.
      this.native.replyErr(req, E.ESTALE);
      return -E.ESTALE;
    }
    const opened = this.fs.open(node.path, flags);
    if (this.bound !== undefined) return this.openOnce(req, opened);
    if (typeof opened === 'number') {
      this.native.replyOpen(req, opened, true, false);
      if (node.kind === 'file') this.fast.allow(ino, node, this.opts.tree());
      return 0;
    }
    return this.replyWhen(OP.open, req, opened, (fh) => {
      this.native.replyOpen(req, fh, true, false);
      if (node.kind === 'file') this.fast.allow(ino, node, this.opts.tree());
    });
  }

  /**
   * With --kernel-opens on, the first open of a file is authorised as any
   * open, then answered ENOSYS: the kernel takes that as success and sends no
   * OPEN, RELEASE or FLUSH for files again (FUSE_NO_OPEN_SUPPORT).
   */
  private openOnce(req: number, opened: number | Promise<number>): number | undefined {
    const noOpen = (fh: number): void => {
      this.fs.release(fh);
      this.native.replyErr(req, E.ENOSYS);
    };
    if (typeof opened !== 'number') return this.replyWhen(OP.open, req, opened, noOpen);
    noOpen(opened);
    return 0;
  }

  /** Answers `req` once `pending` settles, and counts it then: undefined, as `answer` returns for a later answer. */
  private replyWhen<T>(op: number, req: number, pending: Promise<T>, reply: (value: T) => void): undefined {
    const started = this.opts.meter === undefined ? 0 : performance.now();
    pending.then(
      (value) => {
        reply(value);
        this.count(op, started, 0);
      },
      (err: unknown) => {
        const errno = this.errors.toErrno(err);
        this.native.replyErr(req, errno);
        this.count(op, started, -errno);
      },
    );
    return undefined;
  }

  private opendir(req: number, ino: number): void {
    const dir = this.currentDir(ino);
    const tree = this.opts.tree();
    const fh = this.dirs.add(ino, dir, tree);
    // keep_cache: the listing the kernel cached outlives this descriptor (until the directory's inode is invalidated).
    this.native.replyOpen(req, fh, true, true);
    this.fast.allow(ino, dir, tree);
  }

  /** A read of a handle the addon opened itself: the bytes of that node id's version. */
  private readFast(req: number, ino: number, size: number, offset: number): number | undefined {
    const node = this.nodeOf(ino);
    if (node.kind !== 'file') throw new KnowledgeError('not_found', `not a file: ${node.path}`);
    const bytes = this.fs.sliceNode(node, size, offset);
    if (!(bytes instanceof Promise)) {
      this.native.replyBuf(req, bytes);
      return 0;
    }
    return this.replyWhen(OP.read, req, bytes, (buf) => this.native.replyBuf(req, buf));
  }

  /**
   * READDIRPLUS (`plus`) sends each entry's attributes too, so `ls -l` and
   * `find` need no LOOKUP of what they list; the kernel then holds a lookup
   * of every entry that fitted, counted here as a LOOKUP would be.
   */
  private readdir(req: number, ino: number, fh: number, size: number, offset: number, plus: boolean): void {
    const listed = this.dirs.page(fh, ino, this.known, this.opts.tree(), size, offset, plus);
    if (listed === undefined) throw new KnowledgeError('not_found', `bad directory handle ${fh}`);
    if (listed === 'gone') {
      this.native.replyDir(req, size, offset, [], [], []);
      return;
    }
    const { page, dir } = listed;
    if (!plus) {
      this.native.replyDir(req, size, offset, page.names, page.inos, page.modes);
      return;
    }
    // Every entry of a listing below the root is of the directory's scope: its files' entries bounded by its grant.
    const entrySec = this.bound === undefined || dir.path === '/' ? this.cacheSec : this.bound.entrySec(dir.scope, this.cacheSec);
    const added = this.native.replyDirPlus(req, size, offset, page.names, listingStats(page, dir), entrySec, this.cacheSec);
    for (let j = 0; j < added; j++) {
      const node = page.nodes[j];
      if (offset + j >= 2 && node !== undefined) this.known.hold(node);
    }
  }
}

export async function mountNativeFuse(mountpoint: string, fs: KnowledgeFilesystem, opts: NativeMountOptions): Promise<NativeFuseSession> {
  const session = new NativeFuseSession(loadNativeAddon(), fs, opts);
  session.mount(mountpoint);
  return session;
}
