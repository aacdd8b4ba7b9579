// Over real HTTP: the pack store and plans. Edits, additions and deletions
// under the data dir show up in the next plan (by the periodic rescan, not
// only on demand); ETag/If-None-Match/long-poll; files that can't be served
// are skipped with one log line each; bytes and their sha256 header always
// belong together, even when a file changed since the last scan.

import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plan } from '../src/core/session/plan.js';
import { SHA256_HEADER } from '../src/core/wire.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';

const sha = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');

let dir: string;
let cp: TestControlPlane;

beforeAll(async () => {
  dir = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search' },
    users: { alice: { teams: ['payments', 'search'] } },
    files: {
      'account/DUTY.md': '# Account\n',
      'teams/payments/DUTY.md': '# Payments\n',
      'teams/payments/runbooks/db.md': 'v1\n',
      'teams/search/DUTY.md': '# Search\n',
    },
  });
  cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 50 });
});
afterAll(async () => {
  await cp?.close();
  await removeDataDir(dir);
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function plan(token: string, query = 'threshold=1000000', etag?: string): Promise<{ status: number; etag: string | null; plan?: Plan }> {
  const res = await fetch(`${cp.url}/v1/plan?${query}`, { headers: { ...auth(token), ...(etag ? { 'if-none-match': etag } : {}) } });
  return { status: res.status, etag: res.headers.get('etag'), ...(res.status === 200 ? { plan: (await res.json()) as Plan } : {}) };
}

function files(p: Plan): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of p.scopes) for (const f of s.files) out[`${s.scope}/${f.path}`] = f.sha256;
  return out;
}

