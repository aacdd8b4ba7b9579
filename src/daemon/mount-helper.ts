// `knowledgefs mount-helper`: the small privileged step of an unprivileged
// mount. As root (or with CAP_SYS_ADMIN) it
//
//   1. opens /dev/fuse and mounts MOUNTPOINT on it, doing what fusermount3
//      does: mount(2) with fd=N,rootmode=40000,user_id=U,group_id=G (and
//      allow_other/default_permissions when asked), ro,nosuid,nodev (ro: the
//      kernel answers every write EROFS before asking the daemon). Node has no
//      mount(2), so util-linux `mount -i` makes the call with the descriptor
//      inherited as its fd 3 (no helper program, no setuid binary);
//   2. starts the daemon command with that descriptor as its fd 3, as user
//      U:G through `setpriv` with no supplementary groups, no capabilities
//      (inheritable, ambient, bounding set all empty) and no_new_privs; then
//      closes its own copy, so the daemon holds the only one;
//   3. passes SIGHUP on (the daemon reopens its --log-file); on SIGTERM/SIGINT
//      detaches the mount first (the agent sees the mount
//      point empty, never "Transport endpoint is not connected") and passes
//      the signal on; when the daemon exits for any reason, detaches the mount
//      if it is still there and exits with the daemon's exit code.
//
// The daemon itself never unmounts (it cannot: handed-mount.ts), and the
// agent, an ordinary user, cannot unmount or mount over it either.

import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { constants } from 'node:os';
import { KnowledgeError } from '../core/errors.js';
import { findOnPath } from './fuse/fuse-check.js';
import type { RunAsUser } from './run-as-user.js';
import { cleanStaleMount, mountEntry } from './fuse/stale-mount.js';
import { prepareHelperSocketDirectory } from './socket/helper-socket-directory.js';

/** The daemon's descriptor for the FUSE connection (the first after stdin, stdout, stderr). */
export const HANDED_FUSE_FD = 3;

export interface MountHelperOptions {
  /** Absolute path to mount on; created when missing. */
  readonly mountpoint: string;
  /** Who the daemon runs as; also the mount's owner (user_id/group_id). */
  readonly user: RunAsUser;
  /** Other users (the agent) may use the mount: allow_other. */
  readonly allowOther: boolean;
  /** The kernel checks the mode bits (default_permissions): what the daemon's --group needs. */
  readonly defaultPermissions: boolean;
  /** The daemon's command line, e.g. `knowledgefs mount MOUNTPOINT --fuse-fd 3 …`. */
  readonly command: readonly string[];
  /** The daemon's --socket: its directory is made for the daemon's user (helper-socket-directory.ts). */
  readonly socketPath?: string;
  /** --group's gid: the group that may read the mount and connect to the socket. */
  readonly group?: number;
}

export interface MountHelperIo {
  readonly log: (line: string) => void;
  /** Calls `handler` on each `signal` until the returned function is called (SIGHUP is passed on: log reopen). */
  readonly onSignal?: (signal: NodeJS.Signals, handler: () => void) => () => void;
}

/** The kernel options for mount(2), in the form fusermount3 passes them. */
export function kernelMountOptions(o: Pick<MountHelperOptions, 'user' | 'allowOther' | 'defaultPermissions'>, fd: number): string {
  return [
    'ro',
    'nosuid',
    'nodev',
    `fd=${fd}`,
    'rootmode=40000',
    `user_id=${o.user.uid}`,
    `group_id=${o.user.gid}`,
    ...(o.allowOther ? ['allow_other'] : []),
    ...(o.defaultPermissions ? ['default_permissions'] : []),
  ].join(',');
}

/** `setpriv` arguments: user U:G, no groups, no capabilities now or after any exec, no way to gain privileges. */
export function dropPrivilegesArgs(user: RunAsUser): string[] {
  return [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all', '--no-new-privs'];
}

function tool(name: string, pkg: string): string {
  const found = findOnPath(name);
  if (found === undefined) throw new KnowledgeError('config', `${name} is not on PATH: mount-helper needs it (apt-get install -y ${pkg})`);
  return found;
}

function runTool(cmd: string, args: readonly string[], fuseFd?: number): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, [...args], { stdio: ['ignore', 'ignore', 'pipe', ...(fuseFd === undefined ? [] : [fuseFd])] });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stderr: stderr.trim() }));
  });
}

