// The daemon's client with several control-plane replicas (`--server
// A,B,C`), against real HTTP servers on 127.0.0.1: a dead replica (refused
// connection), one answering 503 and one that hangs are left for the next
// within the same deadline; calls stick to the replica that works; the read
// tool's POST moves on only when there is another replica; all down names
// every replica; bad lists are refused with the entry that is wrong.
// Answers that cannot be used (not JSON, an HTML page with 200, an invalid
// body, file bytes matching no sha256, a 401) move on too; a 404 or 403 is
// the answer and is never asked of another replica.

import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HttpControlClient } from '../src/daemon/control-plane/http-control-client.js';
import { parseServerUrls } from '../src/daemon/control-plane/replicas.js';
import { failure } from './helpers/fake-control-client.js';

type Behaviour = 'ok' | '503' | 'hang' | 'garbage' | 'html' | 'invalid' | 'flip' | '401' | '403' | '404';

interface Replica {
  readonly url: string;
  behaviour: Behaviour;
  hits: string[];
  readonly server: Server;
}

const SESSION = { sessionId: 'ses_1', kind: 'personal', creator: 'alice', mounted: [] };
const FILE = Buffer.from('# Duty\nbe kind\n');
const FILE_SHA = createHash('sha256').update(FILE).digest('hex');
const READ = { path: 'account/DUTY.md', sha256: 'a'.repeat(64), size: 1, contentBase64: 'eA==', mounted: false };
const replicas: Replica[] = [];
const clients: HttpControlClient[] = [];
let deadUrl: string;

async function startReplica(): Promise<Replica> {
  const replica = { behaviour: 'ok' as Behaviour, hits: [] as string[] } as Replica;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    replica.hits.push(`${req.method} ${req.url}`);
    req.resume();
    const b = replica.behaviour;
    if (b === 'hang') return; // never answers
    if (b === '503') {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { code: 'unavailable', message: 'session state unavailable' } }));
      return;
    }
    const refusal = { '401': ['unauthorized', 'unknown token'], '403': ['denied', 'ask your team lead'], '404': ['not_found', 'no such file here'] } as const;
    if (b === '401' || b === '403' || b === '404') {
      res.writeHead(Number(b), { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: refusal[b][0], message: refusal[b][1] } }));
      return;
    }
    if (b === 'garbage') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(Buffer.from('\u0000\u00ff<html>not what you asked for}{"', 'latin1'));
      return;
    }
    if (b === 'html') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><html><body>Please log in to the corporate proxy</body></html>');
      return;
    }
    if (req.url?.startsWith('/v1/files/') === true) {
      const body = Buffer.from(FILE);
      if (b === 'flip') body[3] = (body[3] ?? 0) ^ 0xff;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-kfs-sha256': FILE_SHA });
      res.end(b === 'invalid' ? Buffer.from('{}') : body);
      return;
    }
    if (b === 'invalid') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ sessionId: 42 }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(req.url === '/v1/read' ? READ : SESSION));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  Object.assign(replica, { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  return replica;
}

beforeAll(async () => {
  for (let i = 0; i < 3; i++) replicas.push(await startReplica());
  // A port nobody listens on: connections are refused, as for a replica killed with -9.
  const probe = await startReplica();
  deadUrl = probe.url;
  await new Promise<void>((resolve) => probe.server.close(() => resolve()));
});

afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  for (const r of replicas) {
    r.behaviour = 'ok';
    r.hits = [];
    r.server.closeAllConnections();
  }
});

afterAll(async () => {
  for (const r of replicas) await new Promise<void>((resolve) => r.server.close(() => resolve()));
});

function client(urls: string[], timeoutMs = 2000): HttpControlClient {
  const c = new HttpControlClient({ serverUrl: urls.join(','), token: 'tok', requestTimeoutMs: timeoutMs });
  clients.push(c);
  return c;
}

const a = () => replicas[0] as Replica;
const b = () => replicas[1] as Replica;
const c = () => replicas[2] as Replica;

