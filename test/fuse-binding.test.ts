// Choosing the FUSE binding: the flag and environment values, and `auto`
// resolving to the native addon when it loads, to fuse-native otherwise.

import { describe, expect, it } from 'vitest';
import { chooseFuseBinding, parseFuseBinding } from '../src/daemon/fuse/fuse-binding.js';
import { loadNativeAddon } from '../src/daemon/fuse/native-fuse-adapter.js';

function nativeLoads(): boolean {
  try {
    loadNativeAddon();
    return true;
  } catch {
    return false;
  }
}

describe('fuse binding', () => {
  it('accepts auto, native and fuse-native; anything else names the source and the choices', () => {
    expect(parseFuseBinding('native')).toBe('native');
    expect(parseFuseBinding(' fuse-native ')).toBe('fuse-native');
    expect(() => parseFuseBinding('libfuse3', '$KNOWLEDGEFS_FUSE_BINDING')).toThrow(/\$KNOWLEDGEFS_FUSE_BINDING must be one of auto, native, fuse-native \(got "libfuse3"\)/);
  });

  it('fuse-native is taken as asked, without loading the addon', () => {
    const lines: string[] = [];
    expect(chooseFuseBinding('fuse-native', (l) => lines.push(l))).toBe('fuse-native');
    expect(lines).toEqual([]);
  });

  it('auto is native when the addon loads, else fuse-native with one line saying why; native alone fails then', () => {
    const lines: string[] = [];
    if (nativeLoads()) {
      expect(chooseFuseBinding('auto', (l) => lines.push(l))).toBe('native');
      expect(chooseFuseBinding('native', (l) => lines.push(l))).toBe('native');
      expect(lines).toEqual([]);
    } else {
      expect(chooseFuseBinding('auto', (l) => lines.push(l))).toBe('fuse-native');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/fuse binding: fuse-native \(cannot load the libfuse 3 binding .*npm run build:native/);
      expect(() => chooseFuseBinding('native', () => undefined)).toThrow(/npm run build:native/);
    }
  });
});