function openFuseDevice(): number {
  try {
    return openSync('/dev/fuse', 'r+');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new KnowledgeError(
      'config',
      `cannot open /dev/fuse (${code}): mount-helper is the privileged step; run it as root with the device present (in a container: --device /dev/fuse --cap-add SYS_ADMIN, or privileged)`,
    );
  }
}

/** Lazily detaches the mount (open files keep working until closed); nothing when it is already gone. */
export async function detachMount(mountpoint: string, log: (line: string) => void): Promise<void> {
  if ((await mountEntry(mountpoint)) === undefined) return;
  const res = await runTool(tool('umount', 'mount'), ['-i', '-l', mountpoint]);
  if (res.code !== 0 && (await mountEntry(mountpoint)) !== undefined) log(`mount-helper: cannot detach ${mountpoint}: ${res.stderr}`);
}

function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0));
}

/**
 * Mounts, runs the daemon unprivileged on the mount's descriptor until it
 * exits (passing `stop`'s signal on), then detaches. Returns the daemon's
 * exit code.
 */
export async function runMountHelper(o: MountHelperOptions, io: MountHelperIo, stop: Promise<string>): Promise<number> {
  if (o.command.length === 0) throw new KnowledgeError('invalid_argument', 'mount-helper: no daemon command after `--` (e.g. -- knowledgefs mount MOUNTPOINT --fuse-fd 3 --server URL --token-file FILE)');
  const setpriv = tool('setpriv', 'util-linux');
  const mount = tool('mount', 'mount');
  // The device first: without privilege, that is the error to see.
  const fd = openFuseDevice();
  let daemon: ChildProcess;
  let ours = false; // never detach a mount someone else made at this path
  try {
    if (o.socketPath !== undefined) {
      const groupMayConnect = o.group !== undefined;
      io.log(`mount-helper: ${prepareHelperSocketDirectory(o.socketPath, { uid: o.user.uid, gid: o.group ?? o.user.gid, groupMayConnect })}`);
    }
    const cleaned = await cleanStaleMount(o.mountpoint);
    if (cleaned !== undefined) io.log(`mount-helper: ${cleaned}`);
    await mkdir(o.mountpoint, { recursive: true }).catch((err: NodeJS.ErrnoException) => {
      throw new KnowledgeError('config', `mount-helper: cannot create the mount point ${o.mountpoint} (${err.code ?? err.message})`);
    });
    const options = kernelMountOptions(o, HANDED_FUSE_FD);
    const mounted = await runTool(mount, ['-i', '-t', 'fuse.knowledgefs', '-o', options, 'knowledgefs', o.mountpoint], fd);
    if (mounted.code !== 0) throw new KnowledgeError('config', `mount-helper: cannot mount ${o.mountpoint}: ${mounted.stderr || `mount exited ${mounted.code}`}`);
    ours = true;
    io.log(`mount-helper: mounted ${o.mountpoint} (${options}); starting the daemon as ${o.user.uid}:${o.user.gid} without capabilities`);
    daemon = spawn(setpriv, [...dropPrivilegesArgs(o.user), '--', ...o.command], { stdio: ['inherit', 'inherit', 'inherit', fd] });
  } catch (err) {
    closeSync(fd);
    if (ours) await detachMount(o.mountpoint, io.log);
    throw err;
  }
  // The daemon's copy is now the only one: when it exits, the kernel ends the connection.
  closeSync(fd);

  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    daemon.once('error', (err) => {
      io.log(`mount-helper: cannot start the daemon: ${err.message}`);
      resolve({ code: 127, signal: null });
    });
    daemon.once('exit', (code, signal) => resolve({ code, signal }));
  });
  // SIGHUP reopens the daemon's --log-file; here it would end the helper and leave the mount behind.
  const stopHangup = io.onSignal?.('SIGHUP', () => daemon.kill('SIGHUP'));
  const first = await Promise.race([exited.then(() => undefined), stop.then((signal) => signal)]);
  if (first !== undefined) {
    await detachMount(o.mountpoint, io.log);
    daemon.kill(first as NodeJS.Signals);
  }
  const { code, signal } = await exited;
  stopHangup?.();
  await detachMount(o.mountpoint, io.log);
  return exitCodeOf(code, signal);
}
