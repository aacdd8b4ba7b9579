// Unprivileged local users for tests that need a second (hostile) user:
// created with `useradd --system` the first time (no home, no login shell),
// reused after that. Commands run as them through `setpriv`, with no
// supplementary groups, so they hold exactly that user's rights.
//
// Needs root (to create users and switch to them): `usersSuite` skips the
// suite otherwise, except with CI=true where it fails instead.

import { execFileSync } from 'node:child_process';
import { run, suiteNeeding, type RunOptions, type RunResult } from './mount.js';

export interface TestUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** Why test users cannot be created here, or undefined when they can. */
export function testUsersUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'creating and switching to test users needs root';
  for (const tool of ['useradd', 'setpriv']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      return `${tool} is not installed (apt-get install passwd util-linux)`;
    }
  }
  return undefined;
}

/** `describe` for suites that run commands as other users: skips without root, fails with CI=true. */
export function usersSuite(name: string, body: () => void): void {
  suiteNeeding('test users', testUsersUnavailableReason(), name, body);
}

function lookup(name: string): TestUser | undefined {
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return { name, uid: id('-u'), gid: id('-g') };
  } catch {
    return undefined;
  }
}

/** The unprivileged user `name` (kfs-test-…), created when missing. */
export function testUser(name: string): TestUser {
  const found = lookup(name);
  if (found !== undefined) return found;
  try {
    execFileSync('useradd', ['--system', '--no-create-home', '--user-group', '--shell', '/usr/sbin/nologin', name], { stdio: 'pipe' });
  } catch (err) {
    // Another test file may have created it at the same moment.
    if (lookup(name) === undefined) throw err;
  }
  const created = lookup(name);
  if (created === undefined) throw new Error(`useradd ${name} succeeded but the user cannot be found`);
  return created;
}

/** Runs `cmd args` as `user` (uid, gid, no supplementary groups). */
export function runAs(user: TestUser, cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return run('setpriv', [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--', cmd, ...args], {
    ...opts,
    env: { HOME: '/', ...opts.env },
  });
}
