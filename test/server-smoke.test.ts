// Smoke test of the test helpers themselves: an in-process and a spawned
// control plane answer plans and files for a new session.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { spawnControlPlane, startControlPlane, type SpawnedControlPlane, type TestControlPlane } from './helpers/control-plane.js';

let dir: string;
beforeAll(async () => {
  dir = await makeDataDir({
    teams: { payments: 'Payments' },
    users: { alice: { teams: ['payments'] } },
    files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n' },
  });
});
afterAll(async () => {
  await removeDataDir(dir);
});

async function checkServes(url: string, token: string): Promise<void> {
  const plan = await fetch(`${url}/v1/plan`, { headers: { authorization: `Bearer ${token}` } });
  expect(plan.status).toBe(200);
  const body = (await plan.json()) as { scopes: { scope: string }[] };
  expect(body.scopes.map((s) => s.scope)).toEqual(['account', 'team_payments']);
  const file = await fetch(`${url}/v1/files/team_payments/DUTY.md`, { headers: { authorization: `Bearer ${token}` } });
  expect(await file.text()).toBe('# Payments\n');
}

describe('test helpers', () => {
  it('startControlPlane serves a new session', async () => {
    const cp: TestControlPlane = await startControlPlane({ dataDir: dir });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      await checkServes(cp.url, s.token);
    } finally {
      await cp.close();
    }
  });

  it('spawnControlPlane serves, restarts on the same port with the same sessions', async () => {
    const cp: SpawnedControlPlane = await spawnControlPlane({ dataDir: dir, args: ['--state', `${dir}/smoke-state.json`] });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      await checkServes(cp.url, s.token);
      const url = cp.url;
      await cp.restart();
      expect(cp.url).toBe(url);
      await checkServes(cp.url, s.token);
    } finally {
      expect((await cp.kill()).code).toBe(0);
    }
  });
});
