// Session state survives restarts of the real `knowledgefs serve` process:
// a clean stop (SIGTERM) and a crash (SIGKILL right after acknowledged
// writes). Sessions, tokens, mounted teams (in order), read sets and
// revocations all come back; the state file holds token hashes only.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { spawnControlPlane, type SpawnedControlPlane } from './helpers/control-plane.js';

let dir: string;
let cp: SpawnedControlPlane | undefined;

const TEAMS = ['t01', 't02', 't03', 't04', 't05', 't06', 't07', 't08', 't09', 't10'];

beforeAll(async () => {
  const files: Record<string, string> = { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' };
  for (const t of TEAMS) files[`teams/${t}/DUTY.md`] = `# ${t}\n`;
  dir = await makeDataDir({
    teams: Object.fromEntries([['payments', 'Payments'], ...TEAMS.map((t) => [t, t])]),
    users: { alice: { teams: ['payments', ...TEAMS] } },
    files,
  });
});
afterAll(async () => {
  await cp?.kill('SIGKILL');
  await removeDataDir(dir);
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

async function read(url: string, token: string, path: string) {
  const res = await fetch(`${url}/v1/read`, { method: 'POST', headers: auth(token), body: JSON.stringify({ path, mount: true }) });
  expect(res.status).toBe(200);
  return (await res.json()) as { mounted: boolean; sha256: string };
}

async function view(url: string, token: string) {
  const res = await fetch(`${url}/v1/session`, { headers: auth(token) });
  return { status: res.status, body: res.status === 200 ? ((await res.json()) as { sessionId: string; mounted: string[] }) : null };
}

describe('state across restarts', () => {
  it('survives a clean restart: sessions, mounts in order, read set, revocation', async () => {
    cp = await spawnControlPlane({ dataDir: dir });
    const a = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const b = await cp.createSession({ kind: 'personal', creator: 'alice' });
    await read(cp.url, a.token, 'team_t02/DUTY.md');
    await read(cp.url, a.token, 'team_t01/DUTY.md');
    await read(cp.url, a.token, 'account/DUTY.md');
    const del = await fetch(`${cp.url}/v1/admin/sessions/${b.sessionId}`, { method: 'DELETE', headers: auth(cp.adminToken) });
    expect(del.status).toBe(204);

    const port = cp.port;
    await cp.restart();
    expect(cp.port).toBe(port);
    expect((await view(cp.url, a.token)).body).toMatchObject({ sessionId: a.sessionId, mounted: ['t02', 't01'] });
    expect((await view(cp.url, b.token)).status).toBe(401);
    // The read set came back: an edit is reported by the reminder.
    const { writeDataFile } = await import('./helpers/data-dir.js');
    await writeDataFile(dir, 'teams/t01/DUTY.md', '# t01 edited\n');
    const deadline = Date.now() + 10_000;
    let changed: string[] = [];
    while (Date.now() < deadline && changed.length === 0) {
      await new Promise((r) => setTimeout(r, 100));
      const r = await fetch(`${cp.url}/v1/reminder?today=2025-03-01`, { headers: auth(a.token) });
      changed = ((await r.json()) as { changed: string[] }).changed;
    }
    expect(changed).toEqual(['team_t01/DUTY.md']);

    const state = await readFile(join(dir, '.knowledgefs', 'state.json'), 'utf8');
    expect(state).not.toContain(a.token);
    expect(state).not.toContain(b.token);
    expect(state).toContain(a.sessionId);
    expect((await cp.kill('SIGTERM')).code).toBe(0);
  });

  it('loses no acknowledged mount or read when killed with SIGKILL right after', async () => {
    cp = await spawnControlPlane({ dataDir: dir, args: ['--state', join(dir, 'crash-state.json')] });
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    // Concurrent mounts: every acknowledged one must be durable.
    const results = await Promise.all(TEAMS.map((t) => read(cp!.url, s.token, `team_${t}/DUTY.md`)));
    expect(results.every((r) => r.mounted)).toBe(true);
    const before = (await view(cp.url, s.token)).body?.mounted;
    expect([...(before ?? [])].sort()).toEqual(TEAMS);
    expect((await cp.kill('SIGKILL')).signal).toBe('SIGKILL');
    await cp.restart();
    expect((await view(cp.url, s.token)).body?.mounted).toEqual(before);
    await cp.kill('SIGKILL');
  });
});
