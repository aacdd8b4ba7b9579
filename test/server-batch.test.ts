// Over real HTTP: POST /v1/batch. The framing (header line + exactly `size`
// bytes per requested path, in order, `missing` for absent files), every
// file's bytes hashing to its header, one audit record per batch, denials
// byte-identical to GET /v1/grants/<scope> with the pack store untouched, and
// invalid requests rejected before any decision.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_CONTENT_TYPE, BATCH_MAX_PATHS, type BatchFrameHeader } from '../src/core/wire.js';
import type { MembershipSource } from '../src/server/access/membership.js';
import type { PackStore } from '../src/store/pack-store.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { rawRequest, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { CONTROL_PLANE_METRICS } from '../src/core/metrics.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

const big = Buffer.alloc(300 * 1024, 'x'); // spans many chunks
const binary = Buffer.from([0, 10, 13, 255, 10, 10, 0x7b, 0x7d]); // newlines and braces inside a body
const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
  users: { alice: { teams: ['payments', 'search'] } },
  files: {
    'account/DUTY.md': '# Account duty\n',
    'teams/payments/DUTY.md': '# Payments duty\n',
    'teams/payments/runbooks/db.md': 'db v1\n',
    'teams/payments/empty.md': '',
    'teams/payments/big.bin': big,
    'teams/payments/bin.dat': binary,
    'teams/payments/ünï cödé.md': 'unicode name\n',
    'teams/storage/DUTY.md': '# Storage duty\n',
  },
};

const storeCalls: string[] = [];
let membershipDown = false;
let dir: string;
let cp: TestControlPlane;
beforeAll(async () => {
  dir = await makeDataDir(spec);
  const counting = (store: PackStore): PackStore => ({
    get generation() {
      return store.generation;
    },
    scopes: () => store.scopes(),
    snapshot: (scope) => {
      storeCalls.push(`snapshot ${scope}`);
      return store.snapshot(scope);
    },
    read: (scope, path) => {
      storeCalls.push(`read ${scope}/${path}`);
      return store.read(scope, path);
    },
    readSmallSync: (scope, path) => {
      storeCalls.push(`readSmallSync ${scope}/${path}`);
      return store.readSmallSync?.(scope, path);
    },
  });
  const flaky = (source: MembershipSource): MembershipSource => ({
    teamsOf: (user) => (membershipDown ? Promise.reject(new Error('membership down')) : source.teamsOf(user)),
  });
  cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 60_000, watch: false, deps: { wrapPackStore: counting, wrapMembership: flaky } });
});
afterAll(async () => {
  await cp?.close();
  await removeDataDir(dir);
});

const auth = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' });

interface Frame {
  header: BatchFrameHeader;
  body: Buffer;
}

/** An independent reader of the framing (not the daemon's parser). */
function parseFrames(buf: Buffer): Frame[] {
  const frames: Frame[] = [];
  let at = 0;
  while (at < buf.length) {
    const nl = buf.indexOf(10, at);
    expect(nl).toBeGreaterThanOrEqual(0);
    const header = JSON.parse(buf.subarray(at, nl).toString('utf8')) as BatchFrameHeader;
    at = nl + 1;
    const size = 'missing' in header ? 0 : header.size;
    frames.push({ header, body: buf.subarray(at, at + size) });
    at += size;
  }
  expect(at).toBe(buf.length);
  return frames;
}

async function batch(token: string, body: unknown) {
  const res = await fetch(`${cp.url}/v1/batch`, { method: 'POST', headers: auth(token), body: JSON.stringify(body) });
  return { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) };
}

