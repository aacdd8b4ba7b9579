// The --cache-dir check, apart from the cache itself so that `mount` can
// refuse a bad directory before it loads the rest of the daemon or asks the
// control plane anything (src/daemon/run-mount.ts); the cache checks again
// when it is built, so it is safe however it is constructed.

import { prepareTrustedDirectory, type DirectoryUse } from '../../disk/trusted-directory.js';

const CACHE_DIRECTORY: DirectoryUse = {
  what: 'cache directory (--cache-dir)',
  risk: 'another local user could plant links or FIFOs there and make the daemon overwrite any file, or hang',
  fix: 'Remove the directory (it is created again with mode 0700), or choose a --cache-dir only you (or root) can write',
};

/** Creates --cache-dir (0700) when missing; throws a `config` KnowledgeError when another user could change it. Returns it absolute. */
export function prepareCacheDirectory(dir: string): string {
  return prepareTrustedDirectory(dir, process.getuid?.() ?? 0, CACHE_DIRECTORY);
}
