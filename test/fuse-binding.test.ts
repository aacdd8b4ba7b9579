// Choosing the FUSE binding: the flag and environment values, `auto`
// resolving to the native addon when it loads, to fuse-native otherwise, and
// where the addon comes from (native-addon.ts): this checkout's build, the
// package's prebuilt for this platform, or a build from source here, each
// with the reason the mount's line, `status` and `doctor` give.

import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseFuseBinding, describeBinding, parseFuseBinding } from '../src/daemon/fuse/fuse-binding.js';
import { FUSE_NATIVE_VERSION, fuseNativeInstalled } from '../src/daemon/fuse/fuse-native-presence.js';
import { ADDON_FILE, localBuildPath, resolveNativeAddon, type AddonPlace } from '../src/daemon/fuse/native-addon.js';
import { loadNativeAddon } from '../src/daemon/fuse/native-addon-api.js';
import { REPO_ROOT } from './helpers/mount.js';

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
    expect(describeBinding(chooseFuseBinding('fuse-native'))).toBe('fuse-native (as asked)');
  });

  it('auto is native when the addon loads, naming where it came from; else fuse-native saying why; native alone fails then', () => {
    if (nativeLoads()) {
      expect(describeBinding(chooseFuseBinding('auto'))).toBe('native (built from source, native/build)');
      expect(chooseFuseBinding('native').binding).toBe('native');
    } else {
      expect(describeBinding(chooseFuseBinding('auto'))).toMatch(/^fuse-native \(auto: cannot load the libfuse 3 binding: .*libfuse3-3/);
      expect(() => chooseFuseBinding('native')).toThrow(/npm run build:native/);
    }
  });
});

describe('fuse-native, an optional peer', () => {
  it('is a peer the package can do without, at the version named in messages, and a dev dependency here', async () => {
    const pkg = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, unknown> | undefined>;
    expect(pkg.dependencies?.['fuse-native']).toBeUndefined();
    expect(pkg.peerDependencies?.['fuse-native']).toBe(FUSE_NATIVE_VERSION);
    expect(pkg.peerDependenciesMeta?.['fuse-native']).toEqual({ optional: true });
    expect(pkg.devDependencies?.['fuse-native']).toBe(FUSE_NATIVE_VERSION);
  });

  it('is looked up without being loaded; a failed lookup means absent', () => {
    expect(fuseNativeInstalled()).toBe(true); // this checkout installs it for its own tests
    expect(fuseNativeInstalled(() => { throw Object.assign(new Error("Cannot find module 'fuse-native'"), { code: 'MODULE_NOT_FOUND' }); })).toBe(false);
  });

  it('auto without a loadable native addon and without fuse-native is an error naming both and the fix', () => {
    if (nativeLoads()) {
      expect(chooseFuseBinding('auto', () => false).binding).toBe('native'); // fuse-native is not asked for when native loads
      return;
    }
    expect(() => chooseFuseBinding('auto', () => false)).toThrow(/cannot load the libfuse 3 binding: .*The fallback, fuse-native, is not installed either \(npm i -g fuse-native@2\.2\.6/);
  });
});

describe('where the native addon comes from', () => {
  let pkg = '';
  const built = localBuildPath(REPO_ROOT);
  const place = (over: Partial<AddonPlace> = {}): AddonPlace => ({
    root: pkg,
    platform: 'linux',
    arch: 'x64',
    env: { PATH: '/nonexistent', HOME: join(pkg, 'home') },
    ...over,
  });

  beforeAll(async () => {
    // A package as npm installs it: package.json, the build script, the addon's sources (native/*.c, *.h), no native/build.
    pkg = await mkdtemp(join(tmpdir(), 'kfs-addon-'));
    await writeFile(join(pkg, 'package.json'), '{"version":"0.0.0-test"}');
    await mkdir(join(pkg, 'scripts'));
    await copyFile(join(REPO_ROOT, 'scripts', 'build-native.mjs'), join(pkg, 'scripts', 'build-native.mjs'));
    await mkdir(join(pkg, 'native'));
    for (const f of await readdir(join(REPO_ROOT, 'native'))) if (/\.[ch]$/.test(f)) await copyFile(join(REPO_ROOT, 'native', f), join(pkg, 'native', f));
    await symlink(join(REPO_ROOT, 'node_modules'), join(pkg, 'node_modules')); // node-api-headers, a dependency
  });
  afterAll(async () => {
    if (pkg) await rm(pkg, { recursive: true, force: true });
  });

  it('no prebuilt for this platform and no compiler: says both, builds nothing', () => {
    const r = resolveNativeAddon(place({ arch: 'riscv64' }), true);
    expect(r).toEqual({ ok: false, canBuild: false, reasons: ['no prebuilt for linux-riscv64', 'no C compiler (gcc) to build it from source'] });
  });

  it.runIf(nativeLoads() && process.arch === 'x64')('the prebuilt for this platform is used, named as such', async () => {
    await mkdir(join(pkg, 'prebuilds', 'linux-x64'), { recursive: true });
    await copyFile(built, join(pkg, 'prebuilds', 'linux-x64', ADDON_FILE));
    const r = resolveNativeAddon(place(), false);
    expect(r).toMatchObject({ ok: true, origin: 'prebuilt linux-x64', path: join(pkg, 'prebuilds', 'linux-x64', ADDON_FILE) });
  });

  it("a package without the addon's sources says so rather than blaming the compiler", async () => {
    const bare = await mkdtemp(join(tmpdir(), 'kfs-addon-bare-'));
    try {
      await writeFile(join(bare, 'package.json'), '{"version":"0.0.0-test"}');
      await mkdir(join(bare, 'scripts'));
      await copyFile(join(REPO_ROOT, 'scripts', 'build-native.mjs'), join(bare, 'scripts', 'build-native.mjs'));
      const r = resolveNativeAddon(place({ root: bare, arch: 'riscv64', env: { ...process.env, HOME: join(bare, 'home') } }), true);
      expect(r).toEqual({ ok: false, canBuild: false, reasons: ['no prebuilt for linux-riscv64', 'no addon sources (native/*.c) to build it from'] });
    } finally {
      await rm(bare, { recursive: true, force: true });
    }
  });

  it('a prebuilt that does not load says why', async () => {
    await mkdir(join(pkg, 'prebuilds', 'linux-ppc64'), { recursive: true });
    await writeFile(join(pkg, 'prebuilds', 'linux-ppc64', ADDON_FILE), 'not an ELF file');
    const r = resolveNativeAddon(place({ arch: 'ppc64' }), false);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reasons[0]).toMatch(/^prebuilt linux-ppc64 does not load: .*(invalid ELF header|too short)/);
  });

  it.runIf(nativeLoads())('no prebuilt fits but a compiler is here: builds from source and says so', async () => {
    const r = resolveNativeAddon(place({ arch: 'riscv64', env: { ...process.env, HOME: join(pkg, 'home') } }), true);
    expect(r).toMatchObject({ ok: true, origin: 'built from source here (no prebuilt for linux-riscv64)', path: join(pkg, 'native', 'build', ADDON_FILE) });
  }, 60_000);
});