describe('several replicas', () => {
  it('a dead first replica: the call succeeds on the next, and later calls stay there', async () => {
    const cl = client([deadUrl, a().url, b().url]);
    const started = Date.now();
    expect(await cl.session()).toMatchObject({ sessionId: 'ses_1' });
    expect(Date.now() - started).toBeLessThan(1000); // no backoff before an untried replica
    expect(cl.serverUrl).toBe(a().url);
    await cl.session();
    await cl.session();
    expect(a().hits).toHaveLength(3);
    expect(b().hits).toHaveLength(0);
  });

  it('a replica answering 503 (its state unreachable) is left for the next', async () => {
    a().behaviour = '503';
    const cl = client([a().url, b().url]);
    expect(await cl.session()).toMatchObject({ sessionId: 'ses_1' });
    expect(a().hits).toHaveLength(1);
    expect(b().hits).toHaveLength(1);
    expect(cl.serverUrl).toBe(b().url);
  });

  it('a hung replica gets half the deadline, then the next answers inside it', async () => {
    a().behaviour = 'hang';
    const cl = client([a().url, b().url], 1000);
    const started = Date.now();
    expect(await cl.session()).toMatchObject({ sessionId: 'ses_1' });
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(450);
    expect(took).toBeLessThan(1000);
    expect(b().hits).toHaveLength(1);
  });

  it('a single hung server still gets the whole deadline (unchanged behaviour)', async () => {
    a().behaviour = 'hang';
    const cl = client([a().url], 600);
    const started = Date.now();
    const err = await failure(cl.session());
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain('no answer within 600 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });

  it("the read tool's POST moves on from a dead replica; with one server it is not retried", async () => {
    const several = client([deadUrl, a().url]);
    expect(await several.read({ path: 'account/DUTY.md', mount: false })).toMatchObject({ path: 'account/DUTY.md' });
    expect(a().hits).toEqual(['POST /v1/read']);
    const one = client([deadUrl]);
    const err = await failure(one.read({ path: 'account/DUTY.md', mount: false }));
    expect(err.code).toBe('unavailable');
  });

  it('every replica down: one unavailable error naming them all, within the deadline', async () => {
    a().behaviour = '503';
    b().behaviour = '503';
    c().behaviour = '503';
    const cl = client([a().url, b().url, c().url, deadUrl], 1500);
    const started = Date.now();
    const err = await failure(cl.session());
    expect(Date.now() - started).toBeLessThan(1500 + 500);
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain(`replicas ${a().url}, ${b().url}, ${c().url}, ${deadUrl}`);
    for (const r of [a(), b(), c()]) expect(r.hits.length).toBeGreaterThanOrEqual(1);
  });
});

describe('which answers move on to the next replica', () => {
  it('an answer that cannot be used (not JSON, an HTML page with 200, an invalid body, a 401) is left for the next replica', async () => {
    for (const behaviour of ['garbage', 'html', 'invalid', '401'] as const) {
      a().behaviour = behaviour;
      a().hits = [];
      b().hits = [];
      const cl = client([a().url, b().url]);
      expect(await cl.session()).toMatchObject({ sessionId: 'ses_1' });
      expect(await cl.read({ path: 'account/DUTY.md', mount: false })).toMatchObject({ path: 'account/DUTY.md' });
      expect(a().hits, behaviour).toEqual(['GET /v1/session']);
      expect(b().hits, behaviour).toEqual(['GET /v1/session', 'POST /v1/read']);
      expect(cl.serverUrl).toBe(b().url);
    }
  });

  it.each(['flip', 'garbage', 'html', 'invalid'] as const)('file bytes matching neither the sha256 asked for nor the server\'s own (%s) are fetched from the next replica', async (behaviour) => {
    a().behaviour = behaviour;
    const cl = client([a().url, b().url]);
    const got = await cl.file('account', 'DUTY.md', 1024, FILE_SHA);
    expect(got.body.equals(FILE)).toBe(true);
    expect(a().hits).toHaveLength(1);
    expect(b().hits).toHaveLength(1);
  });

  it('a 404 or a 403 is the answer: never asked of the next replica, its code and message kept', async () => {
    const cases = [
      ['404', 'not_found', 'no such file here'],
      ['403', 'denied', 'ask your team lead'],
    ] as const;
    for (const [behaviour, code, message] of cases) {
      a().behaviour = behaviour;
      a().hits = [];
      const cl = client([a().url, b().url]);
      for (const call of [() => cl.file('account', 'DUTY.md', 1024, FILE_SHA), () => cl.read({ path: 'account/DUTY.md', mount: false }), () => cl.grant('team_x')]) {
        const err = await failure(call());
        expect(err.code, behaviour).toBe(code);
        expect(err.message).toBe(message);
      }
      expect(a().hits).toHaveLength(3);
      expect(b().hits).toHaveLength(0);
      expect(cl.serverUrl).toBe(a().url);
    }
  });

  it('every replica answering 401: unauthorized (the token is refused), not unavailable', async () => {
    a().behaviour = '401';
    b().behaviour = '401';
    const err = await failure(client([a().url, b().url]).session());
    expect(err.code).toBe('unauthorized');
    expect(a().hits).toHaveLength(1);
    expect(b().hits).toHaveLength(1);
  });

  it('one server: an unusable answer is not asked again; file bytes go to the caller, which verifies them', async () => {
    a().behaviour = 'garbage';
    const one = client([a().url]);
    expect((await failure(one.session())).code).toBe('unavailable');
    a().behaviour = 'flip';
    const got = await one.file('account', 'DUTY.md', 1024, FILE_SHA);
    expect(got.body.equals(FILE)).toBe(false);
    expect(got.sha256).toBe(FILE_SHA);
    a().behaviour = '401';
    expect((await failure(one.session())).code).toBe('unauthorized');
    expect(a().hits).toHaveLength(3);
  });
});

describe('--server lists', () => {
  it('accepts one URL or several, trimmed and normalised', () => {
    expect(parseServerUrls('http://a:1/')).toEqual(['http://a:1']);
    expect(parseServerUrls('http://a:1, http://b:2/base/')).toEqual(['http://a:1', 'http://b:2/base']);
  });

  it('refuses an empty entry, a bad URL and mixed schemes, naming what is wrong', () => {
    expect(() => parseServerUrls('http://a:1,,http://b:2')).toThrow(/an empty URL in the list/);
    expect(() => parseServerUrls('http://a:1,b:2')).toThrow(/must be an http:\/\/ or https:\/\/ URL, not "b:2"/);
    expect(() => parseServerUrls('http://a:1,not a url')).toThrow(/invalid --server URL "not a url"/);
    expect(() => new HttpControlClient({ serverUrl: 'http://a:1,https://b:2', token: 't', requestTimeoutMs: 1000 })).toThrow(/same scheme/);
  });
});
