// Where the libfuse 3 addon (native/*.c) comes from, in order:
//   1. native/build/knowledgefs_fuse.node: built from source in this checkout
//      (`npm run build`, `npm run build:native`);
//   2. prebuilds/<platform>-<arch>/knowledgefs_fuse.node: the prebuilt addon
//      the npm tarball carries for linux-x64 and linux-arm64 (glibc ≥ 2.34),
//      in the prebuildify layout (scripts/prebuild-native.mjs builds them);
//   3. a build from source on this machine, when neither loads, a C
//      compiler is here and the package has the sources (native/*.c and
//      *.h, which the tarball ships): scripts/build-native.mjs into
//      native/build, or,
//      when the package directory is not writable (a root-owned global
//      install), into $XDG_CACHE_HOME/knowledgefs/<version>/<platform>-<arch>/.
// Node-API is ABI-stable: one file serves every Node line. Every place that
// was tried and why it did not load is kept, so the mount's one line and
// `doctor` can say why the addon was, or was not, the one used.

import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ADDON_FILE = 'knowledgefs_fuse.node';
/** The package's root: dist/daemon/ → ../.. (and src/daemon/ under vitest). */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../..', import.meta.url));

export interface AddonPlace {
  readonly root: string;
  readonly platform: string;
  readonly arch: string;
  readonly env: NodeJS.ProcessEnv;
}

export const thisMachine = (env: NodeJS.ProcessEnv = process.env): AddonPlace => ({ root: PACKAGE_ROOT, platform: process.platform, arch: process.arch, env });

export type AddonResolution<T> =
  | { readonly ok: true; readonly addon: T; readonly path: string; /** e.g. `prebuilt linux-x64`. */ readonly origin: string }
  | { readonly ok: false; /** Each place tried, and why it failed. */ readonly reasons: readonly string[]; /** A C compiler is here to build it from source. */ readonly canBuild: boolean };

const target = (p: AddonPlace): string => `${p.platform}-${p.arch}`;
export const localBuildPath = (root: string): string => join(root, 'native', 'build', ADDON_FILE);
export const prebuiltPath = (p: AddonPlace): string => join(p.root, 'prebuilds', target(p), ADDON_FILE);

function cacheBuildPath(p: AddonPlace): string {
  const version = (JSON.parse(readFileSync(join(p.root, 'package.json'), 'utf8')) as { version: string }).version;
  const cacheHome = p.env.XDG_CACHE_HOME?.trim() || join(p.env.HOME?.trim() || homedir(), '.cache');
  return join(cacheHome, 'knowledgefs', version, target(p), ADDON_FILE);
}

const firstLine = (err: unknown): string => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
const compiler = (env: NodeJS.ProcessEnv): string => env.CC?.trim() || 'gcc';
const hasCompiler = (env: NodeJS.ProcessEnv): boolean => spawnSync(compiler(env), ['--version'], { stdio: 'ignore', env }).status === 0;

/** The addon's C sources in a package (what scripts/build-native.mjs compiles), none when it has no native/. */
export function nativeSources(root: string): string[] {
  const dir = join(root, 'native');
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.c')).sort() : [];
}

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Finds and loads the addon. With `build`, a missing or unloadable addon is
 * built from source when a compiler is here (its output goes to stderr);
 * without, nothing is written (doctor).
 */
export function resolveNativeAddon<T>(place: AddonPlace, build: boolean): AddonResolution<T> {
  const load = createRequire(import.meta.url);
  const reasons: string[] = [];
  const attempt = (path: string, origin: string): AddonResolution<T> | undefined => {
    if (!existsSync(path)) return undefined;
    try {
      return { ok: true, addon: load(path) as T, path, origin };
    } catch (err) {
      reasons.push(`${origin} does not load: ${firstLine(err)}`);
      return undefined;
    }
  };
  const local = localBuildPath(place.root);
  const prebuilt = prebuiltPath(place);
  const cached = cacheBuildPath(place);
  const found =
    attempt(local, 'built from source, native/build') ??
    attempt(prebuilt, `prebuilt ${target(place)}`) ??
    attempt(cached, `built from source, ${cached}`);
  if (found !== undefined) return found;
  if (!existsSync(prebuilt)) reasons.push(`no prebuilt for ${target(place)}`);

  const script = join(place.root, 'scripts', 'build-native.mjs');
  const hasSources = existsSync(script) && nativeSources(place.root).length > 0;
  const canBuild = place.platform === 'linux' && hasSources && hasCompiler(place.env);
  if (!hasSources) reasons.push('no addon sources (native/*.c) to build it from');
  else if (!canBuild) reasons.push(`no C compiler (${compiler(place.env)}) to build it from source`);
  if (!build || !canBuild) return { ok: false, reasons, canBuild };

  const out = writable(join(place.root, 'native')) ? local : cached;
  process.stderr.write(`knowledgefs: ${reasons.join('; ')}: building the libfuse 3 addon from source into ${out}\n`);
  const built = spawnSync(process.execPath, [script, '--out', out], { stdio: ['ignore', 'inherit', 'inherit'], env: place.env });
  if (built.status !== 0) {
    reasons.push(`building it from source failed (scripts/build-native.mjs exit ${built.status ?? built.signal})`);
    return { ok: false, reasons, canBuild };
  }
  const after = attempt(out, `built from source here (${reasons.join('; ')})`);
  return after ?? { ok: false, reasons, canBuild };
}

/** Why the addon cannot be used, and what fixes it, as one sentence. */
export function addonProblem(reasons: readonly string[]): string {
  return (
    `cannot load the libfuse 3 binding: ${reasons.join('; ')}. ` +
    'It needs libfuse3-3 and fuse3 at run time (Debian: apt-get install -y libfuse3-3 fuse3); ' +
    'to build it from source, gcc and libfuse3-dev (in a checkout: npm run build:native)'
  );
}
