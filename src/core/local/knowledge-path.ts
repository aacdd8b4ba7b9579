// Turns what the agent typed into `<scope>/<path>` inside the mount.
//
// The agent copies paths from `ls`/`find`: `knowledge/…` relative to the
// directory holding the mount, a path relative to its working directory, or
// an absolute path under the mount point. The mount's basename need not be
// `knowledge`: both `knowledge/…` and `<basename>/…` are taken as relative to
// the mount's parent. Normalisation is purely lexical — the file the read tool
// is asked for is usually not on disk, so there is nothing to stat — and the
// mount has no symlinks, so lexical `..` is what the tree means too.
// Anything that resolves outside the mount is rejected.

import { posix } from 'node:path';
import { KnowledgeError } from '../errors.js';
import { segmentProblem, MAX_PATH_BYTES } from '../paths.js';
import { parseScope } from '../scope.js';

export interface ResolvedKnowledgePath {
  /** `<scope>/<path inside the scope>`, e.g. `team_x/a/b.md`. */
  readonly scopePath: string;
  /** As `ls`/`find` print it from the mount's parent, e.g. `knowledge/team_x/a/b.md`. */
  readonly display: string;
}

export const KNOWLEDGE_DIR = 'knowledge';

/**
 * The one "no such file" message. It echoes only the path as typed, so a
 * personal session's hidden denial is byte-identical to a missing file.
 */
export function noSuchFileMessage(typed: string): string {
  return `${typed}: no such file`;
}

function invalid(typed: string, why: string): KnowledgeError {
  return new KnowledgeError('invalid_argument', `${typed}: ${why}`);
}

/** Path of `abs` below `root` (both normalised, absolute), or null if it is not inside. */
function below(root: string, abs: string): string | null {
  if (abs === root) return '';
  const prefix = root.endsWith('/') ? root : `${root}/`;
  return abs.startsWith(prefix) ? abs.slice(prefix.length) : null;
}

export interface MountRelativePath {
  /** The mount point, normalised, without a trailing slash. */
  readonly root: string;
  /** The mount point's basename (`knowledge` as a rule). */
  readonly base: string;
  /** The path below `root`: '' for the mount itself, null when it lands outside. */
  readonly rel: string | null;
  /** True when the path as resolved ended in "/". */
  readonly trailingSlash: boolean;
}

/**
 * Where `input` lands, lexically: `knowledge/…` and `<basename>/…` from the
 * mount's parent, other relative paths from `cwd`, absolute paths as they are.
 */
export function mountRelativePath(input: string, cwd: string, mountpoint: string): MountRelativePath {
  const root = posix.normalize(mountpoint).replace(/(.)\/+$/, '$1');
  const base = posix.basename(root);

  let abs: string;
  if (posix.isAbsolute(input)) {
    abs = posix.normalize(input);
  } else {
    const first = input.split('/')[0];
    // `knowledge/…` (or `<basename>/…`) is how ls/find print it from the mount's parent,
    // wherever the agent's shell happens to be.
    abs = first === KNOWLEDGE_DIR || first === base ? posix.join(root, input.slice((first ?? '').length)) : posix.join(cwd, input);
  }
  // normalize keeps one trailing slash: remember it, then drop it to compare.
  const trailingSlash = abs.length > 1 && abs.endsWith('/');
  if (trailingSlash) abs = abs.slice(0, -1);
  return { root, base, rel: below(root, abs), trailingSlash };
}

export function resolveKnowledgePath(input: string, cwd: string, mountpoint: string): ResolvedKnowledgePath {
  if (input === '') throw invalid('""', 'empty path');
  if (input.includes('\0')) throw invalid(JSON.stringify(input), 'NUL character in path');
  if (Buffer.byteLength(input) > MAX_PATH_BYTES) throw invalid(`${input.slice(0, 64)}…`, `path longer than ${MAX_PATH_BYTES} bytes`);
  if (!posix.isAbsolute(mountpoint)) throw new KnowledgeError('internal', `mount point is not absolute: ${mountpoint}`);
  if (!posix.isAbsolute(cwd)) throw new KnowledgeError('invalid_argument', `working directory is not absolute: ${cwd}`);

  const { root, base, rel, trailingSlash } = mountRelativePath(input, cwd, mountpoint);
  if (rel === null) throw invalid(input, `outside ${KNOWLEDGE_DIR}/ (the mount at ${root}); give a path as ls or find print it under ${KNOWLEDGE_DIR}/`);
  if (rel === '') throw invalid(input, `is the ${KNOWLEDGE_DIR}/ directory itself, not a file; give a file path such as ${KNOWLEDGE_DIR}/account/DUTY.md`);

  const segments = rel.split('/');
  for (const segment of segments) {
    const problem = segmentProblem(segment);
    if (problem !== null) throw invalid(input, `invalid path: ${problem}`);
  }
  const scope = segments[0] ?? '';
  if (parseScope(scope) === null) {
    // Not a scope the mount could ever show: exactly what a missing file says.
    throw new KnowledgeError('not_found', noSuchFileMessage(input));
  }
  if (segments.length === 1) {
    throw invalid(input, `is a scope directory, not a file; its entry file is ${KNOWLEDGE_DIR}/${scope}/DUTY.md`);
  }
  if (trailingSlash) throw invalid(input, 'ends with "/", which names a directory; give a file path');

  return { scopePath: rel, display: `${base}/${rel}` };
}
