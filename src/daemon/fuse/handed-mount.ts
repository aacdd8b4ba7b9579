// `knowledgefs mount MOUNTPOINT --fuse-fd N`: serve a FUSE connection that a
// privileged step already mounted at MOUNTPOINT (`knowledgefs mount-helper`,
// mount-helper.ts, or anything doing what fusermount3 does: open /dev/fuse,
// mount(2) with fd=N). The daemon holds only descriptor N, so it needs
// neither CAP_SYS_ADMIN nor /dev/fuse and can run as an ordinary user.
//
// libfuse 3 (≥ 3.3) takes such a descriptor as the mount point `/dev/fd/N`;
// libfuse 2 (fuse-native) cannot, so it is refused with a clear error.
//
// The kernel mount options (allow_other, default_permissions) were chosen by
// whoever mounted; the checks here make a mismatch with --allow-other and
// --group an error at start instead of a mount that silently lets everyone
// in or keeps the agent out. Nothing here touches the mount point itself:
// until this process answers FUSE_INIT, a stat there would wait on us.

import { fstatSync } from 'node:fs';
import { KnowledgeError } from '../../core/errors.js';
import { mountEntry, type MountEntry } from './stale-mount.js';

/** /dev/fuse is character device 10:229 on Linux. */
const FUSE_MAJOR = 10;
const FUSE_MINOR = 229;

/** libfuse 3's name for an already-mounted descriptor. */
export function devFdPath(fd: number): string {
  return `/dev/fd/${fd}`;
}

/** `--fuse-fd` takes a descriptor number other than stdin, stdout and stderr. */
export function parseFuseFd(value: string): number {
  const v = value.trim();
  if (!/^\d{1,9}$/.test(v) || Number(v) < 3) {
    throw new KnowledgeError('invalid_argument', `--fuse-fd must be an open descriptor number ≥ 3 (got ${JSON.stringify(value)})`);
  }
  return Number(v);
}

/** `/dev/fd/N` as the mount point: what libfuse's own tools pass; here the mount point is where agents see the files. */
export function devFdMountpointProblem(mountpoint: string): string | undefined {
  const fd = /^\/dev\/fd\/(\d+)$/.exec(mountpoint)?.[1];
  if (fd === undefined) return undefined;
  return `${mountpoint} is a descriptor, not a mount point: give the directory where it is mounted (the read tool resolves paths under it) and --fuse-fd ${fd}`;
}

/** --fuse-fd needs the libfuse 3 binding: libfuse 2 mounts by path only. */
export function fuseFdNeedsNative(): KnowledgeError {
  return new KnowledgeError(
    'config',
    '--fuse-fd needs the native binding (libfuse 3): fuse-native (libfuse 2) cannot serve a descriptor another process mounted. Use --fuse-binding native (or auto) and build the addon (npm run build:native)',
  );
}

/** The binding to ask for with --fuse-fd: `auto` and `native` both mean native (an addon that cannot load is then an error). */
export function handedMountBinding(choice: 'auto' | 'native' | 'fuse-native'): 'native' {
  if (choice === 'fuse-native') throw fuseFdNeedsNative();
  return 'native';
}

function isFuseDevice(fd: number): boolean {
  const st = fstatSync(fd);
  if (!st.isCharacterDevice()) return false;
  const major = (st.rdev >> 8) & 0xfff;
  const minor = (st.rdev & 0xff) | ((st.rdev >> 12) & 0xfff00);
  return major === FUSE_MAJOR && minor === FUSE_MINOR;
}

export interface HandedMountWants {
  readonly allowOther: boolean;
  readonly defaultPermissions: boolean;
}

/** What is wrong with serving `fd` as the mount at `entry`; empty when nothing. */
export function handedMountProblems(fd: number, mountpoint: string, entry: MountEntry | undefined, wants: HandedMountWants, fuseDevice: (fd: number) => boolean = isFuseDevice): string[] {
  let device: boolean;
  try {
    device = fuseDevice(fd);
  } catch (err) {
    return [`--fuse-fd ${fd} is not an open descriptor (${(err as NodeJS.ErrnoException).code ?? String(err)}): start the daemon from the process that mounted, with the descriptor inherited`];
  }
  const problems: string[] = [];
  if (!device) problems.push(`--fuse-fd ${fd} is not /dev/fuse`);
  if (entry === undefined || !entry.fstype.startsWith('fuse')) {
    problems.push(`${mountpoint} is not a FUSE mount${entry === undefined ? '' : ` (it is ${entry.fstype})`}: with --fuse-fd, mount it first (knowledgefs mount-helper)`);
    return problems;
  }
  if (!entry.options.includes('ro')) {
    problems.push(`${mountpoint} was mounted read-write: a knowledge mount is read-only at the kernel level (writes get EROFS), so mount it ro (mount-helper does)`);
  }
  if (wants.allowOther && !entry.options.includes('allow_other')) {
    problems.push(`${mountpoint} was mounted without allow_other, but --allow-other/--group asks for other users: mount it with allow_other (mount-helper --allow-other or --group)`);
  }
  if (!wants.allowOther && entry.options.includes('allow_other')) {
    problems.push(`${mountpoint} was mounted with allow_other (every local user may read it), but this daemon has neither --allow-other nor --group: pass the same flags to both`);
  }
  if (wants.defaultPermissions && !entry.options.includes('default_permissions')) {
    problems.push(`${mountpoint} was mounted without default_permissions, so --group would not be enforced by the kernel: mount it with mount-helper --group`);
  }
  return problems;
}

/** Throws a KnowledgeError naming every problem with the handed-over mount. */
export async function checkHandedMount(fd: number, mountpoint: string, wants: HandedMountWants): Promise<void> {
  const problems = handedMountProblems(fd, mountpoint, await mountEntry(mountpoint), wants);
  if (problems.length > 0) throw new KnowledgeError('config', problems.join('; '));
}