describe('POST /v1/batch', () => {
  it('answers each path in order: header line then exactly size bytes that hash to the header; missing files say so', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const paths = ['runbooks/db.md', 'nope.md', 'big.bin', 'empty.md', 'bin.dat', 'ünï cödé.md', 'DUTY.md', 'runbooks/db.md'];
    const res = await batch(s.token, { scope: 'team_payments', paths });
    expect(res.status).toBe(200);
    expect(res.type).toBe(BATCH_CONTENT_TYPE);
    const frames = parseFrames(res.body);
    expect(frames.map((f) => f.header.path)).toEqual(paths);
    expect(frames[1]!.header).toEqual({ path: 'nope.md', missing: true });
    const expected: Record<string, Buffer> = {
      'runbooks/db.md': Buffer.from('db v1\n'),
      'big.bin': big,
      'empty.md': Buffer.alloc(0),
      'bin.dat': binary,
      'ünï cödé.md': Buffer.from('unicode name\n'),
      'DUTY.md': Buffer.from('# Payments duty\n'),
    };
    for (const f of frames) {
      if ('missing' in f.header) continue;
      expect(f.body.equals(expected[f.header.path]!)).toBe(true);
      expect(f.header.sha256).toBe(sha(f.body));
      expect(f.header.size).toBe(f.body.length);
    }
  });

  it('small files take the synchronous path, large ones the async one; a file edited since the scan is sent with the hash of the bytes sent', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'db v2, edited after the scan\n');
    storeCalls.length = 0;
    const res = await batch(s.token, { scope: 'team_payments', paths: ['runbooks/db.md', 'big.bin'] });
    expect(storeCalls).toEqual(['snapshot team_payments', 'readSmallSync team_payments/runbooks/db.md', 'readSmallSync team_payments/big.bin', 'read team_payments/big.bin']);
    const [db, bigFrame] = parseFrames(res.body);
    expect(db!.body.toString()).toBe('db v2, edited after the scan\n');
    expect(db!.header).toEqual({ path: 'runbooks/db.md', sha256: sha(db!.body), size: db!.body.length });
    expect(bigFrame!.body.equals(big)).toBe(true);
    await writeDataFile(dir, 'teams/payments/runbooks/db.md', 'db v1\n');
  });

  it('prefetch batches past --max-prefetch-batches are shed (503, Retry-After, x-kfs-shed) until a slot frees; others are not', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const slots = cp.cp.options.maxPrefetchBatches;
    const ask = (prefetch: boolean) =>
      cp.cp.handler({
        method: 'POST',
        rawPath: '/v1/batch',
        query: new URLSearchParams(),
        authorization: `Bearer ${s.token}`,
        ifNoneMatch: undefined,
        body: Buffer.from(JSON.stringify({ scope: 'team_payments', paths: ['DUTY.md'] })),
        signal: new AbortController().signal,
        requestId: 'test',
        prefetch,
      });
    // Answers whose streams are not read yet hold their slots.
    const held = await Promise.all(Array.from({ length: slots }, () => ask(true)));
    expect(held.map((r) => r.status)).toEqual(held.map(() => 200));
    const shed = await ask(true);
    expect(shed.status).toBe(503);
    expect(shed.headers['retry-after']).toBe('1');
    expect(shed.headers['x-kfs-shed']).toBe('1');
    expect(JSON.parse(String(shed.body))).toMatchObject({ error: { code: 'unavailable' } });
    expect((await ask(false)).status, 'an open (read-ahead) batch is never shed').toBe(200);
    for await (const _ of held[0]!.stream!) void _;
    const again = await ask(true);
    expect(again.status, 'a slot freed when a stream ended').toBe(200);
    held[0] = again;
    const shedTotal = (await cp.cp.metrics.samples(CONTROL_PLANE_METRICS.prefetchShed))[0]?.value ?? 0;
    expect(shedTotal).toBeGreaterThanOrEqual(1);
    for (const r of held) for await (const _ of r.stream!) void _;
  });

  it('is decided once per batch: one audit record with action "open"', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    expect((await batch(s.token, { scope: 'team_search', paths: ['a.md', 'b.md', 'c.md'] })).status).toBe(200);
    await cp.cp.audit.flush();
    const lines = (await readFile(cp.cp.options.auditLog, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l['session'] === s.sessionId);
    expect(lines).toEqual([expect.objectContaining({ scope: 'team_search', action: 'open', result: 'allow' })]);
  });

  it("a personal session's denial is byte-identical to GET /v1/grants/<scope> and never touches the store", async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    // One request id for every request, so the answers compare byte for byte (an id is echoed; a made-up one is random).
    const h = { ...auth(s.token), 'x-request-id': 'compare-1' };
    storeCalls.length = 0;
    const denied = await rawRequest(cp.url, 'POST', '/v1/batch', h, JSON.stringify({ scope: 'team_storage', paths: ['DUTY.md'] }));
    expect(storeCalls).toEqual([]);
    const grant = await rawRequest(cp.url, 'GET', '/v1/grants/team_storage', h);
    expect(denied.status).toBe(404);
    expect(denied.raw.equals(grant.raw)).toBe(true);
    // …and to a team that does not exist at all.
    const nowhere = await rawRequest(cp.url, 'POST', '/v1/batch', h, JSON.stringify({ scope: 'team_nowhere', paths: ['DUTY.md'] }));
    expect(nowhere.raw.toString().replaceAll('team_nowhere', 'team_storage')).toBe(denied.raw.toString());
  });

  it("a team session's denial is the grants route's 403 guidance; store untouched", async () => {
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    // One request id for every request, so the answers compare byte for byte (an id is echoed; a made-up one is random).
    const h = { ...auth(s.token), 'x-request-id': 'compare-1' };
    storeCalls.length = 0;
    const denied = await rawRequest(cp.url, 'POST', '/v1/batch', h, JSON.stringify({ scope: 'team_search', paths: ['DUTY.md'] }));
    expect(storeCalls).toEqual([]);
    const grant = await rawRequest(cp.url, 'GET', '/v1/grants/team_search', h);
    expect(denied.status).toBe(403);
    expect(denied.raw.equals(grant.raw)).toBe(true);
  });

  it('membership failure → 503 like the grants route (fail closed), store untouched', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    // One request id for every request, so the answers compare byte for byte (an id is echoed; a made-up one is random).
    const h = { ...auth(s.token), 'x-request-id': 'compare-1' };
    membershipDown = true;
    try {
      storeCalls.length = 0;
      const denied = await rawRequest(cp.url, 'POST', '/v1/batch', h, JSON.stringify({ scope: 'team_search', paths: ['DUTY.md'] }));
      expect(storeCalls).toEqual([]);
      const grant = await rawRequest(cp.url, 'GET', '/v1/grants/team_search', h);
      expect(denied.status).toBe(503);
      expect(denied.raw.equals(grant.raw)).toBe(true);
      // Account and the bound team never ask the membership source.
      expect((await batch(s.token, { scope: 'team_payments', paths: ['DUTY.md'] })).status).toBe(200);
    } finally {
      membershipDown = false;
    }
  });

  it('rejects bad requests before deciding or touching the store', async () => {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    storeCalls.length = 0;
    const bad: unknown[] = [
      'not json',
      { scope: 'team_payments' },
      { scope: 'team_payments', paths: [] },
      { scope: 'team_payments', paths: ['../account/DUTY.md'] },
      { scope: 'team_payments', paths: ['/etc/passwd'] },
      { scope: 'team_payments', paths: [42] },
      { scope: 'nope', paths: ['DUTY.md'] },
      { scope: 'team_payments', paths: Array.from({ length: BATCH_MAX_PATHS + 1 }, (_, i) => `${i}`) },
    ];
    for (const body of bad) {
      const res = await fetch(`${cp.url}/v1/batch`, { method: 'POST', headers: auth(s.token), body: typeof body === 'string' ? body : JSON.stringify(body) });
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      await res.arrayBuffer();
    }
    expect(storeCalls).toEqual([]);
    const noToken = await fetch(`${cp.url}/v1/batch`, { method: 'POST', body: JSON.stringify({ scope: 'account', paths: ['DUTY.md'] }) });
    expect(noToken.status).toBe(401);
  });
});
