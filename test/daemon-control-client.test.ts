// The daemon's HTTP client against a real server on 127.0.0.1:0 whose
// answers each test scripts: status mapping, retries of idempotent GETs
// within the deadline, no retry of POSTs, bounded time on hangs, capped
// bodies, plans packed, as columns or as rows, ETag/304, the token only ever in the
// authorization header, cancellation, one keep-alive connection reused, and
// batches bounded by inactivity rather than by their whole length.

import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildPlan, snapshotScope } from '../src/core/session/plan.js';
import { ColumnarSnapshot, columnarScope } from '../src/core/session/plan-columns.js';
import { PACKED_PLAN_TYPE } from '../src/core/session/plan-packed.js';
import { serializePackedPlan } from '../src/server/http/plan-route.js';
import { BATCH_CONTENT_TYPE } from '../src/core/wire.js';
import { HttpControlClient } from '../src/daemon/control-plane/http-control-client.js';
import { failure } from './helpers/fake-control-client.js';
import { waitFor } from './helpers/mount.js';

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;

let server: Server;
let url: string;
let handler: Handler = (_req, res) => res.end();
let hits: { method: string; url: string; auth: string | undefined; ifNoneMatch: string | undefined; body: string }[] = [];
let connections = 0;
const clients: HttpControlClient[] = [];

