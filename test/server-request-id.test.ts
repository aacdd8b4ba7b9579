// Request ids: the control plane keeps a client's well-formed x-request-id
// (else makes one up), echoes it in the answer, and writes it on the audit
// lines of that request; the mount daemon's client sends one per call and
// names it when the call fails, so a runner's failure can be found in the
// control plane's audit log and logs.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryAuditSink } from '../src/server/access/audit-log.js';
import { HttpControlClient } from '../src/daemon/control-plane/http-control-client.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';

let data = '';
let cp: TestControlPlane;
const audit = memoryAuditSink();
let token = '';

beforeAll(async () => {
  data = await makeDataDir({ teams: { payments: 'P', search: 'S' }, users: { alice: { teams: ['payments'] } }, files: { 'account/DUTY.md': 'a\n', 'teams/payments/DUTY.md': 'p\n', 'teams/search/DUTY.md': 's\n' } });
  cp = await startControlPlane({ dataDir: data, deps: { audit } });
  ({ token } = await cp.createSession({ kind: 'personal', creator: 'alice' }));
});

afterAll(async () => {
  await cp?.close();
  if (data) await removeDataDir(data);
});

const grant = (scope: string, requestId?: string) =>
  fetch(`${cp.url}/v1/grants/${scope}`, { headers: { authorization: `Bearer ${token}`, ...(requestId !== undefined ? { 'x-request-id': requestId } : {}) } });

describe('the control plane', () => {
  it('echoes a well-formed id and writes it on the audit line', async () => {
    const res = await grant('team_payments', 'runner-7.trace:42');
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('runner-7.trace:42');
    expect(audit.records.at(-1)).toMatchObject({ scope: 'team_payments', action: 'open', result: 'allow', requestId: 'runner-7.trace:42' });
    // A denial too.
    const denied = await grant('team_search', 'runner-7.trace:43');
    expect(denied.status).toBe(404);
    expect(denied.headers.get('x-request-id')).toBe('runner-7.trace:43');
    expect(audit.records.at(-1)).toMatchObject({ scope: 'team_search', result: 'deny', requestId: 'runner-7.trace:43' });
  });

  it('replaces a missing, long or unsafe id with its own', async () => {
    for (const sent of [undefined, 'x'.repeat(65), 'has space', 'line\u2028break', '-leading-dash']) {
      let res: Response;
      try {
        res = await grant('account', sent);
      } catch {
        continue; // fetch itself refuses some header values
      }
      const id = res.headers.get('x-request-id') ?? '';
      expect(id, String(sent)).toMatch(/^kfs-[0-9a-f]{16}$/);
      expect(audit.records.at(-1)?.requestId).toBe(id);
    }
    const a = (await grant('account')).headers.get('x-request-id');
    const b = (await grant('account')).headers.get('x-request-id');
    expect(a).not.toBe(b);
  });

  it('answers errors and unauthenticated requests with an id as well', async () => {
    const res = await fetch(`${cp.url}/v1/session`, { headers: { 'x-request-id': 'no-token-1' } });
    expect(res.status).toBe(401);
    expect(res.headers.get('x-request-id')).toBe('no-token-1');
  });
});

describe("the mount daemon's client", () => {
  it('sends an id with each call, which lands on the audit line', async () => {
    const client = new HttpControlClient({ serverUrl: cp.url, token, requestTimeoutMs: 5_000 });
    try {
      await client.grant('team_payments');
      expect(audit.records.at(-1)).toMatchObject({ scope: 'team_payments', requestId: expect.stringMatching(/^kfsd-[0-9a-f]{16}$/) });
      const first = audit.records.at(-1)?.requestId;
      await client.grant('team_payments');
      expect(audit.records.at(-1)?.requestId).not.toBe(first);
    } finally {
      await client.close();
    }
  });

  it('keeps one id across the retries of a call and names it in the error', async () => {
    const seen: (string | undefined)[] = [];
    const failing = createServer((req, res) => {
      seen.push(req.headers['x-request-id'] as string | undefined);
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'unavailable', message: 'down for maintenance' } }));
    });
    await new Promise<void>((r) => failing.listen(0, '127.0.0.1', r));
    const client = new HttpControlClient({ serverUrl: `http://127.0.0.1:${(failing.address() as AddressInfo).port}`, token, requestTimeoutMs: 2_000 });
    try {
      const err = await client.grant('account').then(() => null, (e: unknown) => e as Error);
      expect(seen.length).toBeGreaterThan(1);
      expect(new Set(seen).size).toBe(1);
      expect(seen[0]).toMatch(/^kfsd-[0-9a-f]{16}$/);
      expect(err?.message).toContain(`(request ${seen[0]})`);
    } finally {
      await client.close();
      failing.close();
    }
  });
});
