// The fault helpers must really inject their faults, or every test built on
// them proves nothing. Each mode is checked against a tiny upstream.

import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pathStartsWith, startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.js';
import { GARBAGE_BODIES, startFaultMembership, type FaultMembership } from '../helpers/fault-membership.js';

const BODY = Buffer.from('0123456789abcdefghijklmnopqrstuvwxyz'.repeat(100));

interface Got {
  status?: number;
  body?: Buffer;
  headers?: Record<string, unknown>;
  error?: string;
}

/** One request with its own socket; resolves with what arrived, or the error. */
function get(url: string, timeoutMs = 3000): Promise<Got> {
  return new Promise((resolve) => {
    const req = request(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks), headers: res.headers }));
      res.on('error', (e) => resolve({ status: res.statusCode, error: (e as NodeJS.ErrnoException).code ?? e.message }));
      res.on('aborted', () => resolve({ status: res.statusCode, error: 'aborted' }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ error: (e as NodeJS.ErrnoException).code ?? e.message }));
    req.end();
  });
}

describe('fault proxy', () => {
  let upstream: Server;
  let proxy: FaultProxy;

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-kfs-sha256': 'abc', 'x-path': req.url ?? '' });
      res.end(BODY);
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    proxy = await startFaultProxy(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    await proxy.close();
    await new Promise<void>((r) => upstream.close(() => r()));
  });

  it('passes bytes and headers through and counts requests', async () => {
    proxy.setMode({ kind: 'pass' });
    proxy.resetCounts();
    const got = await get(`${proxy.url}/v1/files/account/a.md`);
    expect(got.status).toBe(200);
    expect(got.body?.equals(BODY)).toBe(true);
    expect(got.headers?.['x-kfs-sha256']).toBe('abc');
    expect(got.headers?.['x-path']).toBe('/v1/files/account/a.md');
    expect(proxy.count()).toBe(1);
  });

  it('truncate cuts the body short under the original Content-Length', async () => {
    proxy.setMode({ kind: 'truncate' });
    const got = await get(`${proxy.url}/x`);
    // Either the client notices the short body, or it never gets the full one.
    expect(got.body?.equals(BODY) ?? false).toBe(false);
    expect(got.error).toBeDefined();
  });

  it('flip keeps length and headers but changes one byte', async () => {
    proxy.setMode({ kind: 'flip' });
    const got = await get(`${proxy.url}/x`);
    expect(got.status).toBe(200);
    expect(got.body?.length).toBe(BODY.length);
    expect(got.body?.equals(BODY)).toBe(false);
    expect(got.headers?.['x-kfs-sha256']).toBe('abc');
  });

  it('reset, refuse and hang fail the request', async () => {
    proxy.setMode({ kind: 'reset' });
    expect((await get(`${proxy.url}/x`)).error).toMatch(/ECONNRESET|socket hang up/);
    proxy.setMode({ kind: 'refuse' });
    expect((await get(`${proxy.url}/x`)).error).toMatch(/ECONNRESET|socket hang up/);
    proxy.setMode({ kind: 'hang' });
    expect((await get(`${proxy.url}/x`, 300)).error).toBe('timeout');
  });

  it('delay delays, status and garbage answer without forwarding', async () => {
    proxy.setMode({ kind: 'delay', ms: 200 });
    const t0 = Date.now();
    const got = await get(`${proxy.url}/x`);
    expect(got.body?.equals(BODY)).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
    proxy.setMode({ kind: 'status', status: 500 });
    expect((await get(`${proxy.url}/x`)).status).toBe(500);
    proxy.setMode({ kind: 'garbage' });
    const junk = await get(`${proxy.url}/x`);
    expect(junk.status).toBe(200);
    expect(() => JSON.parse(junk.body?.toString() ?? '')).toThrow();
  });

  it('rules apply to matching requests only', async () => {
    proxy.setRules([{ mode: { kind: 'flip' }, match: pathStartsWith('/v1/files/') }]);
    expect((await get(`${proxy.url}/v1/plan`)).body?.equals(BODY)).toBe(true);
    expect((await get(`${proxy.url}/v1/files/account/a`)).body?.equals(BODY)).toBe(false);
    proxy.setMode({ kind: 'pass' });
  });

  it('follows a re-pointed upstream', async () => {
    const other = createServer((_req, res) => res.end('other'));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    proxy.setTarget(`http://127.0.0.1:${(other.address() as AddressInfo).port}`);
    expect((await get(`${proxy.url}/x`)).body?.toString()).toBe('other');
    proxy.setTarget(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
    await new Promise<void>((r) => other.close(() => r()));
    expect((await get(`${proxy.url}/x`)).body?.equals(BODY)).toBe(true);
  });
});

describe('fault membership', () => {
  let m: FaultMembership;
  beforeAll(async () => {
    m = await startFaultMembership({ alice: ['payments', 'search'] });
  });
  afterAll(async () => {
    await m.close();
  });

  it('answers teams, 404 for unknown users, and follows edits', async () => {
    const ok = await get(`${m.url}/users/alice/teams`);
    expect(JSON.parse(ok.body?.toString() ?? '')).toEqual({ teams: ['payments', 'search'] });
    expect((await get(`${m.url}/users/bob/teams`)).status).toBe(404);
    m.setTeams('alice', ['payments']);
    expect(JSON.parse((await get(`${m.url}/users/alice/teams`)).body?.toString() ?? '')).toEqual({ teams: ['payments'] });
    expect(m.calls('alice')).toBe(2);
  });

  it('goes down and comes back on the same port', async () => {
    await m.setMode({ kind: 'down' });
    expect((await get(`${m.url}/users/alice/teams`)).error).toBe('ECONNREFUSED');
    await m.setMode({ kind: 'ok' });
    expect((await get(`${m.url}/users/alice/teams`)).status).toBe(200);
  });

  it('fails as configured: 500, garbage, hang, not-found, slow', async () => {
    await m.setMode({ kind: 'status', status: 500 });
    expect((await get(`${m.url}/users/alice/teams`)).status).toBe(500);
    for (const body of GARBAGE_BODIES) {
      await m.setMode({ kind: 'garbage', body });
      expect((await get(`${m.url}/users/alice/teams`)).body?.toString()).toBe(body);
    }
    await m.setMode({ kind: 'hang' });
    expect((await get(`${m.url}/users/alice/teams`, 300)).error).toBe('timeout');
    await m.setMode({ kind: 'not-found' });
    expect((await get(`${m.url}/users/alice/teams`)).status).toBe(404);
    await m.setMode({ kind: 'slow', ms: 150 });
    const t0 = Date.now();
    expect((await get(`${m.url}/users/alice/teams`)).status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    await m.setMode({ kind: 'ok' });
  });
});
