// Whether fuse-native (the libfuse 2 fallback binding) is installed. It is an
// optional peer of the package, not a dependency: `npm i -g knowledgefs`
// never installs it, because its install script needs libfuse 2 or, failing
// that, a compiler and Python (node-gyp), which the native addon's prebuilt
// does not. Who wants the fallback installs it beside knowledgefs. This
// looks without loading it (no libfuse 2 needed to ask), so the mount and
// `doctor` can say in one line that it is absent.

import { createRequire } from 'node:module';

/** The fuse-native release this package is tested with (package.json peerDependencies). */
export const FUSE_NATIVE_VERSION = '2.2.6';

/** How to add the fallback, for messages. */
export const FUSE_NATIVE_INSTALL =
  `npm i -g fuse-native@${FUSE_NATIVE_VERSION} beside a global knowledgefs (npm i fuse-native@${FUSE_NATIVE_VERSION} in a project), with libfuse2 and fuse`;

const require = createRequire(import.meta.url);

/** True when `require('fuse-native')` would find the package from here. */
export function fuseNativeInstalled(resolve: (id: string) => string = require.resolve): boolean {
  try {
    resolve('fuse-native');
    return true;
  } catch {
    return false;
  }
}

/** The one line a mount logs, and doctor shows, when the fallback is absent. */
export const FUSE_NATIVE_ABSENT = `fuse-native: not installed (the optional libfuse 2 fallback; to add it: ${FUSE_NATIVE_INSTALL})`;
