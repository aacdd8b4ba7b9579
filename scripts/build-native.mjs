#!/usr/bin/env node
// Builds the libfuse 3 addon (every native/*.c, with the native/*.h they
// share; native/knowledgefs_fuse.h says which file holds what) with the
// system's C compiler against the npm `node-api-headers` (no header
// download) and Debian's libfuse3-dev, into native/build/knowledgefs_fuse.node.
// It is rebuilt when any of those files is newer than the addon.
//
//   node scripts/build-native.mjs           build; fail with what is missing
//   node scripts/build-native.mjs --if-possible
//                                            build when gcc + libfuse3-dev are
//                                            present, else say so and exit 0
//                                            (the mount then uses fuse-native)
//   --arch x64|arm64 --out FILE              cross-build for that Linux arch
//                                            (Debian's <triplet>-gcc and
//                                            libfuse3-dev:<arch>) into FILE;
//                                            scripts/prebuild-native.mjs uses
//                                            it for prebuilds/linux-<arch>/
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const nativeDir = join(root, 'native');
const argValue = (name) => {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
};
/** Node's arch name → Debian's multiarch triplet. */
const TRIPLETS = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };
const arch = argValue('--arch') ?? process.arch;
const triplet = TRIPLETS[arch];
const target = resolve(argValue('--out') ?? join(root, 'native', 'build', 'knowledgefs_fuse.node'));
const outDir = dirname(target);
const optional = process.argv.includes('--if-possible');
const cross = arch !== process.arch;
const say = (msg) => process.stderr.write(`build-native: ${msg}\n`);

function fail(msg) {
  say(msg);
  if (optional) {
    say('skipped: mounts use the fuse-native binding (--fuse-binding auto)');
    process.exit(0);
  }
  process.exit(1);
}

if (triplet === undefined) fail(`--arch ${arch}: only ${Object.keys(TRIPLETS).join(', ')} are known`);
const cc = cross ? `${triplet}-gcc` : (process.env.CC ?? 'gcc');
const debArch = arch === 'x64' ? 'amd64' : arch;
if (spawnSync(cc, ['--version'], { stdio: 'ignore' }).status !== 0) {
  fail(cross ? `no ${cc}; Debian: apt-get install -y gcc-${triplet.replaceAll('_', '-')}` : `no C compiler (${cc}); Debian: apt-get install -y gcc make`);
}
// A cross build asks pkg-config about the target's libfuse3 only.
const pkgEnv = cross ? { ...process.env, PKG_CONFIG_LIBDIR: `/usr/lib/${triplet}/pkgconfig:/usr/share/pkgconfig` } : process.env;
const pkg = spawnSync('pkg-config', ['--cflags', '--libs', 'fuse3'], { encoding: 'utf8', env: pkgEnv });
const libDir = `/usr/lib/${triplet}`;
const flags = pkg.status === 0
  ? pkg.stdout.trim().split(/\s+/)
  : existsSync('/usr/include/fuse3/fuse_lowlevel.h') && (!cross || existsSync(join(libDir, 'libfuse3.so')))
    ? ['-I/usr/include/fuse3', '-lfuse3', '-lpthread']
    : undefined;
if (flags === undefined) fail(`libfuse 3 headers not found; Debian: apt-get install -y ${cross ? `libfuse3-dev:${debArch}` : 'libfuse3-dev pkg-config'}`);
if (cross) flags.unshift(`-L${libDir}`);

let headers;
try {
  headers = dirname(createRequire(import.meta.url).resolve('node-api-headers/include/node_api.h'));
} catch {
  fail('node-api-headers is missing: run npm ci');
}

/** The addon's C sources and headers (sorted: the same command line every time). */
const files = existsSync(nativeDir) ? readdirSync(nativeDir).filter((f) => /\.[ch]$/.test(f)).sort().map((f) => join(nativeDir, f)) : [];
const sources = files.filter((f) => f.endsWith('.c'));
if (sources.length === 0) fail(`no C sources in ${nativeDir}`);
const newest = Math.max(...files.map((f) => statSync(f).mtimeMs));
if (existsSync(target) && statSync(target).mtimeMs > newest && !process.argv.includes('--force')) process.exit(0);

mkdirSync(outDir, { recursive: true });
const partial = `${target}.partial`;
const args = [
  '-O2', '-fPIC', '-shared', '-Wall', '-Wextra', '-Werror', '-fvisibility=hidden',
  '-DNODE_GYP_MODULE_NAME=knowledgefs_fuse', `-I${headers}`,
  ...flags.filter((f) => !f.startsWith('-l')),
  ...sources, '-o', partial,
  ...flags.filter((f) => f.startsWith('-l')),
];
const built = spawnSync(cc, args, { stdio: 'inherit' });
if (built.status !== 0) fail(`${cc} failed (status ${built.status})`);
renameSync(partial, target);
say(`built ${target}`);
