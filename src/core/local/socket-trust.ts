// Who may stand behind the control socket. The socket answers `read`,
// `manifest` and `reminder`, so whoever can replace it can feed the agent
// invented knowledge and log every path it reads. A path is only as safe as
// the directories above it: anyone who can write one of them can rename the
// socket away and bind their own in its place.
//
// The rule, for the socket and every directory from it up to `/`:
//   - owned by root or by a trusted user: the caller, and the daemon's user
//     when the operator names it (the client's --daemon-user); never one
//     guessed from what is found;
//   - a directory writable by group or others only with the sticky bit set
//     and root as owner (like /tmp: others may add names, never replace ours);
//   - the socket itself is a socket, not a symlink (a symlink may be swapped).
// Pure: callers lstat and pass what they found.

export interface EntryFacts {
  readonly path: string;
  readonly uid: number;
  readonly mode: number; // st_mode, type bits included
}

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFSOCK = 0o140000;
const S_IFLNK = 0o120000;
const STICKY = 0o1000;
const GROUP_OR_OTHER_WRITE = 0o022;

/** The uid(s) besides root whose entries are trusted. */
export type TrustedUids = number | readonly number[];

function ownerProblem(entry: EntryFacts, trusted: TrustedUids): string | undefined {
  const uids = [...new Set(typeof trusted === 'number' ? [trusted] : trusted)].filter((uid) => uid !== 0);
  if (entry.uid === 0 || uids.includes(entry.uid)) return undefined;
  const names = ['root', ...uids.map((uid) => `uid ${uid}`)];
  const who = names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
  return `${entry.path} is owned by uid ${entry.uid}, not by ${who}`;
}

/** Why a directory on the way to the socket cannot be trusted, or undefined. */
export function directoryTrustProblem(entry: EntryFacts, trustedUid: TrustedUids): string | undefined {
  if ((entry.mode & S_IFMT) !== S_IFDIR) return `${entry.path} is not a directory`;
  const owner = ownerProblem(entry, trustedUid);
  if (owner !== undefined) return owner;
  const othersWrite = (entry.mode & GROUP_OR_OTHER_WRITE) !== 0;
  if (othersWrite && !((entry.mode & STICKY) !== 0 && entry.uid === 0)) {
    return `${entry.path} is writable by other users (mode ${(entry.mode & 0o7777).toString(8).padStart(4, '0')})`;
  }
  return undefined;
}

/** Why the socket file itself cannot be trusted, or undefined. */
export function socketFileTrustProblem(entry: EntryFacts, trustedUid: TrustedUids): string | undefined {
  const kind = entry.mode & S_IFMT;
  if (kind === S_IFLNK) return `${entry.path} is a symbolic link, not the socket itself`;
  if (kind !== S_IFSOCK) return `${entry.path} is not a socket`;
  return ownerProblem(entry, trustedUid);
}

/** Every directory from `dir` up to `/`, nearest first (dir must be absolute and resolved). */
export function directoriesUpToRoot(dir: string): string[] {
  const out: string[] = [];
  let current = dir.length > 1 ? dir.replace(/\/+$/, '') : dir;
  for (;;) {
    out.push(current);
    if (current === '/') return out;
    const cut = current.lastIndexOf('/');
    current = cut <= 0 ? '/' : current.slice(0, cut);
  }
}