/** Polls the plan until `check` holds (the periodic rescan, no manual rescan): proves "picked up while serving". */
async function eventually(token: string, check: (p: Plan) => boolean): Promise<Plan> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { plan: p } = await plan(token);
    if (p && check(p)) return p;
    if (Date.now() > deadline) throw new Error(`plan never matched; last: ${JSON.stringify(p && files(p))}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('plans follow the data dir', () => {
  it('edits, additions and deletions show up in the next plan', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const first = (await plan(s.token)).plan as Plan;
    expect(files(first)['team_payments/runbooks/db.md']).toBe(sha('v1\n'));
    expect(first.scopes.map((x) => x.scope)).toEqual(['account', 'team_payments', 'team_search']);

    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'v2 with more bytes\n');
    const edited = await eventually(s.token, (p) => files(p)['team_payments/runbooks/db.md'] === sha('v2 with more bytes\n'));
    expect(edited.version).not.toBe(first.version);
    const db = edited.scopes[1]?.files.find((f) => f.path === 'runbooks/db.md');
    expect(db?.size).toBe(19);

    await writeDataFile(dir, 'teams/search/new/idea.md', 'new\n');
    await eventually(s.token, (p) => files(p)['team_search/new/idea.md'] === sha('new\n'));

    await removeDataFile(dir, 'teams/payments/runbooks/db.md');
    await eventually(s.token, (p) => !('team_payments/runbooks/db.md' in files(p)));

    // A whole new team pack appears for a member once it exists on disk.
    await writeDataFile(dir, 'teams/search/DUTY.md', '# Search v2\n');
    await eventually(s.token, (p) => files(p)['team_search/DUTY.md'] === sha('# Search v2\n'));
  });

  it('ETag and If-None-Match: 304 when unchanged; wait= long-polls and answers as soon as the plan changes', async () => {
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const first = await plan(s.token);
    expect(first.status).toBe(200);
    expect(first.etag).toBe(`"${first.plan?.version}"`);
    const again = await plan(s.token, 'threshold=1000000', first.etag as string);
    expect(again.status).toBe(304);
    expect(again.etag).toBe(first.etag);

    // Nothing changes: a 1 s long-poll ends in 304 (upper bound only: proves it does not hang).
    const t0 = Date.now();
    expect((await plan(s.token, 'threshold=1000000&wait=1', first.etag as string)).status).toBe(304);
    expect(Date.now() - t0).toBeLessThan(10_000);

    // A change during a 30 s long-poll answers 200 with the new plan, well before 30 s.
    const waiting = plan(s.token, 'threshold=1000000&wait=30', first.etag as string);
    await new Promise((r) => setTimeout(r, 200));
    await writeDataFile(dir, 'teams/payments/late.md', 'late\n');
    const t1 = Date.now();
    const changed = await waiting;
    expect(changed.status).toBe(200);
    expect(files(changed.plan as Plan)['team_payments/late.md']).toBe(sha('late\n'));
    expect(Date.now() - t1).toBeLessThan(20_000);
  });

  it('known= sends the scopes held at the same version as stubs; version, ETag and 304 are the full plan\'s', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const full = (await plan(s.token)).plan as Plan;
    const [account, payments] = full.scopes;
    const prefix = (v: string | undefined) => (v ?? '').slice(0, 16);
    // account held at its version (a prefix names it), payments at a version it no longer has.
    const known = `account:${prefix(account?.version)},team_payments:${'0'.repeat(16)}`;
    const res = await fetch(`${cp.url}/v1/plan?threshold=1000000&known=${encodeURIComponent(known)}`, { headers: auth(s.token) });
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe(`"${full.version}"`);
    const changes = (await res.json()) as { version: string; scopes: Record<string, unknown>[] };
    expect(changes.version).toBe(full.version);
    expect(changes.scopes[0]).toEqual({ scope: 'account', version: account?.version, totalBytes: account?.totalBytes, unchanged: true });
    expect(changes.scopes[1]).toEqual(payments);
    expect(changes.scopes.map((x) => x.scope)).toEqual(full.scopes.map((x) => x.scope));
    // A matching If-None-Match is still a 304, whatever is known.
    const etag = res.headers.get('etag') as string;
    expect((await plan(s.token, `threshold=1000000&known=${encodeURIComponent(known)}`, etag)).status).toBe(304);
    for (const bad of ['account', 'account:abc', 'nosuch:0123456789abcdef', `account:${'0'.repeat(16)},`]) {
      const r = await fetch(`${cp.url}/v1/plan?known=${encodeURIComponent(bad)}`, { headers: auth(s.token) });
      expect(r.status, bad).toBe(400);
    }
  });

  it('closing the server ends pending long-polls promptly', async () => {
    const other = await startControlPlane({ dataDir: dir, scanIntervalMs: 60_000 });
    const s = await other.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const first = await fetch(`${other.url}/v1/plan`, { headers: auth(s.token) });
    const etag = first.headers.get('etag') as string;
    const polls = Array.from({ length: 4 }, () => // the most one session may hold (--max-long-polls)
      fetch(`${other.url}/v1/plan?wait=30`, { headers: { ...auth(s.token), 'if-none-match': etag } }).then(
        (r) => r.status,
        () => 'closed',
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    await other.close();
    const results = await Promise.all(polls);
    expect(Date.now() - t0).toBeLessThan(10_000);
    for (const r of results) expect([304, 'closed']).toContain(r);
  });

  it('threshold picks the materialised set: over it, personal sessions see account + bound + mounted', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await plan(s.token, 'threshold=0')).plan?.scopes.map((x) => x.scope)).toEqual(['account', 'team_payments']);
    const read = await fetch(`${cp.url}/v1/read`, {
      method: 'POST',
      headers: auth(s.token),
      body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }),
    });
    expect(read.status).toBe(200);
    const p = (await plan(s.token, 'threshold=0')).plan as Plan;
    expect(p.scopes.map((x) => x.scope)).toEqual(['account', 'team_payments', 'team_search']);
    expect(p.mounted).toEqual(['search']);
    expect((await plan(s.token, 'threshold=abc')).status).toBe(400);
  });

  it('a membership change reaches the plan (removed member loses the team)', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await plan(s.token)).plan?.scopes.map((x) => x.scope)).toContain('team_search');
    const { writeDirectory } = await import('./helpers/data-dir.js');
    await writeDirectory(dir, { teams: { payments: 'Payments', search: 'Search' }, users: { alice: { teams: ['payments'] } } });
    await eventually(s.token, (p) => !p.scopes.some((x) => x.scope === 'team_search'));
    await writeDirectory(dir, { teams: { payments: 'Payments', search: 'Search' }, users: { alice: { teams: ['payments', 'search'] } } });
    await eventually(s.token, (p) => p.scopes.some((x) => x.scope === 'team_search'));
  });
});

describe('what cannot be served', () => {
  it('symlinks, FIFOs, bad names and bad team dirs are skipped with one log line each, across rescans', async () => {
    await symlink('/etc/passwd', join(dir, 'teams/payments/passwd.md'));
    await symlink(join(dir, 'teams/search'), join(dir, 'teams/payments/linked-dir'));
    await symlink(join(dir, 'teams/search'), join(dir, 'teams/linked'));
    await promisify(execFile)('mkfifo', [join(dir, 'teams/payments/pipe.md')]);
    await writeDataFile(dir, 'teams/payments/bad\u0001name.md', 'x');
    await writeDataFile(dir, 'teams/payments/back\\slash.md', 'x');
    await mkdir(join(dir, 'teams/Not_A_Team'), { recursive: true });
    await writeFile(Buffer.concat([Buffer.from(join(dir, 'teams/payments/latin1-')), Buffer.from([0xe9, 0xff]), Buffer.from('.md')]), 'x');
    await cp.rescan();
    await cp.rescan();
    await new Promise((r) => setTimeout(r, 300)); // a few periodic rescans too
    const skipped = cp.logs.filter((l) => l.startsWith('skipping '));
    const count = (needle: string) => skipped.filter((l) => l.includes(needle)).length;
    expect(count('passwd.md: symlink')).toBe(1);
    expect(count('linked-dir: symlink')).toBe(1);
    expect(count('teams/linked: symlink')).toBe(1);
    expect(count('bad\\u0001name.md: control character in name')).toBe(1);
    expect(count('back\\\\slash.md: backslash in name')).toBe(1);
    expect(count('Not_A_Team: not a valid team id')).toBe(1);
    expect(count('pipe.md: not a regular file')).toBe(1);
    expect(count('latin1-')).toBe(1);
    expect(skipped.find((l) => l.includes('latin1-'))).toMatch(/name is not valid UTF-8/);
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const p = (await plan(s.token)).plan as Plan;
    const paths = Object.keys(files(p));
    expect(paths.filter((x) => /passwd|linked|pipe|bad|slash|latin1/.test(x))).toEqual([]);
    expect((await fetch(`${cp.url}/v1/files/team_payments/passwd.md`, { headers: auth(s.token) })).status).toBe(404);
    expect((await fetch(`${cp.url}/healthz`)).status).toBe(200);
  });

  it('files above --max-file-size are skipped with a log line', async () => {
    const small = await startControlPlane({ dataDir: dir, maxFileSize: 8, scanIntervalMs: 60_000 });
    try {
      const s = await small.createSession({ kind: 'personal', creator: 'alice' });
      const res = await fetch(`${small.url}/v1/plan`, { headers: auth(s.token) });
      const paths = Object.keys(files((await res.json()) as Plan));
      expect(paths).toContain('team_search/new/idea.md'); // 4 bytes
      expect(paths).not.toContain('team_payments/DUTY.md'); // 11 bytes
      expect(small.logs.some((l) => /DUTY\.md: larger than --max-file-size/.test(l))).toBe(true);
    } finally {
      await small.close();
    }
  });
});

describe('bytes and hashes', () => {
  it('a file changed since the scan is served with the hash of the bytes sent, and the plan moves on', async () => {
    const slow = await startControlPlane({ dataDir: dir, scanIntervalMs: 3_600_000, watch: false });
    try {
      const s = await slow.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const before = (await (await fetch(`${slow.url}/v1/plan`, { headers: auth(s.token) })).json()) as Plan;
      await writeDataFile(dir, 'teams/payments/DUTY.md', '# Payments, edited after the scan\n');
      const res = await fetch(`${slow.url}/v1/files/team_payments/DUTY.md`, { headers: auth(s.token) });
      const body = Buffer.from(await res.arrayBuffer());
      expect(body.toString()).toBe('# Payments, edited after the scan\n');
      expect(res.headers.get(SHA256_HEADER)).toBe(sha(body));
      expect(res.headers.get('content-type')).toBe('application/octet-stream');
      const after = (await (await fetch(`${slow.url}/v1/plan`, { headers: auth(s.token) })).json()) as Plan;
      expect(after.version).not.toBe(before.version);
      expect(files(after)['team_payments/DUTY.md']).toBe(sha(body));
    } finally {
      await slow.close();
    }
  });

  it('every served file matches its sha256 header and the plan', async () => {
    await cp.rescan();
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const p = (await plan(s.token)).plan as Plan;
    for (const [path, hash] of Object.entries(files(p))) {
      const res = await fetch(`${cp.url}/v1/files/${path.split('/').map(encodeURIComponent).join('/')}`, { headers: auth(s.token) });
      const body = Buffer.from(await res.arrayBuffer());
      expect(res.status, path).toBe(200);
      expect(sha(body)).toBe(res.headers.get(SHA256_HEADER));
      expect(sha(body)).toBe(hash);
    }
  });
});
