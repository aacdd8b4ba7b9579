// What git says of a data directory's files: which commit last changed each
// one, and which differ from that commit (modified, staged, untracked:
// their bytes are not the committed ones, so they get no commit). Read with
// the `git` CLI in three processes per look whatever the number of files:
// `rev-parse` (the work tree, the data directory's place in it, HEAD),
// `status` (what differs), and one `log --name-only` over the data
// directory's history, newest first, stopped as soon as every file asked
// about has been seen. Never an author: the log is asked for commit ids and
// committer times only.
//
// A data directory outside any work tree, a repository without commits, or
// no `git` on PATH: no history, said once in the log, and files simply have
// no commit.

import { execFile, spawn } from 'node:child_process';

/** The last commit that changed a file, as recorded. */
export interface FileCommit {
  readonly commit: string;
  /** The commit's committer time, ISO 8601 UTC. */
  readonly committedAt: string;
}

export interface GitLook {
  /** HEAD when looked. */
  readonly head: string;
  /** The data directory's path inside the work tree, '' or ending in `/` (e.g. `kb/`). */
  readonly prefix: string;
  /** Data-directory-relative path → its last commit, for the files asked about that are committed and unmodified. */
  readonly commits: ReadonlyMap<string, FileCommit>;
}

/** The longest one git command may run before the look is given up (a huge history). */
const GIT_TIMEOUT_MS = 120_000;

function git(cwd: string, args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('git', ['--no-optional-locks', '-C', cwd, ...args], { maxBuffer: 256 * 1024 * 1024, timeout: GIT_TIMEOUT_MS, env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } }, (err, stdout, stderr) => {
      if (err) reject(new Error((stderr.trim().split('\n')[0] ?? '') || err.message));
      else resolve(stdout);
    });
  });
}

/** The work tree's view of `dataDir`: its prefix and HEAD; null when it is in no work tree or has no commit. */
export async function gitPlace(dataDir: string): Promise<{ prefix: string; head: string } | string> {
  let out: string;
  try {
    out = await git(dataDir, ['rev-parse', '--show-prefix', '--verify', '-q', 'HEAD']);
  } catch (err) {
    return (err as Error).message;
  }
  const [prefix, head] = out.split('\n');
  if (head === undefined || !/^[0-9a-f]{40,64}$/.test(head)) return 'no commit yet';
  return { prefix: prefix ?? '', head };
}

/** Repository-relative paths that differ from HEAD (modified, staged, untracked, deleted), under `dataDir`. */
async function differing(dataDir: string): Promise<Set<string>> {
  const out = await git(dataDir, ['status', '--porcelain=v1', '-z', '--untracked-files=all', '--no-renames', '--ignored=no', '--', '.']);
  const paths = new Set<string>();
  for (const entry of out.split('\0')) if (entry.length > 3) paths.add(entry.slice(3));
  return paths;
}

/**
 * The last commit of each of `wanted` (repository-relative paths), from one
 * `git log` over `dataDir`'s history that stops once all are found.
 */
function lastCommits(dataDir: string, head: string, wanted: ReadonlySet<string>): Promise<Map<string, FileCommit>> {
  return new Promise((resolve, reject) => {
    const found = new Map<string, FileCommit>();
    if (wanted.size === 0) {
      resolve(found);
      return;
    }
    const child = spawn('git', ['--no-optional-locks', '-C', dataDir, 'log', '-z', '--no-renames', '--name-only', '--format=%x01%H %ct', head, '--', '.'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
    });
    const timer = setTimeout(() => child.kill(), GIT_TIMEOUT_MS);
    let current: FileCommit | null = null;
    let rest = '';
    let stderr = '';
    let done = false;
    const finish = (err?: Error): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(found);
    };
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => (stderr += d).length > 4096 && (stderr = stderr.slice(0, 4096)));
    child.stdout.on('data', (chunk: string) => {
      const tokens = (rest + chunk).split('\0');
      rest = tokens.pop() as string;
      for (let token of tokens) {
        if (token.startsWith('\x01')) {
          const [commit, seconds] = token.slice(1).split(' ');
          current = { commit: commit as string, committedAt: new Date(Number(seconds) * 1000).toISOString() };
          continue;
        }
        if (token.startsWith('\n')) token = token.slice(1);
        if (token === '' || current === null || found.has(token) || !wanted.has(token)) continue;
        found.set(token, current);
      }
      if (found.size === wanted.size) {
        // Every file seen: the rest of the history is not needed.
        child.stdout.destroy();
        child.kill();
        finish();
      }
    });
    child.on('error', (err) => finish(err));
    child.on('close', (code, signal) => {
      if (code === 0 || done) finish();
      else finish(new Error(stderr.trim().split('\n')[0] || `git log ended with ${signal ?? `exit code ${String(code)}`}`));
    });
  });
}

/**
 * One look at `dataDir`'s files (`paths`, relative to it): their last
 * commits, leaving out every file that differs from HEAD. A string says why
 * there is no history (not a work tree, no commit, no git).
 */
export async function lookAtGit(dataDir: string, paths: readonly string[]): Promise<GitLook | string> {
  const place = await gitPlace(dataDir);
  if (typeof place === 'string') return place;
  const dirty = await differing(dataDir);
  const wanted = new Set<string>();
  for (const p of paths) {
    const inRepo = `${place.prefix}${p}`;
    if (!dirty.has(inRepo)) wanted.add(inRepo);
  }
  const byRepoPath = await lastCommits(dataDir, place.head, wanted);
  const commits = new Map<string, FileCommit>();
  for (const [inRepo, c] of byRepoPath) commits.set(inRepo.slice(place.prefix.length), c);
  return { head: place.head, prefix: place.prefix, commits };
}
