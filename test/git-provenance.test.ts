// Provenance recorded at the source by `serve --data`, against a real git
// repository holding the data directory in a subdirectory (kb/): each file's
// commit is the one `git log -1 -- FILE` names, with that commit's time; a
// file whose bytes differ from HEAD (edited, untracked) has none; the source
// URL expands the operator's template with the file's path in the
// repository; a commit of bytes already served changes the provenance (and
// the plan's ETag for a client that takes provenance) but never a scope's
// version; a client that does not ask gets no provenance; a data directory
// outside git has no commits and says so once; no record names a person.

import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPlan } from '../src/daemon/control-plane/wire-check.js';
import { fileProvenance, recordAt, type FileProvenance } from '../src/core/provenance/provenance.js';
import type { Plan } from '../src/core/session/plan.js';
import { resolveOptions } from '../src/server/options.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { directoryJsonOf, makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { waitFor } from './helpers/mount.js';

const spec: DataDirSpec = {
  teams: { search: 'Search' },
  users: { alice: { teams: ['search'] } },
};
const TEMPLATE = 'https://git.example/kb/blob/{commit}/{path}';

let repo = '';
let data = '';
let cp: TestControlPlane;
let token = '';

const git = (...args: string[]): string =>
  execFileSync('git', ['-C', repo, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GIT_AUTHOR_NAME: 'Ann Author', GIT_AUTHOR_EMAIL: 'ann@example.com', GIT_COMMITTER_NAME: 'Cy Committer', GIT_COMMITTER_EMAIL: 'cy@example.com' },
  }).trim();

