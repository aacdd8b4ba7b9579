// Over real HTTP: the read tool's route, manifest and reminder.
// POST /v1/read decides first, then looks up; an allowed read of a team not
// yet mounted mounts it (persisted before the answer); only successful reads
// enter the read set. The manifest carries account + bound team + mounted
// teams' DUTY.md and ignores other files; the reminder reports each change of
// a read file once and never new files or denied reads.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ReadResponse, ReminderResponse, ManifestResponse, SessionView } from '../src/core/wire.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
  users: { alice: { teams: ['payments', 'search'] } },
  files: {
    'account/DUTY.md': '# Account duty\n',
    'teams/payments/DUTY.md': '# Payments duty\n',
    'teams/payments/runbooks/db.md': 'db v1\n',
    'teams/search/DUTY.md': '# Search duty\n',
    'teams/search/arch.md': 'search arch\n',
    'teams/storage/DUTY.md': '# Storage duty\n',
  },
};

let dir: string;
let cp: TestControlPlane;
beforeAll(async () => {
  dir = await makeDataDir(spec);
  cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 60_000 });
});
afterAll(async () => {
  await cp?.close();
  await removeDataDir(dir);
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
async function read(token: string, path: string, mount = true) {
  const res = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(token), body: JSON.stringify({ path, mount }) });
  return { status: res.status, body: (await res.json()) as ReadResponse & { error?: { code: string; message: string } } };
}
/** The registry's own read set of a session (paths, in read order). */
const readSetOf = (sessionId: string) => (cp.cp.sessions.cached(sessionId)?.readSet ?? []).map((e) => e.path);
const getJson = async <T>(token: string, path: string): Promise<T> => (await (await fetch(`${cp.url}${path}`, { headers: auth(token) })).json()) as T;

describe('POST /v1/read', () => {
  it('reads a file of another team the creator belongs to and mounts the team once', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const first = await read(s.token, 'team_search/DUTY.md');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ path: 'team_search/DUTY.md', sha256: sha('# Search duty\n'), size: 14, mounted: true });
    expect(Buffer.from(first.body.contentBase64 ?? '', 'base64').toString()).toBe('# Search duty\n');
    const second = await read(s.token, 'team_search/arch.md');
    expect(second.body.mounted).toBe(false);
    expect((await getJson<SessionView>(s.token, '/v1/session')).mounted).toEqual(['search']);
  });

  it('reading the account, the bound team or with mount=false never mounts', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await read(s.token, 'account/DUTY.md')).body.mounted).toBe(false);
    expect((await read(s.token, 'team_payments/runbooks/db.md')).body.mounted).toBe(false);
    expect((await read(s.token, 'team_search/DUTY.md', false)).body.mounted).toBe(false);
    expect((await getJson<SessionView>(s.token, '/v1/session')).mounted).toEqual([]);
  });

  it('a missing file in an allowed team is 404 and mounts nothing', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const res = await read(s.token, 'team_search/nope.md');
    expect(res.status).toBe(404);
    expect((await getJson<SessionView>(s.token, '/v1/session')).mounted).toEqual([]);
  });

  it('denials: personal → 404 like a missing file; team session → 403 guidance; nothing recorded', async () => {
    const p = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await read(p.token, 'account/DUTY.md')).status).toBe(200);
    const denied = await read(p.token, 'team_storage/DUTY.md');
    const missing = await read(p.token, 'team_storage/DUTY.md'.replace('storage', 'nothere'));
    expect(denied.status).toBe(404);
    expect(denied.body.error?.code).toBe('not_found');
    expect(missing.body.error?.message.replace('nothere', 'storage')).toBe(denied.body.error?.message);
    const t = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const guided = await read(t.token, 'team_search/DUTY.md');
    expect(guided.status).toBe(403);
    expect(guided.body.error?.code).toBe('denied');
    expect(guided.body.error?.message).toMatch(/belongs to team "payments" and cannot load team "search"/);
    expect((await getJson<SessionView>(p.token, '/v1/session')).mounted).toEqual([]);
    expect((await getJson<SessionView>(t.token, '/v1/session')).mounted).toEqual([]);
    // Denied reads never reach the read set (only the allowed read does)…
    expect(readSetOf(p.sessionId)).toEqual(['account/DUTY.md']);
    expect(readSetOf(t.sessionId)).toEqual([]);
    // …so the reminder has nothing to say about them, changed or deleted.
    await writeDataFile(dir, 'teams/storage/DUTY.md', '# Storage duty v2\n');
    await writeDataFile(dir, 'teams/search/DUTY.md', '# Search duty v2\n');
    await cp.rescan();
    try {
      for (const token of [p.token, t.token]) {
        expect(await getJson<ReminderResponse>(token, '/v1/reminder?today=2025-01-02')).toMatchObject({ changed: [], deleted: [] });
      }
      await removeDataFile(dir, 'teams/storage/DUTY.md');
      await cp.rescan();
      expect(await getJson<ReminderResponse>(p.token, '/v1/reminder?today=2025-01-03')).toMatchObject({ changed: [], deleted: [] });
    } finally {
      await writeDataFile(dir, 'teams/storage/DUTY.md', '# Storage duty\n');
      await writeDataFile(dir, 'teams/search/DUTY.md', '# Search duty\n');
      await cp.rescan();
    }
  });

  it('a mounted team whose membership is revoked leaves the plan and can no longer be read', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await read(s.token, 'team_search/DUTY.md')).status).toBe(200);
    await writeDirectory(dir, { ...spec, users: { alice: { teams: ['payments'] } } });
    await cp.rescan();
    try {
      expect((await read(s.token, 'team_search/DUTY.md')).status).toBe(404);
      const plan = await getJson<{ scopes: { scope: string }[]; mounted: string[] }>(s.token, '/v1/plan?threshold=0');
      expect(plan.scopes.map((x) => x.scope)).toEqual(['account', 'team_payments']);
      expect(plan.mounted).toEqual([]);
      // The mount itself is remembered: it comes back if the membership does.
      expect((await getJson<SessionView>(s.token, '/v1/session')).mounted).toEqual(['search']);
    } finally {
      await writeDirectory(dir, spec);
      await cp.rescan();
    }
  });
});

