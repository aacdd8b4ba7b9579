// The audit log grows with every decision (agents can drive denials), so it
// must be rotatable: rename it, send the control plane SIGHUP, and it writes
// to a new file at the same path (0600) without losing a line. Against the
// real `serve` process.

import { readFileSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnControlPlane, type SpawnedControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { waitFor } from './helpers/mount.js';

let dir: string;
let cp: SpawnedControlPlane;
let audit: string;

beforeAll(async () => {
  dir = await makeDataDir({
    teams: { payments: 'Payments', storage: 'Storage' },
    users: { alice: { teams: ['payments'] } },
    files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n', 'teams/storage/DUTY.md': '# Storage\n' },
  });
  audit = join(dir, 'logs', 'audit.log');
  cp = await spawnControlPlane({ dataDir: dir, args: ['--audit-log', audit] });
});
afterAll(async () => {
  await cp?.kill('SIGTERM');
  await removeDataDir(dir);
});

const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { scope: string; result: string });

it('SIGHUP reopens the audit log: lines before the rename stay in the renamed file, later ones go to a new 0600 file', async () => {
  const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
  const get = (path: string) => fetch(`${cp.url}${path}`, { headers: { authorization: `Bearer ${s.token}` } });
  expect((await get('/v1/files/team_storage/DUTY.md')).status).toBe(403);
  expect(await waitFor(() => lines(audit).some((l) => l.scope === 'team_storage'))).toBe(true);

  renameSync(audit, `${audit}.1`);
  process.kill(cp.pid as number, 'SIGHUP');
  expect(await waitFor(() => cp.stderr.includes(`SIGHUP: reopening the audit log ${audit}`))).toBe(true);
  expect((await get('/v1/files/team_payments/DUTY.md')).status).toBe(200);
  expect(await waitFor(() => { try { return lines(audit).some((l) => l.scope === 'team_payments'); } catch { return false; } })).toBe(true);

  expect(lines(`${audit}.1`).map((l) => `${l.scope} ${l.result}`)).toEqual(['team_storage deny']);
  expect(lines(audit).map((l) => `${l.scope} ${l.result}`)).toEqual(['team_payments allow']);
  expect(statSync(audit).mode & 0o777).toBe(0o600);
  expect((await fetch(`${cp.url}/healthz`)).status).toBe(200);
});
