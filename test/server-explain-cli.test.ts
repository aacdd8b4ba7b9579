// `knowledgefs explain` (dist/, in a child process) against a real control
// plane with a real (fault-injecting) membership service: one screen for
// people, --json for tools, and its exit codes. What GET /v1/admin/explain
// answers is in server-explain.test.ts, in-process.

import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExplainResponse } from '../src/core/wire.js';
import { memoryAuditSink } from '../src/server/access/audit-log.js';
import { BIN, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';

const FILES = {
  'account/DUTY.md': '# Account\n',
  'teams/payments/DUTY.md': '# Payments\n',
  'teams/payments/runbooks/refunds.md': 'refunds\n',
  'teams/search/DUTY.md': '# Search\n',
  'teams/storage/DUTY.md': '# Storage\n',
  'teams/storage/postmortems/disk-full.md': 'disk full\n',
  'teams/billing/DUTY.md': '# Billing\n',
  'teams/billing/secrets/ledger.md': 'ledger\n',
};

let data = '';
let members: FaultMembership;
let cp: TestControlPlane;
const audit = memoryAuditSink();
let alice: { sessionId: string; token: string };
let bob: { sessionId: string; token: string };

beforeAll(async () => {
  data = await makeDataDir({ teams: { payments: 'Payments', search: 'Search', storage: 'Storage', billing: 'Billing' }, files: FILES });
  members = await startFaultMembership({ alice: ['payments', 'search', 'storage'], bob: ['storage', 'billing'] });
  cp = await startControlPlane({ dataDir: data, membershipUrl: members.url, deps: { audit } });
  alice = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
  bob = await cp.createSession({ kind: 'team', creator: 'bob', team: 'storage' });
  // alice's agent reads search's DUTY.md through the read tool: search is mounted and in her read set.
  const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
  expect(read.status).toBe(200);
});

afterAll(async () => {
  await cp?.close();
  await members?.close();
  if (data) await removeDataDir(data);
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, KNOWLEDGEFS_ADMIN_TOKEN: cp.adminToken }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('knowledgefs explain', () => {
  it('prints one screen a person reads at a glance', async () => {
    const r = await cli(['explain', '--server', cp.url, '--session', alice.sessionId, '--path', 'knowledge/team_billing/secrets/ledger.md', '--threshold', '1']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`session   ${alice.sessionId}: personal session, bound to team payments, creator alice`);
    expect(r.stdout).toContain('members   alice (membership service): payments, search, storage');
    expect(r.stdout).toMatch(/^team_billing\s+\S+\s+2\s+.*\s+no\s+no\s+deny\s+creator-not-member: creator alice is not a member of team billing/m);
    expect(r.stdout).toMatch(/^team_search .*allow\s+creator-member: .*\[mounted\]$/m);
    expect(r.stdout).toContain('a read    404 not_found: no such file: team_billing/secrets/ledger.md');
    expect(r.stdout.split('\n').length).toBeLessThan(30);
  });

  it('--json prints the API answer', async () => {
    const r = await cli(['explain', '--server', cp.url, '--session', bob.sessionId, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const e = JSON.parse(r.stdout) as ExplainResponse;
    expect(e.session.id).toBe(bob.sessionId);
    expect(e.scopes.length).toBeGreaterThan(1);
  });

  it('an unknown session exits 1; an unreachable server exits 4', async () => {
    const unknown = await cli(['explain', '--server', cp.url, '--session', 's_nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no such session: s_nope');
    expect((await cli(['explain', '--server', 'http://127.0.0.1:9', '--session', 'x'])).code).toBe(4);
  });
});