describe('GET /v1/manifest', () => {
  it('carries account and bound team, then mounted teams in mount order; other files do not change it', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const m1 = await getJson<ManifestResponse>(s.token, '/v1/manifest');
    expect(m1.text).toContain('# Account duty');
    expect(m1.text).toContain('# Payments duty');
    expect(m1.text).not.toContain('# Search duty');
    expect(m1.sha256).toBe(sha(m1.text));

    await writeDataFile(dir, 'teams/payments/runbooks/new.md', 'new runbook\n');
    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'db v2\n');
    await cp.rescan();
    expect(await getJson<ManifestResponse>(s.token, '/v1/manifest')).toEqual(m1);

    expect((await read(s.token, 'team_search/arch.md')).body.mounted).toBe(true);
    const m2 = await getJson<ManifestResponse>(s.token, '/v1/manifest');
    expect(m2.text.startsWith(m1.text.slice(0, m1.text.indexOf('## Mounted teams')))).toBe(true);
    expect(m2.text.indexOf('# Search duty')).toBeGreaterThan(m2.text.indexOf('## Mounted teams'));

    await writeDataFile(dir, 'teams/payments/DUTY.md', '# Payments duty, edited\n');
    await cp.rescan();
    expect((await getJson<ManifestResponse>(s.token, '/v1/manifest')).text).toContain('# Payments duty, edited');
    await writeDataFile(dir, 'teams/payments/DUTY.md', '# Payments duty\n');
    await cp.rescan();
  });

  it('a team session never sees other teams in its manifest', async () => {
    const t = await cp.createSession({ kind: 'team', creator: 'alice', team: 'storage' });
    const m = await getJson<ManifestResponse>(t.token, '/v1/manifest');
    expect(m.text).toContain('# Storage duty');
    expect(m.text).not.toMatch(/Payments duty|Search duty/);
  });
});

describe('GET /v1/reminder', () => {
  it('reports a changed and a deleted read file once each, never new files', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await writeDataFile(dir, 'teams/payments/runbooks/gone.md', 'soon gone\n');
    await cp.rescan();
    expect((await read(s.token, 'team_payments/runbooks/db.md')).status).toBe(200);
    expect((await read(s.token, 'team_payments/runbooks/gone.md')).status).toBe(200);
    const quiet = await getJson<ReminderResponse>(s.token, '/v1/reminder?today=2025-02-03');
    expect(quiet).toMatchObject({ date: '2025-02-03', changed: [], deleted: [] });
    expect(quiet.text).toContain('2025-02-03');

    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'db v3\n');
    await removeDataFile(dir, 'teams/payments/runbooks/gone.md');
    await writeDataFile(dir, 'teams/payments/runbooks/brand-new.md', 'new\n');
    await cp.rescan();
    const r1 = await getJson<ReminderResponse>(s.token, '/v1/reminder?today=2025-02-03');
    expect(r1.changed).toEqual(['team_payments/runbooks/db.md']);
    expect(r1.deleted).toEqual(['team_payments/runbooks/gone.md']);
    expect(r1.text).toContain('knowledge/team_payments/runbooks/db.md');
    expect(r1.text).not.toContain('brand-new');
    const r2 = await getJson<ReminderResponse>(s.token, '/v1/reminder?today=2025-02-03');
    expect(r2).toMatchObject({ changed: [], deleted: [] });
  });

  it('defaults to today (UTC) and rejects a bad date', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    expect((await getJson<ReminderResponse>(s.token, '/v1/reminder')).date).toBe(new Date().toISOString().slice(0, 10));
    const bad = await fetch(`${cp.url}/v1/reminder?today=2025-02-30`, { headers: auth(s.token) });
    expect(bad.status).toBe(400);
  });
});