function client(timeoutMs = 2000): HttpControlClient {
  const c = new HttpControlClient({ serverUrl: url, token: 'tok_secret', requestTimeoutMs: timeoutMs });
  clients.push(c);
  return c;
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

const PLAN = buildPlan({
  sessionId: 'ses_1',
  threshold: 100,
  loadable: [snapshotScope('account', [{ path: 'DUTY.md', size: 3, mtimeMs: 1, sha256: 'a'.repeat(64) }])],
  boundTeam: undefined,
  mounted: [],
});

beforeAll(async () => {
  server = createServer((req, res) => {
    const hit = { method: req.method ?? '', url: req.url ?? '', auth: req.headers.authorization, ifNoneMatch: req.headers['if-none-match'], body: '' };
    hits.push(hit);
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (hit.body += chunk));
    req.on('end', () => handler(req, res, hits.length));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  hits = [];
  server.closeAllConnections();
});

afterAll(async () => {
  for (const c of clients) await c.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('HttpControlClient', () => {
  it('sends the token as a bearer header only; maps 404/403/401 with the server message', async () => {
    handler = (req, res) => {
      if (req.url === '/v1/grants/team_a') return json(res, 404, { error: { code: 'not_found', message: 'no such file: team_a' } });
      if (req.url === '/v1/grants/team_b') return json(res, 403, { error: { code: 'denied', message: 'this session belongs to team x' } });
      return json(res, 401, { error: { code: 'unauthorized', message: 'bad token' } });
    };
    const c = client();
    expect(await failure(c.grant('team_a'))).toMatchObject({ code: 'not_found', message: 'no such file: team_a' });
    expect(await failure(c.grant('team_b'))).toMatchObject({ code: 'denied', message: 'this session belongs to team x' });
    expect((await failure(c.session())).code).toBe('unauthorized');
    expect(hits.every((h) => h.auth === 'Bearer tok_secret' && !h.url.includes('tok_secret'))).toBe(true);
    expect(hits).toHaveLength(3); // 4xx are not retried
  });

  it('retries idempotent GETs on 5xx up to 3 times, then unavailable', async () => {
    handler = (_req, res) => json(res, 503, { error: { code: 'unavailable', message: 'busy' } });
    const err = await failure(client().grant('account'));
    expect(err.code).toBe('unavailable');
    expect(hits).toHaveLength(4);
  });

  it('a retry that succeeds is invisible to the caller', async () => {
    handler = (_req, res, n) => (n < 3 ? res.socket?.destroy() : json(res, 200, { scope: 'account', allowed: true }));
    await client().grant('account');
    expect(hits).toHaveLength(3);
  });

  it('membership_unavailable (503) is passed on, not retried', async () => {
    handler = (_req, res) => json(res, 503, { error: { code: 'membership_unavailable', message: 'membership source down' } });
    expect(await failure(client().grant('team_a'))).toMatchObject({ code: 'membership_unavailable' });
    expect(hits).toHaveLength(1);
  });

  it('POST /v1/read is never retried', async () => {
    handler = (_req, res) => json(res, 500, { error: { code: 'internal', message: 'boom' } });
    expect((await failure(client().read({ path: 'team_a/DUTY.md', mount: true }))).code).toBe('unavailable');
    expect(hits).toHaveLength(1);
  });

  it('a hung server → unavailable within the request timeout (generous bound, no hang)', async () => {
    handler = () => undefined; // never answers
    const started = Date.now();
    const err = await failure(client(300).grant('account'));
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain('no answer within 300 ms');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('connection refused → unavailable naming the server', async () => {
    const c = new HttpControlClient({ serverUrl: 'http://127.0.0.1:1', token: 't', requestTimeoutMs: 1000 });
    clients.push(c);
    const err = await failure(c.session());
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain('http://127.0.0.1:1');
  });

  it('garbage or a wrong shape → unavailable, never trusted', async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      res.end('<html>}{');
    };
    expect((await failure(client().plan({ threshold: 1 }))).code).toBe('unavailable');
    handler = (_req, res) => json(res, 200, { ...PLAN, scopes: [{ scope: '../etc', version: 'x', totalBytes: 0, files: [] }] });
    expect((await failure(client().plan({ threshold: 1 }))).code).toBe('unavailable');
    handler = (_req, res) => json(res, 200, { ...PLAN, version: 'forged' });
    expect((await failure(client().plan({ threshold: 1 }))).code).toBe('unavailable');
  });

  it('plans: If-None-Match with the version, 304 → null, wait passed as seconds', async () => {
    handler = (req, res) => (req.headers['if-none-match'] === `"${PLAN.version}"` ? (res.writeHead(304), res.end()) : json(res, 200, PLAN));
    const c = client();
    const plan = await c.plan({ threshold: 100 });
    expect(plan?.version).toBe(PLAN.version);
    expect(await c.plan({ threshold: 100, etag: PLAN.version, waitMs: 1500 })).toBeNull();
    expect(hits[1]?.url).toBe('/v1/plan?threshold=100&form=columns&wait=1.5');
  });

  it('plans are asked for as columns, and rows (a control plane that does not know the form) are the same plan', async () => {
    const columns = { ...PLAN, scopes: PLAN.scopes.map(columnarScope) };
    let answerRows = false;
    handler = (req, res) => json(res, 200, !answerRows && new URL(req.url ?? '', url).searchParams.get('form') === 'columns' ? columns : PLAN);
    const c = client();
    const fromColumns = await c.plan({ threshold: 100 });
    expect(fromColumns?.scopes[0]).toBeInstanceOf(ColumnarSnapshot);
    answerRows = true;
    const fromRows = await c.plan({ threshold: 100 });
    for (const p of [fromColumns, fromRows]) {
      expect(p?.version).toBe(PLAN.version);
      expect(p?.scopes.map((s) => s.files)).toEqual(PLAN.scopes.map((s) => s.files));
    }
  });

  it('plans are asked for packed by Accept, and a packed answer, sent in pieces of unknown length, is the same plan', async () => {
    const packed = Buffer.concat(serializePackedPlan(PLAN));
    const accepts: (string | undefined)[] = [];
    let type = PACKED_PLAN_TYPE;
    handler = (req, res) => {
      accepts.push(req.headers.accept);
      res.writeHead(200, { 'content-type': type });
      let at = 0;
      const next = () => {
        if (at >= packed.length) return res.end();
        res.write(packed.subarray(at, (at += 5)));
        setImmediate(next);
      };
      next();
    };
    const c = client();
    const plan = await c.plan({ threshold: 100 });
    expect(plan?.scopes[0]).toBeInstanceOf(ColumnarSnapshot);
    expect(plan?.version).toBe(PLAN.version);
    expect(plan?.scopes.map((s) => s.files)).toEqual(PLAN.scopes.map((s) => s.files));
    type = `${PACKED_PLAN_TYPE.toUpperCase()}; charset=binary`;
    expect((await c.plan({ threshold: 100 }))?.version).toBe(PLAN.version);
    expect(accepts).toEqual([`${PACKED_PLAN_TYPE}, application/json;q=0.5`, `${PACKED_PLAN_TYPE}, application/json;q=0.5`]);
    // The same bytes named JSON are not JSON; a packed body cut short is not a plan.
    type = 'application/json';
    expect((await failure(c.plan({ threshold: 100 }))).message).toMatch(/answered something that is not JSON/);
    handler = (_req, res) => (res.writeHead(200, { 'content-type': PACKED_PLAN_TYPE }), res.end(packed.subarray(0, packed.length - 1)));
    expect(await failure(c.plan({ threshold: 100 }))).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/invalid packed plan \(sections longer than the body\)/) });
  });

  it('plans are parsed as they arrive: one sent in small pieces is the same plan; a cut one is refused', async () => {
    const text = JSON.stringify({ ...PLAN, scopes: PLAN.scopes.map((s) => ({ ...s, files: s.files.map((f) => ({ ...f, mtimeMs: f.mtimeMs + 0.75 })) })) });
    let cut = false;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const end = cut ? text.length - 2 : text.length;
      let at = 0;
      const next = () => {
        if (at >= end) return res.end();
        res.write(text.slice(at, at + 7));
        at += 7;
        setImmediate(next);
      };
      next();
    };
    const c = client();
    expect(await c.plan({ threshold: 100 })).toEqual(PLAN); // fractional mtimes floored, as before
    cut = true;
    expect(await failure(c.plan({ threshold: 100 }))).toMatchObject({ code: 'unavailable', message: expect.stringContaining('not JSON') });
  });

  it('file bodies: bytes and the sha256 header; more bytes than the plan says → integrity, without reading it all', async () => {
    handler = (req, res) => {
      res.writeHead(200, { 'x-kfs-sha256': 'b'.repeat(64) });
      res.end(req.url?.includes('big') ? Buffer.alloc(1 << 20) : 'abc');
    };
    const c = client();
    const got = await c.file('account', 'dir/a b.md', 3);
    expect(got.body.toString()).toBe('abc');
    expect(got.sha256).toBe('b'.repeat(64));
    expect(hits[0]?.url).toBe('/v1/files/account/dir/a%20b.md');
    // The version the plan names goes along, for a control plane that still holds it.
    await c.file('account', 'dir/a b.md', 3, 'c'.repeat(64));
    expect(hits[1]?.url).toBe(`/v1/files/account/dir/a%20b.md?sha256=${'c'.repeat(64)}`);
    expect((await failure(c.file('account', 'big.md', 3))).code).toBe('integrity');
  });

  it('a body of declared length is the bytes sent, whatever pieces it arrives in; a cut one fails', async () => {
    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) % 251));
    let sent = bytes.length;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': String(bytes.length) });
      let at = 0;
      const next = () => {
        if (at >= sent) return sent < bytes.length ? res.destroy() : res.end();
        res.write(bytes.subarray(at, Math.min(sent, (at += 4_099))));
        setImmediate(next);
      };
      next();
    };
    const c = client();
    expect((await c.file('account', 'a.md', bytes.length)).body.equals(bytes)).toBe(true);
    expect((await c.file('account', 'a.md', bytes.length + 1)).body.equals(bytes)).toBe(true);
    sent = bytes.length - 10;
    expect((await failure(c.file('account', 'a.md', bytes.length))).code).toBe('unavailable');
  });

  it('POST bodies arrive whole, as JSON; calls share one keep-alive connection', async () => {
    handler = (req, res) =>
      req.url === '/v1/read'
        ? json(res, 200, { path: 'account/DUTY.md', sha256: 'c'.repeat(64), size: 2, contentBase64: 'aGk=', mounted: true })
        : json(res, 200, { scope: 'account', allowed: true });
    const c = client();
    const before = connections;
    await c.grant('account');
    expect(await c.read({ path: 'account/DUTY.md', mount: false })).toMatchObject({ contentBase64: 'aGk=' });
    await c.grant('account');
    expect(JSON.parse(hits[1]!.body)).toEqual({ path: 'account/DUTY.md', mount: false });
    expect(connections - before).toBe(1);
  });

  it('a body that stalls after the headers is bounded by the same deadline', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"sessionId":'); // and nothing more
    };
    const started = Date.now();
    const err = await failure(client(300).session());
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain('no answer within 300 ms');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('an aborted long-poll ends at once as cancelled, without retries', async () => {
    handler = () => undefined; // holds the plan request
    const ac = new AbortController();
    const pending = failure(client(60_000).plan({ threshold: 1, waitMs: 30_000, signal: ac.signal }));
    // Abort once the server holds the request, not after a guessed pause.
    expect(await waitFor(() => hits.length === 1, 5000, 5)).toBe(true);
    ac.abort();
    expect(await pending).toMatchObject({ code: 'unavailable', message: 'request cancelled' });
    expect(hits).toHaveLength(1);
  });

  describe('batch', () => {
    const files = ['a.md', 'b.md', 'c.md'].map((path) => ({ path, body: Buffer.from(`# ${path}\n`) }));
    const frame = (f: { path: string; body: Buffer }) =>
      Buffer.concat([Buffer.from(`${JSON.stringify({ path: f.path, sha256: createHash('sha256').update(f.body).digest('hex'), size: f.body.length })}\n`), f.body]);
    const paths = files.map((f) => f.path);
    const collect = async (c: HttpControlClient) => {
      const items: string[] = [];
      try {
        for await (const item of c.batch!('account', paths, { maxFileBytes: 1024 })) items.push(item.path);
        return { items, error: undefined };
      } catch (error) {
        return { items, error };
      }
    };

    it('a slow batch that keeps sending completes, though it takes longer than the request timeout', async () => {
      handler = (_req, res) => {
        res.writeHead(200, { 'content-type': BATCH_CONTENT_TYPE });
        files.forEach((f, i) => setTimeout(() => (i === files.length - 1 ? res.end(frame(f)) : res.write(frame(f))), 150 * (i + 1)));
      };
      const { items, error } = await collect(client(250));
      expect(error).toBeUndefined();
      expect(items).toEqual(paths);
      expect(JSON.parse(hits[0]!.body)).toEqual({ scope: 'account', paths });
    });

    it('a gap between chunks longer than the request timeout fails it; what came before stays valid', async () => {
      handler = (_req, res) => {
        res.writeHead(200, { 'content-type': BATCH_CONTENT_TYPE });
        res.write(frame(files[0]!)); // then silence
      };
      const started = Date.now();
      const { items, error } = await collect(client(300));
      expect(items).toEqual(['a.md']);
      expect(error).toMatchObject({ code: 'unavailable' });
      expect(Date.now() - started).toBeLessThan(5000);
    });

    it('no headers within the request timeout → unavailable; errors keep their mapping; never retried', async () => {
      handler = () => undefined;
      expect((await collect(client(300))).error).toMatchObject({ code: 'unavailable' });
      expect(hits).toHaveLength(1);
      handler = (_req, res) => json(res, 403, { error: { code: 'denied', message: 'not yours' } });
      expect((await collect(client())).error).toMatchObject({ code: 'denied', message: 'not yours' });
    });

    it('an abort mid-stream ends it as cancelled', async () => {
      handler = (_req, res) => {
        res.writeHead(200, { 'content-type': BATCH_CONTENT_TYPE });
        res.write(frame(files[0]!));
      };
      const ac = new AbortController();
      const items: string[] = [];
      const err = await failure(
        (async () => {
          for await (const item of client(60_000).batch('account', paths, { maxFileBytes: 1024, signal: ac.signal })) {
            items.push(item.path);
            ac.abort();
          }
        })(),
      );
      expect(items).toEqual(['a.md']);
      expect(err).toMatchObject({ code: 'unavailable', message: 'request cancelled' });
    });
  });

  it('rejects a bad --server URL up front', () => {
    expect(() => new HttpControlClient({ serverUrl: 'not a url', token: 't', requestTimeoutMs: 1 })).toThrow(/invalid --server URL/);
    expect(() => new HttpControlClient({ serverUrl: 'ftp://x', token: 't', requestTimeoutMs: 1 })).toThrow(/http:\/\/ or https:\/\//);
  });
});
