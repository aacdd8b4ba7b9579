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
//     (no chmod afterwards: a chmod follows a symlink swapped in at the path).

import { prepareTrustedDirectory, type DirectoryUse } from '../../disk/trusted-directory.js';

/** Mode bits a new socket must not have (group and others: nothing; owner: no execute). */
export const SOCKET_UMASK = 0o177;

const SOCKET_DIRECTORY: DirectoryUse = {
  what: 'control socket directory',
  risk: "another local user could replace the socket and answer in the daemon's place",
  fix: 'Remove the directory (it is created again with mode 0700), or choose --socket in a directory only you (or root) can write',
};

/** Creates `dir` (mode 0700) if missing, then checks that only root or `uid` can change what is in it. */
export function prepareSocketDirectory(dir: string, uid: number): void {
  prepareTrustedDirectory(dir, uid, SOCKET_DIRECTORY);
}

/** Runs `bind` (a synchronous listen call) with umask 0177, restoring the previous umask after. */
export function withSocketUmask<T>(bind: () => T): T {
  const previous = process.umask(SOCKET_UMASK);
  try {
    return bind();
  } finally {
    process.umask(previous);
  }
}
