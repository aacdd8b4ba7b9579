// What the libfuse 3 addon (native/*.c) offers JavaScript:
// its request kinds, the calls that reply to them and push invalidations,
// and loading it once per process. native-addon.ts says which file to load;
// native-fuse-adapter.ts is the session that uses it.

import { KnowledgeError } from '../../core/errors.js';
import type { FuseOp } from '../../core/metrics.js';
import { addonProblem, resolveNativeAddon, thisMachine } from './native-addon.js';

/** Request kinds, as native/knowledgefs_fuse.h numbers them. */
export const OP = {
  lookup: 1,
  forget: 2,
  getattr: 3,
  open: 4,
  read: 5,
  release: 6,
  opendir: 7,
  readdir: 8,
  releasedir: 9,
  statfs: 10,
  access: 11,
  ended: 12,
  readdirplus: 13,
} as const;

/** The metric name of each request kind (fuse-op-meter.ts). */
export const OP_KINDS: Readonly<Partial<Record<number, FuseOp>>> = {
  [OP.lookup]: 'lookup',
  [OP.getattr]: 'getattr',
  [OP.open]: 'open',
  [OP.read]: 'read',
  [OP.release]: 'release',
  [OP.opendir]: 'opendir',
  [OP.readdir]: 'readdir',
  [OP.readdirplus]: 'readdir',
  [OP.releasedir]: 'releasedir',
  [OP.statfs]: 'statfs',
  [OP.access]: 'access',
};

export type Handler = (op: number, req: number, ino: number, fh: number, a: number, b: number, extra: string | Float64Array | undefined) => void;

export interface NativeAddon {
  mount(mountpoint: string, options: string, handler: Handler): void;
  unmount(): void;
  unref(): void;
  replyErr(req: number, errno: number): void;
  replyEntry(req: number, ino: number, mode: number, size: number, mtimeMs: number, nlink: number, uid: number, gid: number, attrTimeout: number, entryTimeout: number): void;
  replyAttr(req: number, ino: number, mode: number, size: number, mtimeMs: number, nlink: number, uid: number, gid: number, attrTimeout: number): void;
  replyOpen(req: number, fh: number, keepCache: boolean, cacheDir: boolean): void;
  replyBuf(req: number, data: Buffer): void;
  replyDir(req: number, size: number, firstOffset: number, names: string[], inos: number[], modes: number[]): number;
  /** Like replyDir, each entry with its attributes (7 numbers each in `stats`: ino, mode, size, mtimeMs, nlink, uid, gid); the kernel takes a lookup of each that fits, "." and ".." aside. */
  replyDirPlus(req: number, size: number, firstOffset: number, names: string[], stats: Float64Array, attrTimeout: number, entryTimeout: number): number;
  replyStatfs(req: number, blocks: number, files: number): void;
  invalEntry(parentIno: number, name: string): void;
  invalInode(ino: number): void;
  /** Opens of `ino` may be answered by the addon itself while scope `scopeId`'s grant is fresh. */
  fastAllow(ino: number, scopeId: number): void;
  /** Opens of `ino` reach JavaScript again. */
  fastDrop(ino: number): void;
  /** Scope `scopeId`'s grant is fresh until `untilMs` (a Date.now() time; 0: not fresh). */
  fastGrant(scopeId: number, untilMs: number): void;
  /** Whether the addon answered an open of scope `scopeId` itself since the last call (and clears that). */
  fastTakeUsed(scopeId: number): boolean;
  /** [opens, releases, opendirs, releasedirs] the addon answered itself so far. */
  fastCounts(): [number, number, number, number];
}

/** The scope id that marks a directory in fastAllow: its opendirs need no grant. */
export const FAST_DIR_SCOPE = 2 ** 32 - 1;
/** Handles of opendirs the addon answered itself have this bit (and a number of their own below it). */
export const FAST_DIR_BIT = 2 ** 41;

/** The handle of an open the addon answered itself (above every handle the daemon allocates). */
export const FAST_FH = 2 ** 40;

let addon: { readonly addon: NativeAddon; readonly origin: string } | undefined;

/**
 * Loads the addon (native-addon.ts: built here, prebuilt, or built from
 * source now) and says where it came from; a KnowledgeError says why it
 * can't (no prebuilt fits and no compiler, libfuse3 missing).
 */
export function loadNativeAddonWithOrigin(): { readonly addon: NativeAddon; readonly origin: string } {
  if (addon === undefined) {
    const found = resolveNativeAddon<NativeAddon>(thisMachine(), true);
    if (!found.ok) throw new KnowledgeError('config', addonProblem(found.reasons));
    addon = { addon: found.addon, origin: found.origin };
  }
  return addon;
}

export function loadNativeAddon(): NativeAddon {
  return loadNativeAddonWithOrigin().addon;
}
