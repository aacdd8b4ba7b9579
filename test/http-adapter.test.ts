// The node:http layer over a stand-in handler, driven by raw HTTP on a real
// socket: what a request becomes (the path kept encoded, the request id, the
// prefetch mark), the bytes an answer becomes (no Date, the length of all its
// pieces, none for 204/304 and HEAD), the body cap, streamed answers and
// their failure, an unexpected throw, what is counted, and when a request's
// signal is aborted.

import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS as M, NO_METRICS, type MetricsRecorder } from '../src/core/metrics.js';
import type { ApiRequest, ApiResponse } from '../src/server/http/api.js';
import { createHttpServer } from '../src/server/http/http-adapter.js';
import type { Handler } from '../src/server/http/router.js';

let server: Server | undefined;
let shutdown: AbortController;
let logged: { line: string; meta: unknown }[];
let seen: ApiRequest[];
let metered: string[];
/** When the server started listening: no request it times can have taken longer. */
let servedAt: number;

afterEach(async () => {
  shutdown?.abort();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server?.closeAllConnections();
  server = undefined;
});

async function serve(answer: (req: ApiRequest) => Promise<ApiResponse> | ApiResponse, options: { maxBodyBytes?: number; metrics?: boolean } = {}): Promise<number> {
  shutdown = new AbortController();
  logged = [];
  seen = [];
  metered = [];
  const metrics: MetricsRecorder = {
    ...NO_METRICS,
    add: (spec, _labels, delta) => void metered.push(`${spec.name} ${delta}`),
    inc: (spec, labels) => void metered.push(`${spec.name} ${JSON.stringify(labels)}`),
    observe: (spec, labels, value) => void metered.push(`${spec.name} ${JSON.stringify(labels)} ${value >= 0 && value <= (performance.now() - servedAt) / 1000 ? 'seconds' : value}`),
  };
  const handler: Handler = async (req) => {
    seen.push(req);
    return answer(req);
  };
  server = createHttpServer(handler, { maxBodyBytes: options.maxBodyBytes ?? 1024, log: (line, meta) => void logged.push({ line, meta }), ...(options.metrics ? { metrics } : {}) }, shutdown.signal);
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  servedAt = performance.now();
  return (server?.address() as AddressInfo).port;
}

/** Sends `raw` bytes (keeping its side open) and answers everything the server wrote until it closed, or until `ms` passed and the client left. */
function exchange(port: number, raw: string | Buffer, ms = 3000): Promise<{ text: string; error: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let error = false;
    const timer = setTimeout(() => socket.destroy(), ms);
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', () => {
      error = true;
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(chunks).toString('latin1'), error });
    });
    socket.write(raw);
  });
}

const GET = (path: string, headers: string[] = []) => [`GET ${path} HTTP/1.1`, 'host: x', 'connection: close', ...headers, '', ''].join('\r\n');
const head = (text: string) => text.slice(0, text.indexOf('\r\n\r\n')).toLowerCase();
const bodyOf = (text: string) => text.slice(text.indexOf('\r\n\r\n') + 4);

