// Files in a cache directory, read and written so that nothing planted there
// can redirect or stall us (the directory itself is checked by
// trusted-directory.ts; this is the second line, for entries that got there
// anyway: left by an earlier owner, or by a careless operator's copy).
//
//   - Reads open with O_NOFOLLOW (a symlink fails, ELOOP) and O_NONBLOCK (a
//     FIFO opens at once instead of parking a libuv threadpool thread until a
//     writer comes: four of those and every other fs call of the process
//     waits), then fstat the descriptor: anything but a regular file owned by
//     us is refused, and the caller treats it as a miss.
//   - Writes go to a temp file with a random name, created with
//     O_CREAT|O_EXCL|O_NOFOLLOW (a planted name, link or not, makes the create
//     fail instead of being written through), mode 0600, then renamed over the
//     final name (rename replaces a link there, never follows it).

import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants;
const READ_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
const CREATE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;

export type PrivateRead =
  | { readonly kind: 'bytes'; readonly bytes: Buffer }
  /** Not there (or unreadable): a plain miss. */
  | { readonly kind: 'missing' }
  /** Something that is not our regular file: a miss the caller logs and removes. */
  | { readonly kind: 'refused'; readonly why: string };

function kindOf(st: { isFIFO(): boolean; isDirectory(): boolean; isSocket(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean }): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isDirectory()) return 'a directory';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/** The bytes of `path` if it is a regular file owned by `uid`, never following a link or blocking on a FIFO. */
export async function readPrivateFile(path: string, uid: number): Promise<PrivateRead> {
  let handle;
  try {
    handle = await open(path, READ_FLAGS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') return { kind: 'refused', why: 'a symbolic link' };
    return { kind: 'missing' };
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return { kind: 'refused', why: kindOf(st) };
    if (st.uid !== uid) return { kind: 'refused', why: `owned by uid ${st.uid}` };
    return { kind: 'bytes', bytes: await handle.readFile() };
  } catch {
    return { kind: 'missing' };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** `${prefix}.<random>.tmp`: crypto-random, so nobody can plant that name ahead of us. */
export function randomTempName(prefix: string): string {
  return `${prefix}.${randomBytes(12).toString('hex')}.tmp`;
}

/**
 * Writes `bytes` to `tmp` (created exclusively, never through a link, mode
 * 0600), then renames it to `file`. On failure the temp file, if we made it,
 * is removed and the error thrown.
 */
export async function writePrivateFile(tmp: string, file: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(tmp, CREATE_FLAGS, 0o600);
  try {
    try {
      await handle.writeFile(bytes);
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}
