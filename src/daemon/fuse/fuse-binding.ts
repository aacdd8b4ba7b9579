// Which FUSE binding mounts knowledge/ (--fuse-binding, $KNOWLEDGEFS_FUSE_BINDING):
//   native       the libfuse 3 low-level addon (native-fuse-adapter.ts): long
//                kernel caches, told of every change; needs the addon
//                (native-addon.ts) and libfuse3-3 + fuse3;
//   fuse-native  libfuse 2 through fuse-native (fuse-adapter.ts): 1 s kernel
//                caches, needs libfuse2 + fuse;
//   auto         native when its addon loads here (native-addon.ts: built in
//                this checkout, prebuilt in the npm package, or built from
//                source now), else fuse-native when it is installed (an
//                optional peer: fuse-native-presence.ts). The mount says which
//                and why in one stderr line, and `status` and `doctor` show it.
// Both sit behind the same FuseMount; the rest of the daemon asks only the
// traits below. Both adapters load their native code lazily, at mount.

import { KnowledgeError } from '../../core/errors.js';
import type { KnowledgeFilesystem } from '../filesystem.js';
import * as fuseNative from './fuse-adapter.js';
import type { FuseMount } from './fuse-adapter.js';
import { FUSE_NATIVE_INSTALL, fuseNativeInstalled } from './fuse-native-presence.js';
import { fuseFdNeedsNative } from './handed-mount.js';
import { loadNativeAddonWithOrigin } from './native-addon-api.js';
import * as native from './native-fuse-adapter.js';

export const FUSE_BINDINGS = ['auto', 'native', 'fuse-native'] as const;
export type FuseBindingChoice = (typeof FUSE_BINDINGS)[number];
export type FuseBinding = Exclude<FuseBindingChoice, 'auto'>;
export const FUSE_BINDING_ENV = 'KNOWLEDGEFS_FUSE_BINDING';
export const DEFAULT_FUSE_BINDING: FuseBindingChoice = 'auto';

export interface BindingTraits {
  /** All versions of a path are one kernel inode with one page cache (see changed-files.ts). */
  readonly versionsSharePageCache: boolean;
  /** Kernel attribute/entry cache when --attr-timeout is not given. */
  readonly defaultAttrTimeoutSec: number;
}

export function bindingTraits(binding: FuseBinding): BindingTraits {
  return binding === 'native'
    ? { versionsSharePageCache: native.VERSIONS_SHARE_PAGE_CACHE, defaultAttrTimeoutSec: native.NATIVE_CACHE_SEC }
    : { versionsSharePageCache: fuseNative.VERSIONS_SHARE_PAGE_CACHE, defaultAttrTimeoutSec: fuseNative.DEFAULT_ATTR_TIMEOUT_SEC };
}

export function parseFuseBinding(value: string, source = '--fuse-binding'): FuseBindingChoice {
  const v = value.trim();
  if ((FUSE_BINDINGS as readonly string[]).includes(v)) return v as FuseBindingChoice;
  throw new KnowledgeError('invalid_argument', `${source} must be one of ${FUSE_BINDINGS.join(', ')} (got ${JSON.stringify(value)})`);
}

/** A resolved binding and why it is the one: where the addon came from, or why auto fell back. */
export interface ChosenBinding {
  readonly binding: FuseBinding;
  readonly why: string;
}

export const describeBinding = (c: ChosenBinding): string => `${c.binding} (${c.why})`;

/**
 * Resolves `auto`; `native` when its addon cannot load is an error naming the
 * fix, and so is `auto` when fuse-native is not installed to fall back on.
 */
export function chooseFuseBinding(choice: FuseBindingChoice, hasFuseNative: () => boolean = fuseNativeInstalled): ChosenBinding {
  if (choice === 'fuse-native') return { binding: 'fuse-native', why: 'as asked' };
  try {
    return { binding: 'native', why: loadNativeAddonWithOrigin().origin };
  } catch (err) {
    if (choice === 'native') throw err;
    const why = err instanceof Error ? err.message : String(err);
    if (!hasFuseNative()) throw new KnowledgeError('config', `${why}. The fallback, fuse-native, is not installed either (${FUSE_NATIVE_INSTALL})`);
    return { binding: 'fuse-native', why: `auto: ${why}` };
  }
}

export function mountBinding(
  binding: FuseBinding,
  mountpoint: string,
  fs: KnowledgeFilesystem,
  opts: native.NativeMountOptions,
): Promise<FuseMount> {
  if (opts.fuseFd !== undefined && binding !== 'native') return Promise.reject(fuseFdNeedsNative());
  return binding === 'native' ? native.mountNativeFuse(mountpoint, fs, opts) : fuseNative.mountFuse(mountpoint, fs, opts);
}
