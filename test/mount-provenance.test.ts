// Provenance on a real mount of a git-backed data directory, read with
// `getfattr` in child processes: the attributes equal `sha256sum` and
// `git log -1 --format=%H -- FILE`; they cost the control plane no request
// once the node is known; a hidden file and a missing one both fail ENOENT
// the same way; writing one is refused; an edit and then a commit of it
// reach the attributes through the sync. Runs on the binding the suite
// runs (native by default, fuse-native under test:fuse-native).

import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { directoryJsonOf, writeDataFile } from './helpers/data-dir.js';
import { scrape, type Scrape } from './helpers/metrics-scrape.js';
import { fuseSuite, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const TEMPLATE = 'https://git.example/kb/blob/{commit}/{path}';
let repo = '';
let data = '';
let cp: TestControlPlane;
let m: MountHandle | undefined;

const git = (...args: string[]): string =>
  execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@a', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@a' } }).trim();

/** `getfattr -d` of a file: name → value. */
async function attributesOf(file: string): Promise<Record<string, string>> {
  const r = await run('getfattr', ['-d', '--absolute-names', '-m', '-', file]);
  expect(r.code, r.stderr).toBe(0);
  const attrs: Record<string, string> = {};
  for (const line of r.stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0 && !line.startsWith('#')) attrs[line.slice(0, eq)] = JSON.parse(line.slice(eq + 1)) as string;
  }
  return attrs;
}

/** Requests for files the control plane answered: grants, reads, batches (plans and scrapes aside: the sync loop and this test make those). */
function fileRequests(s: Scrape): number {
  let n = 0;
  for (const sample of s.knowledgefs_http_requests_total?.data ?? []) {
    if (['files', 'grants', 'batch', 'read', 'session'].includes(String(sample.labels.route)) && 'value' in sample) n += sample.value;
  }
  return n;
}

fuseSuite('provenance on the mount', () => {
  beforeAll(async () => {
    repo = await mkdtemp(join(tmpdir(), 'kfs-gitmount-'));
    git('init', '-q', '-b', 'main');
    data = join(repo, 'kb');
    await writeDataFile(data, 'directory.json', directoryJsonOf({ teams: { search: 'Search', ops: 'Ops' }, users: { alice: { teams: ['search'] } } }));
    await writeDataFile(data, 'account/DUTY.md', '# Account\n');
    await writeDataFile(data, 'teams/search/runbooks/reindex.md', 'Reindex the cluster.\n');
    await writeDataFile(data, 'teams/ops/DUTY.md', '# Ops\n');
    git('add', '.');
    git('commit', '-q', '-m', 'first');
    cp = await startControlPlane({ dataDir: data, sourceUrl: TEMPLATE, release: '0.1.0' });
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    m = await startMount({ serverUrl: cp.url, token, args: ['--sync-interval', '200ms'] });
  });

  afterAll(async () => {
    await m?.stop();
    await cp?.close();
    if (repo) await rm(repo, { recursive: true, force: true });
  });

  it('getfattr -d lists the five attributes: sha256sum, the scope version, git log -1, the source URL, the time', async () => {
    const mount = (m as MountHandle).mountpoint;
    const file = join(mount, 'team_search/runbooks/reindex.md');
    const attrs = await attributesOf(file);
    const commit = git('log', '-1', '--format=%H', '--', 'kb/teams/search/runbooks/reindex.md');
    const sha = (await run('sha256sum', [file])).stdout.split(' ')[0];
    expect(Object.keys(attrs).sort()).toEqual(['user.knowledgefs.commit', 'user.knowledgefs.published_at', 'user.knowledgefs.scope_version', 'user.knowledgefs.sha256', 'user.knowledgefs.source']);
    expect(attrs['user.knowledgefs.sha256']).toBe(sha);
    expect(attrs['user.knowledgefs.commit']).toBe(commit);
    expect(attrs['user.knowledgefs.source']).toBe(`https://git.example/kb/blob/${commit}/kb/teams/search/runbooks/reindex.md`);
    expect(attrs['user.knowledgefs.scope_version']).toMatch(/^[0-9a-f]{64}$/);
    expect(attrs['user.knowledgefs.published_at']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // One attribute alone, and a directory has none.
    expect((await run('getfattr', ['--only-values', '-n', 'user.knowledgefs.commit', file])).stdout).toBe(commit);
    expect((await run('getfattr', ['-d', '-m', '-', join(mount, 'team_search')])).stdout).toBe('');
    expect((await run('getfattr', ['-n', 'user.knowledgefs.author', file])).stderr).toContain('No such attribute');
  });

  it('costs the control plane no request once the node is known', async () => {
    const file = join((m as MountHandle).mountpoint, 'account/DUTY.md');
    await run('stat', [file]);
    const before = fileRequests(await scrape(`${cp.url}/metrics`, cp.adminToken));
    for (let i = 0; i < 5; i++) await attributesOf(file);
    expect(fileRequests(await scrape(`${cp.url}/metrics`, cp.adminToken))).toBe(before);
  });

  it('a hidden file and a missing one: the same ENOENT, and attributes cannot be written', async () => {
    const mount = (m as MountHandle).mountpoint;
    const hidden = await run('getfattr', ['-d', join(mount, 'team_ops/DUTY.md')]);
    const missing = await run('getfattr', ['-d', join(mount, 'team_nope/DUTY.md')]);
    expect(hidden.code).not.toBe(0);
    expect(hidden.code).toBe(missing.code);
    expect(hidden.stderr.replace('team_ops', 'X')).toBe(missing.stderr.replace('team_nope', 'X'));
    expect(hidden.stderr).toContain('No such file or directory');
    const set = await run('setfattr', ['-n', 'user.knowledgefs.commit', '-v', 'x', join(mount, 'account/DUTY.md')]);
    expect(set.stderr).toContain('Read-only file system');
  });

  it('an edit, then a commit of it, reach the attributes through the sync', async () => {
    const file = join((m as MountHandle).mountpoint, 'team_search/runbooks/reindex.md');
    const before = await attributesOf(file);
    await writeDataFile(data, 'teams/search/runbooks/reindex.md', 'Reindex, then verify.\n');
    const edited = await waitFor(async (): Promise<Record<string, string> | undefined> => {
      const a = await attributesOf(file);
      return a['user.knowledgefs.sha256'] !== before['user.knowledgefs.sha256'] ? a : undefined;
    });
    expect(edited?.['user.knowledgefs.sha256']).toBe((await run('sha256sum', [file])).stdout.split(' ')[0]);
    expect(edited?.['user.knowledgefs.commit']).toBeUndefined();
    expect(edited?.['user.knowledgefs.scope_version']).not.toBe(before['user.knowledgefs.scope_version']);
    git('commit', '-q', '-am', 'verify after reindex');
    const commit = git('log', '-1', '--format=%H');
    const committed = await waitFor(async (): Promise<Record<string, string> | undefined> => {
      const a = await attributesOf(file);
      return a['user.knowledgefs.commit'] === commit ? a : undefined;
    });
    // The same bytes: the same hash and scope version, another commit.
    expect(committed?.['user.knowledgefs.sha256']).toBe(edited?.['user.knowledgefs.sha256']);
    expect(committed?.['user.knowledgefs.scope_version']).toBe(edited?.['user.knowledgefs.scope_version']);
  });
});