describe('createHttpServer', () => {
  it('a request: the path as sent, the query, the headers the routes read, the body', async () => {
    const port = await serve(() => ({ status: 200, headers: {}, body: 'ok' }));
    const body = '{"path":"x"}';
    await exchange(port, [`POST /v1/files/team_x/a%2e%2e%2Fb?sha256=abc&wait=5 HTTP/1.1`, 'host: x', 'connection: close', 'authorization: Bearer tok', 'if-none-match: "v1"', `content-length: ${body.length}`, 'x-request-id: run-1.a:b', 'x-kfs-priority: prefetch', '', body].join('\r\n'));
    const req = seen[0] as ApiRequest;
    expect(req.method).toBe('POST');
    expect(req.rawPath).toBe('/v1/files/team_x/a%2e%2e%2Fb');
    expect([...req.query]).toEqual([['sha256', 'abc'], ['wait', '5']]);
    expect(req.authorization).toBe('Bearer tok');
    expect(req.ifNoneMatch).toBe('"v1"');
    expect(req.body.toString()).toBe(body);
    expect(req.requestId).toBe('run-1.a:b');
    expect(req.prefetch).toBe(true);
    expect(req.signal.aborted).toBe(false);
  });

  it('no query, no body, a made-up request id for a missing or malformed one, no prefetch mark unless it is "prefetch"', async () => {
    const port = await serve(() => ({ status: 200, headers: {}, body: '' }));
    const answers = [await exchange(port, GET('/healthz')), await exchange(port, GET('/healthz', ['x-request-id: has space', 'x-kfs-priority: urgent']))];
    expect(seen.map((r) => [r.rawPath, [...r.query], r.body.length, r.prefetch, r.authorization, r.ifNoneMatch])).toEqual([
      ['/healthz', [], 0, false, undefined, undefined],
      ['/healthz', [], 0, false, undefined, undefined],
    ]);
    for (const [i, a] of answers.entries()) {
      expect(seen[i]?.requestId).toMatch(/^kfs-[0-9a-f]{16}$/);
      expect(head(a.text)).toContain(`x-request-id: ${seen[i]?.requestId}`);
    }
    expect(seen[0]?.requestId).not.toBe(seen[1]?.requestId);
  });

  it('an answer: its status and headers, the length of all its pieces, no Date; the request id echoed', async () => {
    const port = await serve(() => ({ status: 201, headers: { 'content-type': 'text/plain', etag: '"e"' }, body: [Buffer.from('one,'), Buffer.from('two,'), Buffer.from('three')] }));
    const { text } = await exchange(port, GET('/x', ['x-request-id: abc']));
    expect(text.startsWith('HTTP/1.1 201 Created\r\n')).toBe(true);
    const h = head(text);
    expect(h).toContain('content-type: text/plain');
    expect(h).toContain('etag: "e"');
    expect(h).toContain('content-length: 13');
    expect(h).toContain('x-request-id: abc');
    expect(h).not.toContain('date:');
    expect(bodyOf(text)).toBe('one,two,three');
  });

  it('204 and 304 have no length and no body; HEAD is handled as GET and gets the length without the body', async () => {
    let status = 204;
    const port = await serve(() => ({ status, headers: { etag: '"e"' }, body: 'ignored' }));
    for (status of [204, 304]) {
      const { text } = await exchange(port, GET('/x'));
      expect(text.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
      expect(head(text)).not.toContain('content-length');
      expect(bodyOf(text)).toBe('');
    }
    status = 200;
    const { text } = await exchange(port, ['HEAD /x HTTP/1.1', 'host: x', 'connection: close', '', ''].join('\r\n'));
    expect(seen[2]?.method).toBe('GET');
    expect(head(text)).toContain('content-length: 7');
    expect(bodyOf(text)).toBe('');
  });

  it('a body over the cap: 413 naming the cap, the connection closed; declared or sent', async () => {
    const port = await serve(() => ({ status: 200, headers: {}, body: 'ok' }), { maxBodyBytes: 10 });
    const declared = await exchange(port, ['POST /x HTTP/1.1', 'host: x', 'content-length: 11', '', '01234567890'].join('\r\n'));
    const chunked = await exchange(port, ['POST /x HTTP/1.1', 'host: x', 'transfer-encoding: chunked', '', '6', '012345', '6', '678901', '0', '', ''].join('\r\n'));
    for (const { text } of [declared, chunked]) {
      expect(text.startsWith('HTTP/1.1 413 ')).toBe(true);
      expect(head(text)).toContain('connection: close');
      expect(JSON.parse(bodyOf(text))).toEqual({ error: { code: 'too_large', message: 'request body larger than 10 bytes' } });
    }
    expect(seen).toEqual([]);
    // At the cap exactly: served.
    const exact = await exchange(port, ['POST /x HTTP/1.1', 'host: x', 'connection: close', 'content-length: 10', '', '0123456789'].join('\r\n'));
    expect(exact.text.startsWith('HTTP/1.1 200 ')).toBe(true);
    expect(seen[0]?.body.toString()).toBe('0123456789');
  });

  it('a streamed answer is sent chunked, whole; HEAD gets no stream', async () => {
    async function* pieces() {
      for (let i = 0; i < 50; i++) yield Buffer.alloc(64 * 1024, 97 + (i % 26));
    }
    const port = await serve(() => ({ status: 200, headers: { 'content-type': 'application/octet-stream' }, body: '', stream: pieces() }));
    const res = await fetch(`http://127.0.0.1:${port}/s`);
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(res.headers.get('date')).toBeNull();
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.length).toBe(50 * 64 * 1024);
    expect(bytes[64 * 1024 * 3]).toBe(97 + 3);
    const headAnswer = await exchange(port, ['HEAD /s HTTP/1.1', 'host: x', 'connection: close', '', ''].join('\r\n'));
    expect(head(headAnswer.text)).toContain('content-length: 0');
  });

  it('a stream that fails midway cuts the connection (never a clean end) and is logged', async () => {
    async function* failing() {
      yield Buffer.alloc(256 * 1024, 120);
      throw new Error('store went away');
    }
    const port = await serve(() => ({ status: 200, headers: {}, body: '', stream: failing() }));
    await expect(fetch(`http://127.0.0.1:${port}/s`).then((r) => r.arrayBuffer())).rejects.toThrow();
    expect(logged.map((l) => l.line)).toEqual(['streamed answer failed, connection cut: store went away']);
  });

  it('a streamed answer waits for the client: a client that does not read holds the stream back', async () => {
    let pulled = 0;
    async function* long() {
      // Bounded, so that a server that does not wait pulls all of it (100 MiB) instead of running out of memory.
      for (let i = 0; i < 200; i++) {
        pulled++;
        yield Buffer.alloc(512 * 1024, 120);
      }
    }
    const port = await serve(() => ({ status: 200, headers: {}, body: '', stream: long() }));
    const socket = connect(port, '127.0.0.1');
    socket.pause();
    socket.write(GET('/s'));
    await new Promise((r) => setTimeout(r, 300));
    // The socket buffers take a few MiB; without waiting for drain all 200 chunks would be pulled at once.
    expect(pulled).toBeLessThan(64);
    socket.destroy();
  });

  it('a client that leaves mid-stream ends the stream (its finally runs): nothing is left waiting', async () => {
    let ended = false;
    async function* long() {
      try {
        for (let i = 0; i < 200; i++) yield Buffer.alloc(512 * 1024, 120);
      } finally {
        ended = true;
      }
    }
    const port = await serve(() => ({ status: 200, headers: {}, body: '', stream: long() }));
    const socket = connect(port, '127.0.0.1');
    socket.pause();
    socket.write(GET('/s'));
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    const deadline = Date.now() + 2000;
    while (!ended && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(ended).toBe(true);
  });

  it('a declared length over the cap is refused at once, without waiting for a body that never comes', async () => {
    const port = await serve(() => ({ status: 200, headers: {}, body: 'ok' }), { maxBodyBytes: 10 });
    const started = Date.now();
    const { text } = await exchange(port, ['POST /x HTTP/1.1', 'host: x', 'content-length: 1000000000000', '', ''].join('\r\n'), 2000);
    expect(text.startsWith('HTTP/1.1 413 ')).toBe(true);
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('a connection is kept alive across answers, a 500 included', async () => {
    let calls = 0;
    const port = await serve(() => {
      if (++calls === 1) throw new Error('first fails');
      return { status: 200, headers: {}, body: 'second' };
    });
    const twoOnOne = ['GET /a HTTP/1.1', 'host: x', '', 'GET /b HTTP/1.1', 'host: x', 'connection: close', '', ''].join('\r\n');
    const { text } = await exchange(port, twoOnOne);
    expect(text.match(/HTTP\/1\.1 /g)).toHaveLength(2);
    const first = text.slice(0, text.indexOf('HTTP/1.1 ', 1));
    expect(first.startsWith('HTTP/1.1 500 ')).toBe(true);
    expect(head(first)).not.toContain('connection: close');
    expect(text.endsWith('second')).toBe(true);
  });

  it('a handler that throws: 500 without details, logged with the request id', async () => {
    const port = await serve(() => {
      throw new Error('bug');
    });
    const { text } = await exchange(port, GET('/x', ['x-request-id: r-9']));
    expect(text.startsWith('HTTP/1.1 500 ')).toBe(true);
    expect(JSON.parse(bodyOf(text))).toEqual({ error: { code: 'internal', message: 'internal error (logged by the control plane)' } });
    expect(logged).toEqual([{ line: 'request r-9 failed: bug', meta: { level: 'error', requestId: 'r-9' } }]);
  });

  it('counts each answered request by route template and status class, times it, and keeps the in-flight gauge', async () => {
    const port = await serve((req) => ({ status: req.rawPath === '/v1/plan' ? 304 : 404, headers: {}, body: '' }), { metrics: true });
    await exchange(port, GET('/v1/plan?wait=10'));
    await exchange(port, GET('/nothing/here'));
    await new Promise((r) => setTimeout(r, 50));
    expect(metered).toEqual([
      `${M.httpInFlight.name} 1`,
      `${M.httpInFlight.name} -1`,
      `${M.httpRequests.name} {"route":"plan_long_poll","status_class":"3xx"}`,
      `${M.httpDuration.name} {"route":"plan_long_poll"} seconds`,
      `${M.httpInFlight.name} 1`,
      `${M.httpInFlight.name} -1`,
      `${M.httpRequests.name} {"route":"other","status_class":"4xx"}`,
      `${M.httpDuration.name} {"route":"other"} seconds`,
    ]);
  });

  it('a client that leaves early: its request is aborted and not counted', async () => {
    let release: () => void = () => undefined;
    const port = await serve((req) => new Promise((resolve) => {
      release = () => resolve({ status: 200, headers: {}, body: 'late' });
      req.signal.addEventListener('abort', () => release());
    }), { metrics: true });
    await exchange(port, GET('/v1/plan'), 200);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen[0]?.signal.aborted).toBe(true);
    expect(metered).toEqual([`${M.httpInFlight.name} 1`, `${M.httpInFlight.name} -1`]);
  });

  it('shutting down aborts waiting requests; their answer closes the connection', async () => {
    const port = await serve((req) => new Promise((resolve) => {
      req.signal.addEventListener('abort', () => resolve({ status: 200, headers: {}, body: 'bye' }));
    }));
    const keptAlive = ['GET /v1/plan HTTP/1.1', 'host: x', '', ''].join('\r\n');
    const answer = exchange(port, keptAlive);
    await new Promise((r) => setTimeout(r, 100));
    shutdown.abort();
    const { text } = await answer;
    expect(seen[0]?.signal.aborted).toBe(true);
    expect(head(text)).toContain('connection: close');
    expect(bodyOf(text)).toBe('bye');
  });

  it('a request that finished normally is not aborted afterwards', async () => {
    const port = await serve(() => ({ status: 200, headers: {}, body: 'ok' }));
    await exchange(port, GET('/x'));
    await new Promise((r) => setTimeout(r, 50));
    shutdown.abort();
    expect(seen[0]?.signal.aborted).toBe(false);
  });
});