async function planOf(query: string): Promise<{ plan: Plan; etag: string | null; raw: string }> {
  const res = await fetch(`${cp.url}/v1/plan${query}`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  const raw = await res.text();
  return { plan: checkPlan(JSON.parse(raw)), etag: res.headers.get('etag'), raw };
}

async function provenanceOf(scope: string, path: string): Promise<FileProvenance | undefined> {
  const { plan } = await planOf('?provenance=');
  const s = plan.scopes.find((x) => x.scope === scope);
  if (s?.provenance === undefined) return undefined;
  const index = s.files.findIndex((f) => f.path === path);
  const record = recordAt(s.provenance, index);
  return record === undefined ? undefined : fileProvenance(record, s.provenance, scope, path);
}

beforeAll(async () => {
  repo = await mkdtemp(join(tmpdir(), 'kfs-git-'));
  git('init', '-q', '-b', 'main');
  data = join(repo, 'kb');
  await writeDataFile(data, 'directory.json', directoryJsonOf(spec));
  await writeDataFile(data, 'account/DUTY.md', '# Account\n');
  await writeDataFile(data, 'teams/search/DUTY.md', '# Search\n');
  await writeDataFile(data, 'teams/search/runbooks/re index.md', 'one\n');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  await writeDataFile(data, 'teams/search/runbooks/re index.md', 'two\n');
  git('commit', '-q', '-am', 'second');
  await writeDataFile(data, 'teams/search/draft.md', 'not committed\n');
  cp = await startControlPlane({ dataDir: data, sourceUrl: TEMPLATE, release: '9.8.7', scanIntervalMs: 200 });
  ({ token } = await cp.createSession({ kind: 'personal', creator: 'alice' }));
});
afterAll(async () => {
  await cp?.close();
  if (repo) await rm(repo, { recursive: true, force: true });
});

describe('serve --data in a git work tree', () => {
  it("gives each committed file the commit git log names for it, with the commit's time and a source URL", async () => {
    const path = 'kb/teams/search/runbooks/re index.md';
    const p = await provenanceOf('team_search', 'runbooks/re index.md');
    const commit = git('log', '-1', '--format=%H', '--', path);
    expect(p).toEqual({
      publishedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as unknown as string,
      knowledgefsVersion: '9.8.7',
      commit,
      committedAt: new Date(git('log', '-1', '--format=%cI', '--', path)).toISOString(),
      source: `https://git.example/kb/blob/${commit}/kb/teams/search/runbooks/re%20index.md`,
    });
    // Not the same commit as an older file: the last one that changed each.
    expect((await provenanceOf('team_search', 'DUTY.md'))?.commit).toBe(git('log', '-1', '--format=%H', '--', 'kb/teams/search/DUTY.md'));
    expect((await provenanceOf('account', 'DUTY.md'))?.commit).not.toBe(commit);
  });

  it('gives a file that is not committed no commit and no source URL (the template needs one)', async () => {
    expect(await provenanceOf('team_search', 'draft.md')).toMatchObject({ commit: null, committedAt: null, source: null, knowledgefsVersion: '9.8.7' });
  });

  it('never names a person, and sends nothing of provenance to a client that does not ask', async () => {
    const { raw } = await planOf('?provenance=');
    expect(raw).toContain('"provenance"');
    expect(raw).not.toMatch(/Ann|Author|Cy|Committer|example\.com|author|committer/i);
    const old = await planOf('');
    expect(old.raw).not.toContain('provenance');
    expect(old.etag).toBe(`"${old.plan.version}"`);
  });

  it('follows a commit of bytes already served: the provenance and its ETag change, the scope version does not', async () => {
    const before = await planOf('?provenance=');
    git('add', 'kb/teams/search/draft.md');
    git('commit', '-q', '-m', 'draft');
    const commit = git('log', '-1', '--format=%H');
    const p = await waitFor(async () => {
      const now = await provenanceOf('team_search', 'draft.md');
      return now?.commit === commit ? now : undefined;
    });
    expect(p.source).toBe(`https://git.example/kb/blob/${commit}/kb/teams/search/draft.md`);
    const after = await planOf('?provenance=');
    expect(after.plan.version).toBe(before.plan.version);
    expect(after.etag).not.toBe(before.etag);
    expect(after.etag?.startsWith(`"${after.plan.version}+`)).toBe(true);
  });

  it('drops the commit of a file edited after it, until that edit is committed', async () => {
    await writeDataFile(data, 'teams/search/DUTY.md', '# Search, edited\n');
    await cp.rescan();
    expect(await provenanceOf('team_search', 'DUTY.md')).toMatchObject({ commit: null, source: null });
    git('commit', '-q', '-am', 'edit duty');
    const commit = git('log', '-1', '--format=%H');
    await waitFor(async () => (await provenanceOf('team_search', 'DUTY.md'))?.commit === commit);
  });
});

describe('serve --data outside git', () => {
  it('records times and the release without commits, and says why once', async () => {
    const plain = await makeDataDir({ ...spec, files: { 'account/DUTY.md': '# A\n' } });
    const other = await startControlPlane({ dataDir: plain, release: '1.2.3' });
    try {
      const { token: t } = await other.createSession({ kind: 'personal', creator: 'alice' });
      const res = await fetch(`${other.url}/v1/plan?provenance=`, { headers: { authorization: `Bearer ${t}` } });
      const plan = checkPlan(await res.json());
      const account = plan.scopes.find((s) => s.scope === 'account');
      expect(account?.provenance?.records).toEqual([{ publishedAt: expect.any(String) as unknown as string, knowledgefsVersion: '1.2.3' }]);
      await other.rescan();
      expect(other.logs.filter((l) => l.startsWith('provenance:'))).toHaveLength(1);
      expect(other.logs.find((l) => l.startsWith('provenance:'))).toContain('files carry no commit');
    } finally {
      await other.close();
      await removeDataDir(plain);
    }
  });
});

describe('--source-url', () => {
  it('is refused with what is wrong in it', () => {
    expect(() => resolveOptions({ dataDir: '/x', adminToken: 'a'.repeat(32), sourceUrl: 'https://x/{author}' })).toThrow(/--source-url "https:\/\/x\/\{author\}": unknown placeholder \{author\}/);
  });
});
