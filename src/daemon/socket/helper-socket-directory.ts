// The control socket's directory when the daemon runs as a user of its own
// (mount-helper --socket): the helper, as root, makes it before the daemon
// starts, because the daemon cannot create it in a root-owned /run. It is
// owned by the daemon's user (so the daemon may bind there, and the client's
// --daemon-user trusts it), and
//   - with --group G: group G, mode 2750: G may reach the socket and nobody
//     else may; the setgid bit gives the socket group G, so the daemon (not a
//     member of G) can let G connect (control-socket.ts binds it 0660 then);
//   - without: the daemon's group, mode 0700.
// Its parent must already be trusted (root's, not writable by others: the
// client's rule), so nobody can swap the directory between our steps. An
// existing directory is reused only when it is a real directory owned by
// root or the daemon's user; its owner and mode are then set through a
// descriptor opened without following links.

import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lstatSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import { directoryChainProblem } from '../../disk/trusted-directory.js';

export interface SocketDirectoryOwner {
  readonly uid: number;
  /** The group that may connect (--group), else the daemon's own gid with no group access. */
  readonly gid: number;
  readonly groupMayConnect: boolean;
}

/** The mode the directory gets. */
export const socketDirectoryMode = (o: SocketDirectoryOwner): number => (o.groupMayConnect ? 0o2750 : 0o700);

const refuse = (dir: string, why: string): KnowledgeError =>
  new KnowledgeError('config', `mount-helper: refusing the socket directory ${dir}: ${why}`);

/** Creates or fixes the directory of `socketPath` for the daemon; returns what it did, for the log. */
export function prepareHelperSocketDirectory(socketPath: string, o: SocketDirectoryOwner): string {
  const dir = dirname(socketPath);
  const parent = dirname(dir);
  let parentProblem: string | undefined;
  try {
    parentProblem = directoryChainProblem(parent, 0);
  } catch (err) {
    throw refuse(dir, `its parent ${parent} cannot be used (${(err as NodeJS.ErrnoException).code ?? String(err)}); create it first (install -d -m 0755 ${parent})`);
  }
  if (parentProblem !== undefined) throw refuse(dir, `${parentProblem}; its parent must be root's and writable by no one else`);
  let created = false;
  try {
    mkdirSync(dir, { mode: 0o700 });
    created = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw refuse(dir, `cannot create it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) throw refuse(dir, 'it is a symbolic link');
  if (!st.isDirectory()) throw refuse(dir, 'it is not a directory');
  if (st.uid !== 0 && st.uid !== o.uid) throw refuse(dir, `it is owned by uid ${st.uid}, neither root nor the daemon's user (uid ${o.uid}); remove it`);
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    const opened = fstatSync(fd);
    if (opened.ino !== st.ino || opened.dev !== st.dev) throw refuse(dir, 'it was replaced while being prepared');
    fchownSync(fd, o.uid, o.gid);
    fchmodSync(fd, socketDirectoryMode(o));
  } finally {
    closeSync(fd);
  }
  return `${created ? 'created' : 'set'} the socket directory ${dir} (uid ${o.uid}, gid ${o.gid}, mode ${socketDirectoryMode(o).toString(8).padStart(4, '0')})`;
}
