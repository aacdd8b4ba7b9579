// Directories the daemon and the server keep private things in: the control
// socket's directory, --cache-dir and --blob-cache-dir. Whoever can write such
// a directory (or one above it) can swap what is in it: replace the socket and
// answer in the daemon's place, or plant symlinks and FIFOs among cache files
// so that a root process overwrites a file of their choosing, or blocks a
// thread opening a FIFO. So, before anything is created or read there:
//   - a missing directory is created by us, mode 0700;
//   - a directory that is a symlink, that another user owns, or that another
//     user may write (the client's socket rule, src/core/socket-trust.ts,
//     checked from it up to `/`) is refused, naming the directory and the fix.
// Subdirectories a cache makes itself (the content cache's fan-out) are
// checked one by one: created 0700, and refused when another user planted them.

import { lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { lstat, mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { KnowledgeError } from '../core/errors.js';
import { directoriesUpToRoot, directoryTrustProblem, type TrustedUids } from '../core/local/socket-trust.js';

/**
 * Why the directory `dir` (absolute) cannot hold a socket trusted by user
 * `uid` (or any of several): a symlink on the way owned by someone else, or a
 * directory from its real path up to `/` that another user owns or may
 * write. Throws what lstat throws.
 */
export function directoryChainProblem(dir: string, uid: TrustedUids): string | undefined {
  const trusted = typeof uid === 'number' ? [uid] : uid;
  // A symlink on the way may be swapped by its owner: it must be trusted too.
  for (const d of directoriesUpToRoot(dir)) {
    const st = lstatSync(d);
    if (st.isSymbolicLink() && st.uid !== 0 && !trusted.includes(st.uid)) return `${d} is a symbolic link owned by uid ${st.uid}`;
  }
  for (const d of directoriesUpToRoot(realpathSync(dir))) {
    const st = lstatSync(d);
    const problem = directoryTrustProblem({ path: d, uid: st.uid, mode: st.mode }, uid);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** What the directory is for, for the refusal: `refusing the ${what} DIR: why; ${risk}. ${fix}`. */
export interface DirectoryUse {
  /** "control socket directory", "cache directory (--cache-dir)", … */
  readonly what: string;
  /** What another user could do with it. */
  readonly risk: string;
  /** What to do instead. */
  readonly fix: string;
}

function refuse(dir: string, why: string, use: DirectoryUse): KnowledgeError {
  return new KnowledgeError('config', `refusing the ${use.what} ${dir}: ${why}; ${use.risk}. ${use.fix}`);
}

/**
 * Creates `dir` (mode 0700) if missing, then checks that only root or `uid`
 * can change what is in it. Returns the absolute path; throws a `config`
 * KnowledgeError naming the directory, why and the fix otherwise.
 */
export function prepareTrustedDirectory(dir: string, uid: number, use: DirectoryUse): string {
  const absolute = resolve(dir);
  let st;
  try {
    st = lstatSync(absolute);
  } catch {
    mkdirSync(absolute, { recursive: true, mode: 0o700 });
    st = lstatSync(absolute);
  }
  if (st.isSymbolicLink()) throw refuse(absolute, 'it is a symbolic link', use);
  const problem = directoryChainProblem(absolute, uid);
  if (problem !== undefined) throw refuse(absolute, problem, use);
  return absolute;
}

/**
 * Why the subdirectory `path` of a trusted directory cannot be used by `uid`
 * (a symlink, not a directory, another owner, writable by others), or
 * undefined. `create`: make it (mode 0700) when it is missing. Throws what
 * mkdir and lstat throw (ENOENT: missing, and not created).
 */
export async function subdirectoryProblem(path: string, uid: number, create: boolean): Promise<string | undefined> {
  if (create) {
    await mkdir(path, { mode: 0o700 }).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    });
  }
  const st = await lstat(path);
  return directoryTrustProblem({ path, uid: st.uid, mode: st.mode }, uid);
}
