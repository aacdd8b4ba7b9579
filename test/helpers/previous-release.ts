// The previous release of knowledgefs, runnable, for rolling-upgrade tests:
// its tree taken from this clone's git history (`git archive`; a copy without
// .git names a clone's in $KNOWLEDGEFS_TEST_GIT_DIR), built with
// tsc into .cache/release-<version>-<commit>/ (gitignored) the first time and
// reused after that, like the Node binaries of scripts/node-binary.mjs.
//
// Its dependencies are this repository's node_modules (a symlink) when every
// one it names is installed here at the version it pins; otherwise
// `npm ci` installs its own from its lockfile. Built in a temporary sibling
// and renamed, so an interrupted build leaves nothing that looks complete.
// Only the control plane is built (no native addon): upgrade tests run
// `serve`.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './control-plane.js';

/** The release before this one: package version 0.1.0. */
export const PREVIOUS_RELEASE = { version: '0.1.0', commit: 'd6c8f145d5bf8c7c3a6703b23b671b266e8459af' } as const;

const CACHE_DIR = join(REPO_ROOT, '.cache');
const DONE = '.knowledgefs-built';

export interface PreviousRelease {
  readonly version: string;
  readonly commit: string;
  readonly dir: string;
  /** Its bin/knowledgefs.js (for spawnControlPlane's `bin`). */
  readonly bin: string;
  /** True when it was built now, false when the cached build was used. */
  readonly built: boolean;
  /** How long getting it took (building, or finding the cache). */
  readonly ms: number;
}

/** The history: this clone's, or the one named by $KNOWLEDGEFS_TEST_GIT_DIR (the mutation runner's copies have no .git). */
const GIT_DIR = process.env.KNOWLEDGEFS_TEST_GIT_DIR;

function git(args: string[]): string {
  const where = GIT_DIR !== undefined && GIT_DIR !== '' ? ['--git-dir', GIT_DIR] : ['-C', REPO_ROOT];
  return execFileSync('git', [...where, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function fullCommit(commit: string): string {
  const resolve = () => git(['rev-parse', '--verify', '--quiet', `${commit}^{commit}`]);
  try {
    return resolve();
  } catch {
    // A shallow clone lacks it: one commit fetched from its origin is enough.
  }
  try {
    git(['fetch', '--quiet', '--depth', '1', 'origin', commit]);
    return resolve();
  } catch {
    throw new Error(
      `the previous release (${PREVIOUS_RELEASE.version}, commit ${commit}) is not in the git history of ${GIT_DIR ?? REPO_ROOT}: ` +
        'the rolling-upgrade test builds it from there, and fetching it from origin failed. Run it in a full clone (`git clone`, or `git fetch --unshallow` in a shallow one).',
    );
  }
}

/** True when every dependency the release pins is installed in this repository at that exact version. */
function sameDependencies(dir: string): boolean {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>;
  const wanted = { ...pkg.dependencies, ...pkg.devDependencies };
  return Object.entries(wanted).every(([name, version]) => {
    const installed = join(REPO_ROOT, 'node_modules', name, 'package.json');
    return existsSync(installed) && (JSON.parse(readFileSync(installed, 'utf8')) as { version: string }).version === version;
  });
}

function run(command: string, args: string[], cwd: string): void {
  try {
    execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`building the previous release: ${command} ${args.join(' ')} in ${cwd} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

export function previousRelease(): PreviousRelease {
  const began = performance.now();
  const { version, commit } = PREVIOUS_RELEASE;
  const full = fullCommit(commit);
  const dir = join(CACHE_DIR, `release-${version}-${full.slice(0, 12)}`);
  const bin = join(dir, 'bin', 'knowledgefs.js');
  // A cached build whose node_modules symlink still resolves (the repository may have moved).
  const usable = existsSync(join(dir, DONE)) && existsSync(join(dir, 'node_modules', 'pg', 'package.json'));
  if (usable) return { version, commit, dir, bin, built: false, ms: performance.now() - began };
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(CACHE_DIR, { recursive: true });
  const work = mkdtempSync(`${dir}.partial-`);
  try {
    const tar = join(work, 'tree.tar');
    git(['archive', '--format=tar', '-o', tar, full]);
    run('tar', ['-xf', tar], work);
    rmSync(tar);
    if (sameDependencies(work)) {
      symlinkSync(join(REPO_ROOT, 'node_modules'), join(work, 'node_modules'), 'dir');
    } else {
      run('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], work);
    }
    run(process.execPath, [join(work, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], work);
    const reported = execFileSync(process.execPath, [join(work, 'bin', 'knowledgefs.js'), '--version'], { encoding: 'utf8' }).trim();
    if (reported !== version) throw new Error(`the build of commit ${commit} says it is ${reported}, not ${version}`);
    writeFileSync(join(work, DONE), `${full}\n`);
    try {
      renameSync(work, dir);
    } catch (err) {
      // Another run built it meanwhile: that one is as good.
      if (!existsSync(join(dir, DONE))) throw err;
      rmSync(work, { recursive: true, force: true });
    }
  } catch (err) {
    rmSync(work, { recursive: true, force: true });
    throw err;
  }
  return { version, commit, dir, bin, built: true, ms: performance.now() - began };
}