describe('POST /v1/read pages', () => {
  // 100 characters (code points) in 104 bytes: character offsets are not byte offsets.
  const UNIT = `${'x'.repeat(97)}é😀\n`;
  const UNITS = 404_000; // 42 MB: over 40 MiB
  const bigText = UNIT.repeat(UNITS);
  const smallText = `${UNIT.repeat(2_500)}the end ✓`;
  let pdir: string;
  let pcp: TestControlPlane;
  beforeAll(async () => {
    pdir = await makeDataDir({ ...spec, files: { ...spec.files, 'account/big.md': bigText, 'account/small.md': smallText } });
    pcp = await startControlPlane({ dataDir: pdir, scanIntervalMs: 60_000 });
  });
  afterAll(async () => {
    await pcp?.close();
    await removeDataDir(pdir);
  });
  const page = async (token: string, path: string, offset: number, limit: number) => {
    const res = await fetch(`${pcp.url}/v1/read`, { method: 'POST', headers: auth(token), body: JSON.stringify({ path, mount: false, offset, limit }) });
    const raw = Buffer.from(await res.arrayBuffer());
    return { status: res.status, wireBytes: raw.length, body: JSON.parse(raw.toString('utf8')) as ReadResponse & { error?: { code: string; message: string } } };
  };

  it('a page of a 40 MiB file moves about a page of bytes, with the whole file\'s sha256, size and length', async () => {
    const s = await pcp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const size = Buffer.byteLength(bigText);
    const totalChars = UNITS * 100;
    for (const [offset, content] of [
      [0, UNIT.repeat(1_000)],
      [1_234_500, UNIT.repeat(1_000)],
      [totalChars - 50, `${'x'.repeat(47)}é😀\n`],
    ] as const) {
      const got = await page(s.token, 'account/big.md', offset, 100_000);
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ path: 'account/big.md', sha256: sha(bigText), size, page: { offset, totalChars, content } });
      expect(got.body.contentBase64).toBeUndefined();
      // The page's bytes as JSON and a few fields: about 105 000 bytes, never the file's 42 MB.
      expect(got.wireBytes).toBeLessThan(Buffer.byteLength(JSON.stringify(content)) + 500);
      if (offset === 0) console.log(`POST /v1/read, one page of 100 000 characters of a ${size}-byte file: ${got.wireBytes} bytes on the wire`);
    }
    // The read set records the whole file, as for a whole-file read.
    expect(pcp.cp.sessions.cached(s.sessionId)?.readSet.find((e) => e.path === 'account/big.md')?.sha256).toBe(sha(bigText));
    // A limit over the output cap is the cap.
    expect([...((await page(s.token, 'account/big.md', 0, 10_000_000)).body.page?.content ?? '')].length).toBe(100_000);
  });

  it('pages concatenate to the file exactly; bad offsets and limits are 400 naming the field', async () => {
    const s = await pcp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    let text = '';
    for (let offset = 0, total = Infinity; offset < total; offset += 100_000) {
      const got = (await page(s.token, 'account/small.md', offset, 100_000)).body.page;
      if (got === undefined) throw new Error('no page');
      total = got.totalChars;
      text += got.content;
    }
    expect(text).toBe(smallText);
    for (const [body, field] of [
      [{ path: 'account/small.md', offset: -1, limit: 10 }, 'offset'],
      [{ path: 'account/small.md', offset: 0, limit: 0 }, 'limit'],
      [{ path: 'account/small.md', offset: 1.5, limit: 10 }, 'offset'],
      [{ path: 'account/small.md', offset: 5 }, 'limit'],
    ] as const) {
      const res = await fetch(`${pcp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify(body) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`"${field}"`);
    }
  });
});
