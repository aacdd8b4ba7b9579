// End to end: `knowledgefs can-load` and `KnowledgeClient.canLoad` through a
// real mount daemon's control socket to a real control plane. A harness asks
// with no token; exit codes and output have the read tool's shapes; a
// personal session's refusal prints exactly what a scope that does not exist
// prints; the membership source down fails closed (exit 4); nothing asked
// this way appears in the mount.

import { afterAll, beforeAll, expect, it } from 'vitest';
import { KnowledgeClient } from '../src/client/knowledge-client.js';
import { InvalidArgumentError } from '../src/client/errors.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';
import { BIN, fuseSuite, run, startMount, type MountHandle, type RunResult } from './helpers/mount.js';

let data = '';
let members: FaultMembership;
let cp: TestControlPlane;
const mounts: MountHandle[] = [];

beforeAll(async () => {
  data = await makeDataDir({
    teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
    files: {
      'account/DUTY.md': '# Account\n',
      'teams/payments/DUTY.md': '# Payments\n',
      'teams/search/DUTY.md': '# Search\n',
      'teams/storage/DUTY.md': '# Storage\n',
    },
  });
  members = await startFaultMembership({ alice: ['payments', 'search'] });
  cp = await startControlPlane({ dataDir: data, membershipUrl: members.url, membershipTimeoutMs: 1_000 });
});

afterAll(async () => {
  for (const m of mounts) await m.stop().catch(() => undefined);
  await cp?.close();
  await members?.close();
  if (data) await removeDataDir(data);
});

async function mountSession(input: { kind: 'team' | 'personal'; creator: string; team?: string }) {
  const session = await cp.createSession(input);
  // Threshold 1 byte: only the account and the bound team are on disk.
  const m = await startMount({ serverUrl: cp.url, token: session.token, args: ['--prefetch-threshold', '1', '--sync-interval', '200ms'] });
  mounts.push(m);
  return m;
}
const kfs = (m: MountHandle, args: string[]): Promise<RunResult> => run(process.execPath, [BIN, ...args, '--socket', m.socketPath], { cwd: m.dir, timeoutMs: 30_000 });

fuseSuite('can-load through a real mount', () => {
  it('personal session: allowed scopes exit 0; a refused team and a missing one print the same and exit 1; nothing is mounted', async () => {
    const m = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const ok = await kfs(m, ['can-load', 'account', 'team_payments', 'team_search', '--for', 'skill']);
    expect(ok).toMatchObject({ code: 0, stdout: 'account: allowed\nteam_payments: allowed\nteam_search: allowed\n', stderr: '' });

    const refused = await kfs(m, ['can-load', 'team_storage', '--for', 'tool']);
    const missing = await kfs(m, ['can-load', 'team_nosuch', '--for', 'tool']);
    expect(refused).toMatchObject({ code: 1, stdout: '', stderr: 'knowledgefs: no such scope: team_storage\n' });
    expect(missing).toMatchObject({ code: 1, stdout: '', stderr: 'knowledgefs: no such scope: team_nosuch\n' });
    const refusedJson = await kfs(m, ['can-load', 'team_storage', '--for', 'tool', '--json']);
    const missingJson = await kfs(m, ['can-load', 'team_nosuch', '--for', 'tool', '--json']);
    expect(refusedJson.stdout.replaceAll('storage', 'X')).toBe(missingJson.stdout.replaceAll('nosuch', 'X'));
    expect(refusedJson.code).toBe(missingJson.code);

    // Asking is not loading: search stays off disk.
    expect((await run('ls', ['knowledge'], { cwd: m.dir })).stdout.split('\n').filter(Boolean)).toEqual(['account', 'team_payments']);
  });

  it('--json: one object per scope, in order', async () => {
    const m = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const r = await kfs(m, ['can-load', 'account', 'team_storage', 'team_search', '--for', 'agent', '--json']);
    expect(r.code).toBe(1);
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown)).toEqual([
      { scope: 'account', allowed: true },
      { scope: 'team_storage', allowed: false, error: { code: 'not_found', message: 'no such scope: team_storage' } },
      { scope: 'team_search', allowed: true },
    ]);
  });

  it('team session: another team exits 3 with guidance naming the session\'s team', async () => {
    const m = await mountSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const r = await kfs(m, ['can-load', 'team_payments', 'team_search', '--for', 'tool']);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('team_payments: allowed\n');
    expect(r.stderr).toMatch(/^knowledgefs: this session belongs to team "payments" and cannot use team "search"'s MCP tools: .*hand the incident to team "search"\.\n$/);
  });

  it('the membership source down: refused, fail closed, exit 4; the gravest refusal sets the exit code', async () => {
    const m = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await members.setMode({ kind: 'down' });
    try {
      const r = await kfs(m, ['can-load', 'team_payments', 'team_search', '--for', 'skill']);
      expect(r.code).toBe(4);
      expect(r.stdout).toBe('team_payments: allowed\n');
      expect(r.stderr).toMatch(/^knowledgefs: cannot decide whether this session may load team_search: the membership source is unavailable/);
    } finally {
      await members.setMode({ kind: 'ok' });
    }
  });

  it('usage errors exit 2 before asking anything', async () => {
    const m = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect(await kfs(m, ['can-load', 'account'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/--for must be one of knowledge, skill, tool, agent/) });
    expect(await kfs(m, ['can-load', 'account', '--for', 'prompt'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/not "prompt"/) });
    expect(await kfs(m, ['can-load', 'payments', '--for', 'skill'])).toMatchObject({ code: 2, stderr: expect.stringMatching(/"payments" is not a scope name/) });
  });

  it('the library: canLoad answers per scope, refusals as data; bad arguments throw InvalidArgumentError', async () => {
    const m = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const client = new KnowledgeClient({ socketPath: m.socketPath });
    try {
      const res = await client.canLoad(['team_search', 'team_storage'], { for: 'skill' });
      expect(res).toEqual({
        for: 'skill',
        allowed: false,
        answers: [
          { scope: 'team_search', allowed: true },
          { scope: 'team_storage', allowed: false, error: { code: 'not_found', message: 'no such scope: team_storage' } },
        ],
      });
      expect((await client.canLoad('account', { for: 'agent' })).allowed).toBe(true);
      await expect(client.canLoad([], { for: 'skill' })).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(client.canLoad('account', { for: 'prompt' as 'skill' })).rejects.toThrow(/"for" must be one of/);
    } finally {
      client.close();
    }
  });
});
