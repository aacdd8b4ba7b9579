// openSessionState picks the session state from the options: the state file
// (or the store a test hands in) without a state URL, PostgreSQL with one.
// PostgreSQL itself is tested against a real cluster (npm run test:postgres);
// here a URL nothing listens on shows that it is the one asked.

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { resolveOptions, type ControlPlaneOptions } from '../src/server/options.js';
import { openSessionState } from '../src/server/state/open-session-state.js';
import type { PersistedState, StateChange } from '../src/server/state/file/session-registry.js';
import type { StateStore } from '../src/server/state/file/state-file.js';
import { freePort } from './helpers/postgres.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kfs-open-state-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const options = (extra: Partial<ControlPlaneOptions> = {}) =>
  resolveOptions({ dataDir: dir, adminToken: 'a'.repeat(32), stateFile: join(dir, 'state.json'), log: () => undefined, ...extra });

describe('openSessionState', () => {
  it('keeps sessions in the state file without a state URL, and names it', async () => {
    const state = await openSessionState(options());
    try {
      await state.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
      expect(await state.describe()).toBe(`1 sessions in ${join(dir, 'state.json')}`);
      expect(await readFile(join(dir, 'state.json'), 'utf8')).toContain('alice');
    } finally {
      await state.close();
    }
  });

  it('uses the state store it is handed instead of the file', async () => {
    const calls: string[] = [];
    const store: StateStore<PersistedState, StateChange> = {
      load: async () => (calls.push('load'), null),
      commit: async () => void calls.push('commit'),
      close: async () => void calls.push('close'),
    };
    const state = await openSessionState(options({ stateFile: join(dir, 'never.json') }), store);
    await state.create({ kind: 'personal', creator: 'bob' }, new Date().toISOString());
    await state.close();
    expect(calls).toEqual(['load', 'commit', 'close']);
    await expect(readFile(join(dir, 'never.json'))).rejects.toThrow(/ENOENT/);
  });

  it('asks PostgreSQL with a state URL, and fails closed when it cannot connect', async () => {
    const port = await freePort();
    const opened = openSessionState(options({ stateFile: join(dir, 'unused.json'), stateUrl: `postgres://kfs@127.0.0.1:${port}/knowledgefs` }));
    await expect(opened).rejects.toThrow(KnowledgeError);
    await expect(opened).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining(`cannot connect to PostgreSQL at postgres://kfs@127.0.0.1:${port}/knowledgefs`) });
    await expect(readFile(join(dir, 'unused.json'))).rejects.toThrow(/ENOENT/);
  });
});
