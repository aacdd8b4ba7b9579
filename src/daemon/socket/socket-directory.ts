// The directory the control socket lives in, made safe before anything binds
// there. Whoever can write that directory (or one above it) can rename the
// socket away and bind their own, then answer the agent's `read`, `manifest`
// and `reminder` in the daemon's place. So the daemon:
//   - creates a missing directory itself, mode 0700, before listening;
//   - refuses a directory that is a symlink, that another user owns, or that
//     another user may write (the same rule the client applies, see
//     src/core/socket-trust.ts; the check is src/disk/trusted-directory.ts,
//     shared with the cache directories), naming the directory and the fix;
//   - binds under umask 0177, so the socket is 0600 from its first instant
//     (no chmod afterwards: a chmod follows a symlink swapped in at the path);
//     under 0117 (0660) only when the daemon has --group G and the directory
//     is group G's and setgid (mount-helper --socket makes it so): the socket
//     is then group G's, and G may connect, while the directory keeps
//     everyone else out.

import { lstatSync } from 'node:fs';
import { prepareTrustedDirectory, type DirectoryUse } from '../../disk/trusted-directory.js';

/** Mode bits a new socket must not have (group and others: nothing; owner: no execute). */
export const SOCKET_UMASK = 0o177;
/** The same, when the directory's group may connect (group read and write). */
export const GROUP_SOCKET_UMASK = 0o117;

/**
 * The umask to bind with: group G may connect only when the daemon has
 * --group G and `dir` is G's and setgid (so the socket is G's too).
 */
export function socketUmaskFor(dir: string, group: number | undefined): number {
  if (group === undefined) return SOCKET_UMASK;
  const st = lstatSync(dir);
  return st.isDirectory() && st.gid === group && (st.mode & 0o2000) !== 0 ? GROUP_SOCKET_UMASK : SOCKET_UMASK;
}

const SOCKET_DIRECTORY: DirectoryUse = {
  what: 'control socket directory',
  risk: "another local user could replace the socket and answer in the daemon's place",
  fix: 'Remove the directory (it is created again with mode 0700), or choose --socket in a directory only you (or root) can write',
};

/** Creates `dir` (mode 0700) if missing, then checks that only root or `uid` can change what is in it. */
export function prepareSocketDirectory(dir: string, uid: number): void {
  prepareTrustedDirectory(dir, uid, SOCKET_DIRECTORY);
}

/** Runs `bind` (a synchronous listen call) with `umask` (default 0177), restoring the previous umask after. */
export function withSocketUmask<T>(bind: () => T, umask: number = SOCKET_UMASK): T {
  const previous = process.umask(umask);
  try {
    return bind();
  } finally {
    process.umask(previous);
  }
}
