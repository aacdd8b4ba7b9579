// Faults injected by wrapping the real parts of the control plane: a state
// store whose saves fail (the change is not acknowledged: 503, and the client
// may retry), a crash that leaves a half-written temp file next to the state
// (ignored at start), and a store read racing with a rescan.

import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileStateStore, type StateStore } from '../src/server/state/file/state-file.js';
import { SessionRegistry, type PersistedState, type StateChange } from '../src/server/state/file/session-registry.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startControlPlane } from './helpers/control-plane.js';

let dir: string;
beforeAll(async () => {
  dir = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search' },
    users: { alice: { teams: ['payments', 'search'] } },
    files: { 'account/DUTY.md': '# A\n', 'teams/payments/DUTY.md': '# P\n', 'teams/search/DUTY.md': '# S\n' },
  });
});
afterAll(async () => {
  await removeDataDir(dir);
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe('state store faults', () => {
  it('a failing save is answered 503 and not acknowledged; the next save persists it', async () => {
    const stateFile = join(dir, 'faulty-state.json');
    const real = fileStateStore<PersistedState, StateChange>(stateFile);
    let failing = false;
    const flaky: StateStore<PersistedState, StateChange> = {
      load: () => real.load(),
      commit: async (changes, state) => {
        if (failing) throw new Error('ENOSPC: no space left on device');
        await real.commit(changes, state);
      },
      close: () => real.close(),
    };
    const cp = await startControlPlane({ dataDir: dir, stateFile, deps: { stateStore: flaky } });
    try {
      const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
      failing = true;
      const res = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ error: { code: 'unavailable', message: expect.stringContaining('could not save session state') } });
      const create = await fetch(`${cp.url}/v1/admin/sessions`, { method: 'POST', headers: auth(cp.adminToken), body: JSON.stringify({ kind: 'personal', creator: 'alice' }) });
      expect(create.status).toBe(503);
      failing = false;
      const retry = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
      expect(retry.status).toBe(200);
      // The failed attempt was rolled back: the retry is the read that mounts.
      expect(await retry.json()).toMatchObject({ mounted: true });
      const saved = await SessionRegistry.open(fileStateStore<PersistedState, StateChange>(stateFile));
      expect(saved.cached(s.sessionId)?.mounted).toEqual(['search']);
    } finally {
      await cp.close();
    }
  });

  it('a temp file left by a crash mid-write is ignored: the last complete state loads', async () => {
    const stateFile = join(dir, 'crash-state.json');
    const first = await startControlPlane({ dataDir: dir, stateFile });
    const s = await first.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    await first.close();
    await writeFile(join(dir, '.crash-state.json.999.0.tmp'), '{"version":1,"sessions":[{"id":"trunc');
    const second = await startControlPlane({ dataDir: dir, stateFile, adminToken: first.adminToken });
    try {
      const res = await fetch(`${second.url}/v1/session`, { headers: auth(s.token) });
      expect(res.status).toBe(200);
      expect(await second.cp.sessions.describe()).toMatch(/^1 sessions in /);
    } finally {
      await second.close();
    }
    expect((await readdir(dir)).filter((f) => f.startsWith('crash-state.json'))).toEqual(['crash-state.json']);
  });

  it('a state file that is not JSON stops the start with a config error naming it', async () => {
    const stateFile = join(dir, 'bad-state.json');
    await writeFile(stateFile, 'not json');
    await expect(startControlPlane({ dataDir: dir, stateFile })).rejects.toThrow(/bad-state\.json: the state file is not valid JSON/);
  });
});
