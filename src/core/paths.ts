// Path rules shared by the control plane (URLs, pack scans) and the daemon.
// A pack path is relative, `/`-separated, with no empty, `.` or `..`
// segments, no backslash, no control characters, valid UTF-8, and bounded
// lengths. Anything else is rejected before it can touch a file system.

import { KnowledgeError } from './errors.js';

export const MAX_SEGMENT_BYTES = 255;
export const MAX_PATH_BYTES = 4096;

// C0 controls, DEL and C1 controls; NUL included.
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `segment` cannot be a file or directory name in a pack, or null if it can. */
export function segmentProblem(segment: string): string | null {
  if (segment === '') return 'empty path segment';
  if (segment === '.' || segment === '..') return `"${segment}" segment`;
  if (segment.includes('\\')) return 'backslash in name';
  if (CONTROL_CHARS.test(segment)) return 'control character in name';
  if (!segment.isWellFormed()) return 'name is not valid UTF-8';
  if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) return `name longer than ${MAX_SEGMENT_BYTES} bytes`;
  return null;
}

/** Why `path` is not a valid pack path, or null if it is. */
export function packPathProblem(path: string): string | null {
  if (path === '') return 'empty path';
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) return `path longer than ${MAX_PATH_BYTES} bytes`;
  if (path.startsWith('/')) return 'absolute path';
  for (const segment of path.split('/')) {
    const problem = segmentProblem(segment);
    if (problem !== null) return problem;
  }
  return null;
}

export function assertPackPath(path: string): string {
  const problem = packPathProblem(path);
  if (problem !== null) throw new KnowledgeError('invalid_argument', `invalid path: ${problem}`);
  return path;
}

/** Splits `scope/rest/of/path` at the first slash. */
export function splitScopePath(path: string): { scope: string; rest: string } {
  const slash = path.indexOf('/');
  return slash < 0 ? { scope: path, rest: '' } : { scope: path.slice(0, slash), rest: path.slice(slash + 1) };
}
