// The client library (`import { KnowledgeClient } from 'knowledgefs'`) against
// real unix sockets: the daemon's own control socket over an in-memory backend,
// and hand-made servers for the faults (silent, garbage, connections dropped).
// Checks the typed results, the error class and code of every failure,
// arguments that cannot be right never reaching the daemon, one kept-alive
// connection for many calls (and a fresh one when the daemon dropped it).
// All in this process, against src/ (so StrykerJS runs it); the package entry
// as a harness sees it (another process, tsc) is client-package.test.ts.

import { chmodSync, chownSync, linkSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  DaemonUnreachableError,
  DeniedError,
  IntegrityError,
  InvalidArgumentError,
  KnowledgeClient,
  NotFoundError,
  UnavailableError,
  isTemporary,
} from '../src/client/index.js';
import { errorFromWire } from '../src/client/errors.js';
import { controlSocketPath } from '../src/client/socket-path.js';
import { SocketTransport } from '../src/client/socket-transport.js';
import { socketTrustProblem } from '../src/client/socket-trust.js';
import { ERROR_CODES, KnowledgeError as CoreKnowledgeError, type ErrorCode } from '../src/core/errors.js';
import { failure } from './helpers/fake-control-client.js';
import { startMemoryDaemon, sha256, type MemoryDaemon } from './helpers/memory-daemon.js';

const dir = mkdtempSync(join(tmpdir(), 'kfs-client-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let daemon: MemoryDaemon;
let client: KnowledgeClient;
beforeEach(async () => {
  daemon = await startMemoryDaemon();
  client = new KnowledgeClient({ socketPath: daemon.socketPath, cwd: '/' });
});
afterEach(async () => {
  client.close();
  await daemon.close();
});

/** An HTTP server on a unix socket that counts connections; `handler` answers. */
async function fakeDaemon(handler: Parameters<typeof createHttpServer>[1]): Promise<{ path: string; server: Server; connections: () => number }> {
  const path = join(dir, `fake-${Math.random().toString(36).slice(2)}.sock`);
  const server = createHttpServer(handler);
  let n = 0;
  server.on('connection', () => { n++; });
  await new Promise<void>((r) => server.listen(path, r));
  return { path, server, connections: () => n };
}

describe('KnowledgeClient results', () => {
  it('reads, pages and reports a mount, typed', async () => {
    const duty = await client.read('knowledge/account/DUTY.md');
    expect(duty).toEqual({ path: 'knowledge/account/DUTY.md', content: '# Account\n', sha256: sha256('# Account\n'), size: 10, offset: 0, totalChars: 10, truncated: false, nextOffset: null, mounted: false });
    const page = await client.read('knowledge/team_search/DUTY.md', { offset: 2, limit: 6 });
    expect(page).toMatchObject({ content: 'Search', offset: 2, truncated: true, nextOffset: 8, mounted: true, totalChars: 19 });
    const rest = await client.read('knowledge/team_search/DUTY.md', { offset: page.nextOffset ?? -1 });
    expect(rest).toMatchObject({ content: ' ünïcødé 😀\n', truncated: false, nextOffset: null, mounted: false });
    // A relative path resolves from the cwd given for the call.
    expect((await client.read('DUTY.md', { cwd: '/runner/knowledge/team_payments' })).path).toBe('knowledge/team_payments/DUTY.md');
    expect(daemon.backend.calls).toEqual([
      'read account/DUTY.md mount=false',
      'read team_search/DUTY.md mount=true',
      'refreshPlan',
      'read team_search/DUTY.md mount=false',
      'read team_payments/DUTY.md mount=false',
    ]);
  });

  it('returns the manifest and the reminder exactly, each change once', async () => {
    daemon.backend.manifestText = '# Knowledge\n\nguidance ✓\n';
    expect(await client.manifest()).toEqual({ text: '# Knowledge\n\nguidance ✓\n', sha256: sha256('# Knowledge\n\nguidance ✓\n') });
    daemon.backend.pendingChanged = ['account/DUTY.md'];
    const first = await client.reminder();
    expect(first).toEqual({ text: "Today's date is 2025-01-01.\nChanged since you read them: account/DUTY.md\n", date: '2025-01-01', changed: ['account/DUTY.md'], deleted: [] });
    expect((await client.reminder()).changed).toEqual([]);
  });

  it('uses $KNOWLEDGEFS_SOCKET when no socket path is given', () => {
    const saved = process.env.KNOWLEDGEFS_SOCKET;
    process.env.KNOWLEDGEFS_SOCKET = '/somewhere/control.sock';
    try {
      expect(new KnowledgeClient().socketPath).toBe('/somewhere/control.sock');
      expect(new KnowledgeClient({ socketPath: '/x.sock' }).socketPath).toBe('/x.sock');
    } finally {
      if (saved === undefined) delete process.env.KNOWLEDGEFS_SOCKET;
      else process.env.KNOWLEDGEFS_SOCKET = saved;
    }
  });
});

describe('KnowledgeClient errors', () => {
  it('throws the class and stable code of each failure the daemon reports', async () => {
    const hidden = await failure(client.read('knowledge/team_storage/DUTY.md'));
    daemon.backend.hidden.clear();
    const missing = await failure(client.read('knowledge/team_storage/DUTY.md'));
    expect(hidden).toBeInstanceOf(NotFoundError);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect({ name: hidden.name, code: hidden.code, message: hidden.message }).toEqual({ name: 'NotFoundError', code: 'not_found', message: 'knowledge/team_storage/DUTY.md: no such file' });
    expect(missing.message).toBe(hidden.message);
    expect(isTemporary(hidden)).toBe(false);

    daemon.backend.denied.add('team_search');
    const denied = await failure(client.read('knowledge/team_search/DUTY.md'));
    expect(denied).toBeInstanceOf(DeniedError);
    expect(denied).toMatchObject({ code: 'denied', message: 'this session belongs to team payments and cannot load team_search' });

    const escape = await failure(client.read('knowledge/../etc/passwd'));
    expect(escape).toBeInstanceOf(InvalidArgumentError);

    daemon.backend.corrupt = true;
    const corrupt = await failure(client.read('knowledge/account/DUTY.md'));
    expect(corrupt).toBeInstanceOf(IntegrityError);
    expect(isTemporary(corrupt)).toBe(true);
    daemon.backend.corrupt = false;

    daemon.backend.down = new CoreKnowledgeError('membership_unavailable', 'membership source http://m failed');
    const members = await failure(client.read('knowledge/team_search/x'));
    expect(members).toBeInstanceOf(UnavailableError);
    expect(members.code).toBe('membership_unavailable');
    daemon.backend.down = new CoreKnowledgeError('unavailable', 'control plane http://cp is unreachable');
    const cp = await failure(client.manifest());
    expect(cp).toBeInstanceOf(UnavailableError);
    expect(cp).not.toBeInstanceOf(DaemonUnreachableError);
    expect(cp).toMatchObject({ code: 'unavailable', message: 'control plane http://cp is unreachable' });
    expect(isTemporary(cp)).toBe(true);
    // Every class is a KnowledgeError, the one the CLI and older callers catch.
    for (const e of [hidden, denied, escape, corrupt, members, cp]) expect(e).toBeInstanceOf(CoreKnowledgeError);
  });

  it('rejects arguments that cannot be right without calling the daemon', async () => {
    const bad: [unknown, object][] = [
      ['', {}],
      ['knowledge/a\0b', {}],
      [42, {}],
      ['knowledge/account/DUTY.md', { offset: -1 }],
      ['knowledge/account/DUTY.md', { offset: 1.5 }],
      ['knowledge/account/DUTY.md', { offset: '3' }],
      ['knowledge/account/DUTY.md', { limit: 0 }],
      ['knowledge/account/DUTY.md', { limit: 100_001 }],
      ['knowledge/account/DUTY.md', { limit: Number.NaN }],
    ];
    for (const [path, opts] of bad) {
      const err = await failure(client.read(path as string, opts));
      expect(err, JSON.stringify([path, opts])).toBeInstanceOf(InvalidArgumentError);
    }
    expect((await failure(client.read('knowledge/account/DUTY.md', { limit: 0 }))).message).toBe('limit must be a whole number in 1..100000 (got 0)');
    expect(daemon.backend.calls).toEqual([]);
    expect(() => new KnowledgeClient({ timeoutMs: 0 })).toThrow(InvalidArgumentError);
  });

  it('says how to find the daemon when nothing listens on the socket', async () => {
    const path = join(dir, 'nope.sock');
    const c = new KnowledgeClient({ socketPath: path });
    const err = await failure(c.manifest());
    expect(err).toBeInstanceOf(DaemonUnreachableError);
    expect(err).toMatchObject({ code: 'unavailable', reason: 'no_daemon', socketPath: path });
    expect(err.message).toBe(`no knowledgefs mount daemon at ${path}: is \`knowledgefs mount\` running? set --socket or KNOWLEDGEFS_SOCKET`);
    expect(isTemporary(err)).toBe(true);
  });

  it('sends nothing to a socket another user could have put in place', async () => {
    const d = await fakeDaemon((_req, res) => { res.end('{"ok":true,"text":"spoofed","sha256":"x"}'); });
    const open = join(dir, `open-${process.pid}`);
    mkdirSync(open);
    chmodSync(open, 0o777); // writable by others, no sticky bit: anyone could swap the socket
    const spoofPath = join(open, 'control.sock');
    renameSync(d.path, spoofPath);
    const c = new KnowledgeClient({ socketPath: spoofPath });
    try {
      const err = await failure(c.manifest());
      expect(err).toBeInstanceOf(DaemonUnreachableError);
      expect(err).toMatchObject({ code: 'unavailable', reason: 'untrusted' });
      expect(err.message).toBe(
        `refusing to use the control socket ${spoofPath}: ${open} is writable by other users (mode 0777), so another user could stand in for the mount daemon; ` +
          'use a socket in a directory only root or you can write (see --socket)',
      );
      expect(d.connections()).toBe(0);
    } finally {
      c.close();
      d.server.close();
    }
  });

  it('gives up on a daemon that never answers, or answers garbage', async () => {
    const silent = await fakeDaemon(() => { /* accept, never answer */ });
    const garbage = await fakeDaemon((_req, res) => { res.end('<html>not json'); });
    const shapeless = await fakeDaemon((_req, res) => { res.writeHead(500).end('{"ok":false,"error":{"code":"no_such_code"}}'); });
    try {
      const c1 = new KnowledgeClient({ socketPath: silent.path, timeoutMs: 300 });
      expect(await failure(c1.status())).toMatchObject({ reason: 'no_answer', code: 'unavailable', message: `the mount daemon at ${silent.path} did not answer within 300 ms` });
      c1.close();
      const c2 = new KnowledgeClient({ socketPath: garbage.path });
      expect(await failure(c2.manifest())).toMatchObject({ reason: 'bad_answer', message: `the mount daemon at ${garbage.path} answered 200 with a body that is not JSON` });
      c2.close();
      const c3 = new KnowledgeClient({ socketPath: shapeless.path });
      expect(await failure(c3.reminder())).toMatchObject({ reason: 'bad_answer', message: `the mount daemon at ${shapeless.path} answered 500 without a usable result` });
      c3.close();
    } finally {
      for (const s of [silent, garbage, shapeless]) { s.server.closeAllConnections(); s.server.close(); }
    }
  });

  it('reports a connection dropped before any answer', async () => {
    const path = join(dir, `drop-${process.pid}.sock`);
    let requests = 0;
    const server = createNetServer((conn) => conn.once('data', () => { requests++; conn.destroy(); }));
    await new Promise<void>((r) => server.listen(path, r));
    const c = new KnowledgeClient({ socketPath: path });
    try {
      expect(await failure(c.status())).toMatchObject({ reason: 'no_answer', message: `the mount daemon at ${path} closed the connection before answering` });
      // A fresh connection dropped: the daemon may have seen the request, so it is not sent again.
      expect(requests).toBe(1);
    } finally {
      c.close();
      server.close();
    }
  });
});

describe('KnowledgeClient connections', () => {
  it('keeps one connection for many calls, and sends again on a fresh one when the daemon closed it', async () => {
    let requests = 0;
    let dropNext = false;
    const d = await fakeDaemon((req, res) => {
      requests++;
      if (dropNext) {
        dropNext = false;
        req.socket.destroy(); // as a daemon closing an idle connection just as the request arrives
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, text: `m${requests}`, sha256: 'x' }));
    });
    const c = new KnowledgeClient({ socketPath: d.path });
    try {
      for (let i = 0; i < 5; i++) await c.manifest();
      expect(d.connections()).toBe(1);
      dropNext = true;
      expect((await c.manifest()).text).toBe('m7');
      expect(d.connections()).toBe(2);
    } finally {
      c.close();
      d.server.closeAllConnections();
      d.server.close();
    }
  });
});

/** Each request a fake daemon received: method, route, headers and body. */
interface Seen { method: string; url: string; headers: Record<string, string | string[] | undefined>; body: string }

/** A fake daemon that records each request and answers `answer(seen)` as JSON. */
async function recordingDaemon(answer: (seen: Seen) => unknown): Promise<{ path: string; server: Server; seen: Seen[] }> {
  const seen: Seen[] = [];
  const d = await fakeDaemon((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString('utf8'); });
    req.on('end', () => {
      const s = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      seen.push(s);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer(s)));
    });
  });
  return { path: d.path, server: d.server, seen };
}

function stop(server: Server): void {
  server.closeAllConnections();
  server.close();
}

describe('KnowledgeClient requests on the wire', () => {
  it('sends each call to its route with its method, and a JSON body with its length only for POST', async () => {
    const d = await recordingDaemon((s) => {
      if (s.url === '/read') return { ok: true, path: 'knowledge/account/DUTY.md', content: 'abc', sha256: 'h', size: 3, offset: 0, totalChars: 3, truncated: false, mounted: false };
      if (s.url === '/can-load') return { ok: true, for: 'skill', answers: [{ scope: 'account', allowed: true }] };
      if (s.url === '/manifest') return { ok: true, text: 'M', sha256: 'm', extra: 1 };
      if (s.url === '/reminder') return { ok: true, text: 'R', date: 'd', changed: ['a'], deleted: ['b'], extra: 1 };
      return { ok: true, mountpoint: '/m', sessionId: 's', planVersion: 'v', files: 1, scopes: ['account'], prefetch: { done: 0, total: 1 } };
    });
    const c = new KnowledgeClient({ socketPath: d.path, cwd: '/work' });
    try {
      await c.read('knowledge/account/DUTY.md', { offset: 3 });
      await c.read('knowledge/account/DUTY.md', { limit: 7 });
      await c.read('knowledge/account/DUTY.md');
      expect(await c.canLoad('account', { for: 'skill' })).toEqual({ for: 'skill', answers: [{ scope: 'account', allowed: true }], allowed: true });
      // Only the fields of each result, not whatever else the daemon sent.
      expect(await c.manifest()).toEqual({ text: 'M', sha256: 'm' });
      expect(await c.reminder()).toEqual({ text: 'R', date: 'd', changed: ['a'], deleted: ['b'] });
      expect(await c.status()).toEqual({ mountpoint: '/m', sessionId: 's', planVersion: 'v', files: 1, scopes: ['account'], prefetch: { done: 0, total: 1 } });
      expect(d.seen.map((s) => `${s.method} ${s.url}`)).toEqual(['POST /read', 'POST /read', 'POST /read', 'POST /can-load', 'GET /manifest', 'GET /reminder', 'GET /status']);
      expect(d.seen.slice(0, 4).map((s) => JSON.parse(s.body))).toEqual([
        { path: 'knowledge/account/DUTY.md', cwd: '/work', offset: 3 },
        { path: 'knowledge/account/DUTY.md', cwd: '/work', limit: 7 },
        { path: 'knowledge/account/DUTY.md', cwd: '/work' },
        { scopes: ['account'], for: 'skill' },
      ]);
      const post = d.seen[0]!;
      expect(post.headers['content-type']).toBe('application/json');
      expect(post.headers['content-length']).toBe(String(Buffer.byteLength(post.body)));
      const get = d.seen[4]!;
      expect(get.body).toBe('');
      expect(get.headers['content-type']).toBeUndefined();
      expect(get.headers['content-length']).toBeUndefined();
    } finally {
      c.close();
      stop(d.server);
    }
  });

  it('resolves a relative path from the call\'s cwd, else the client\'s, else the process\'s', async () => {
    const d = await recordingDaemon(() => ({ ok: true, path: 'p', content: '', sha256: 'h', size: 0, offset: 0, totalChars: 0, truncated: false }));
    const withCwd = new KnowledgeClient({ socketPath: d.path, cwd: '/client' });
    const without = new KnowledgeClient({ socketPath: d.path });
    try {
      await withCwd.read('DUTY.md', { cwd: '/call' });
      await withCwd.read('DUTY.md');
      await without.read('DUTY.md', { cwd: '/call' });
      await without.read('DUTY.md');
      expect(d.seen.map((s) => JSON.parse(s.body).cwd)).toEqual(['/call', '/client', '/call', process.cwd()]);
    } finally {
      withCwd.close();
      without.close();
      stop(d.server);
    }
  });

  it('counts the offset that continues a cut page in characters, not UTF-16 units, and reports mounted only when true', async () => {
    // '# Search ünïcødé 😀\n': characters 15..17 are 'é', ' ', '😀' (one character, two UTF-16 units).
    const page = await client.read('knowledge/team_search/DUTY.md', { offset: 15, limit: 3 });
    expect(page).toMatchObject({ content: 'é 😀', offset: 15, totalChars: 19, truncated: true, nextOffset: 18, mounted: true });
    const again = await client.read('knowledge/team_search/DUTY.md', { offset: 18 });
    expect(again).toMatchObject({ content: '\n', truncated: false, nextOffset: null, mounted: false });
    const d = await recordingDaemon(() => ({ ok: true, path: 'p', content: 'x', sha256: 'h', size: 1, offset: 0, totalChars: 1, truncated: false, mounted: 'yes' }));
    const c = new KnowledgeClient({ socketPath: d.path });
    try {
      expect((await c.read('knowledge/account/x')).mounted).toBe(false);
    } finally {
      c.close();
      stop(d.server);
    }
  });

  it('answers can-load per scope, allowed only when every scope is', async () => {
    daemon.backend.denied.add('team_search');
    const mixed = await client.canLoad(['account', 'team_search', 'team_storage'], { for: 'tool' });
    expect(mixed.for).toBe('tool');
    expect(mixed.allowed).toBe(false);
    expect(mixed.answers.map((a) => [a.scope, a.allowed, 'error' in a ? a.error.code : undefined])).toEqual([['account', true, undefined], ['team_search', false, 'denied'], ['team_storage', false, 'not_found']]);
    const one = await client.canLoad('team_payments', { for: 'knowledge' });
    expect(one).toEqual({ for: 'knowledge', answers: [{ scope: 'team_payments', allowed: true }], allowed: true });
    expect(daemon.backend.calls).toEqual(['can-load account,team_search,team_storage for=tool', 'can-load team_payments for=knowledge']);
  });

  it('refuses a malformed can-load as InvalidArgumentError with the reason, before the daemon', async () => {
    const badScope = await failure(client.canLoad('payments', { for: 'skill' }));
    expect(badScope).toBeInstanceOf(InvalidArgumentError);
    expect(badScope.message).toBe('"payments" is not a scope name: the account is "account", a team "team_<id>" (as on the mount)');
    const badKind = await failure(client.canLoad(['account'], { for: 'mcp' as never }));
    expect(badKind).toBeInstanceOf(InvalidArgumentError);
    expect(badKind.message).toMatch(/^"for" must be one of .*, not "mcp"$/);
    const noKind = await failure(client.canLoad(['account'], undefined as never));
    expect(noKind.message).toMatch(/^"for" must be one of [^"]*$/);
    expect(daemon.backend.calls).toEqual([]);
  });

  it('closes its kept-alive connection on close, and works again after, on a new one', async () => {
    let closed = 0;
    const d = await fakeDaemon((_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"text":"M","sha256":"m"}'); });
    d.server.on('connection', (sock) => sock.on('close', () => { closed++; }));
    const c = new KnowledgeClient({ socketPath: d.path });
    try {
      await c.manifest();
      await c.manifest();
      expect(d.connections()).toBe(1);
      c.close();
      for (let i = 0; i < 200 && closed === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(closed).toBe(1);
      expect((await c.manifest()).text).toBe('M');
      expect(d.connections()).toBe(2);
    } finally {
      c.close();
      stop(d.server);
    }
  });

  it('refuses a path with NUL before anything is sent', async () => {
    const d = await recordingDaemon(() => ({ ok: false, error: { code: 'invalid_argument', message: '"knowledge/a\\u0000b": NUL character in path' } }));
    const c = new KnowledgeClient({ socketPath: d.path });
    try {
      expect((await failure(c.read('knowledge/a\0b'))).message).toBe('"knowledge/a\\u0000b": NUL character in path');
      expect(d.seen).toEqual([]);
    } finally {
      c.close();
      stop(d.server);
    }
  });

  it('does not send again an answer broken off on a kept-alive connection', async () => {
    let requests = 0;
    const d = await fakeDaemon((req, res) => {
      requests++;
      if (requests === 1) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"text":"M","sha256":"m"}');
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"ok":true,', () => req.socket.destroy());
    });
    const c = new KnowledgeClient({ socketPath: d.path });
    try {
      await c.manifest();
      expect(await failure(c.manifest())).toMatchObject({ reason: 'no_answer', message: `the mount daemon at ${d.path} broke off its answer` });
      await new Promise((r) => setTimeout(r, 50));
      expect(requests).toBe(2);
      expect(d.connections()).toBe(1);
    } finally {
      c.close();
      stop(d.server);
    }
  });
});

describe('KnowledgeClient argument checks', () => {
  it('names the argument, its range and the value given', async () => {
    const message = async (path: unknown, opts: object) => (await failure(client.read(path as string, opts))).message;
    expect(await message('knowledge/account/DUTY.md', { offset: -1 })).toBe('offset must be a whole number in 0.. (got -1)');
    expect(await message('knowledge/account/DUTY.md', { offset: Number.MAX_SAFE_INTEGER + 1 })).toBe(`offset must be a whole number in 0.. (got ${Number.MAX_SAFE_INTEGER + 1})`);
    expect(await message('knowledge/account/DUTY.md', { limit: 100_001 })).toBe('limit must be a whole number in 1..100000 (got 100001)');
    expect(await message('knowledge/account/DUTY.md', { limit: '5' })).toBe('limit must be a whole number in 1..100000 (got 5)');
    expect(await message('', {})).toBe('path must be a non-empty string, e.g. knowledge/account/DUTY.md');
    expect(await message(undefined, {})).toBe('path must be a non-empty string, e.g. knowledge/account/DUTY.md');
    expect(await message('knowledge/a\0b', {})).toBe('"knowledge/a\\u0000b": NUL character in path');
    expect(daemon.backend.calls).toEqual([]);
    expect(() => new KnowledgeClient({ timeoutMs: 0 })).toThrow('timeoutMs must be a whole number in 1..2147483647 (got 0)');
    expect(() => new KnowledgeClient({ timeoutMs: 2 ** 31 })).toThrow(`timeoutMs must be a whole number in 1..2147483647 (got ${2 ** 31})`);
  });

  it('accepts the bounds themselves', async () => {
    expect((await client.read('knowledge/account/DUTY.md', { offset: 0, limit: 1 })).content).toBe('#');
    expect((await client.read('knowledge/account/DUTY.md', { offset: 9, limit: 100_000 })).content).toBe('\n');
    expect((await client.read('knowledge/account/DUTY.md', { offset: Number.MAX_SAFE_INTEGER })).content).toBe('');
    expect(new KnowledgeClient({ timeoutMs: 1 })).toBeInstanceOf(KnowledgeClient);
    expect(new KnowledgeClient({ timeoutMs: 2 ** 31 - 1 })).toBeInstanceOf(KnowledgeClient);
  });
});

describe('error classes', () => {
  it('maps each code the daemon reports to its class, name and code', () => {
    const cases: [ErrorCode, Function, string][] = [
      ['not_found', NotFoundError, 'NotFoundError'],
      ['denied', DeniedError, 'DeniedError'],
      ['invalid_argument', InvalidArgumentError, 'InvalidArgumentError'],
      ['unavailable', UnavailableError, 'UnavailableError'],
      ['membership_unavailable', UnavailableError, 'UnavailableError'],
      ['integrity', IntegrityError, 'IntegrityError'],
      ['too_large', CoreKnowledgeError, 'KnowledgeError'],
      ['internal', CoreKnowledgeError, 'KnowledgeError'],
    ];
    for (const [code, cls, name] of cases) {
      const err = errorFromWire(code, `msg ${code}`);
      expect(err, code).toBeInstanceOf(cls);
      expect({ name: err.name, code: err.code, message: err.message }).toEqual({ name, code, message: `msg ${code}` });
    }
    expect(errorFromWire('too_large', 'x')).not.toBeInstanceOf(UnavailableError);
  });

  it('is temporary only for outages and damaged bytes', () => {
    const temporary = ERROR_CODES.filter((code) => isTemporary(new CoreKnowledgeError(code, 'x')));
    expect(temporary).toEqual(['unavailable', 'membership_unavailable', 'integrity']);
    expect(isTemporary(Object.assign(new Error('x'), { code: 'unavailable' }))).toBe(false);
    expect(isTemporary('unavailable')).toBe(false);
  });

  it('keeps what the unreachable-daemon error says: socket, reason, cause', () => {
    const cause = new Error('ECONNREFUSED');
    const err = new DaemonUnreachableError('/s.sock', 'no_daemon', 'nobody there', { cause });
    expect(err).toBeInstanceOf(UnavailableError);
    expect({ name: err.name, code: err.code, reason: err.reason, socketPath: err.socketPath, message: err.message, cause: err.cause }).toEqual({
      name: 'DaemonUnreachableError', code: 'unavailable', reason: 'no_daemon', socketPath: '/s.sock', message: 'nobody there', cause,
    });
    expect(new UnavailableError('down').code).toBe('unavailable');
    expect(new UnavailableError('down', 'membership_unavailable', { cause }).cause).toBe(cause);
  });
});

/** Runs `fn` with process.getuid answering `uid`, or missing altogether (as on Windows) for undefined. */
function asUid<T>(uid: number | undefined, fn: () => T): T {
  const saved = Object.getOwnPropertyDescriptor(process, 'getuid');
  Object.defineProperty(process, 'getuid', { value: uid === undefined ? undefined : () => uid, configurable: true, writable: true });
  try {
    return fn();
  } finally {
    if (saved === undefined) delete (process as { getuid?: unknown }).getuid;
    else Object.defineProperty(process, 'getuid', saved);
  }
}

describe('the control socket path', () => {
  it('takes the path given, else $KNOWLEDGEFS_SOCKET, else the standard one', () => {
    expect(controlSocketPath('/given.sock', { KNOWLEDGEFS_SOCKET: '/env.sock' })).toBe('/given.sock');
    expect(controlSocketPath('', { KNOWLEDGEFS_SOCKET: '/env.sock' })).toBe('/env.sock');
    expect(controlSocketPath(undefined, { KNOWLEDGEFS_SOCKET: '/env.sock' })).toBe('/env.sock');
    const uid = process.getuid?.() ?? -1;
    expect(controlSocketPath(undefined, {})).toBe(uid === 0 ? '/run/knowledgefs/control.sock' : join(tmpdir(), `knowledgefs-${uid}`, 'control.sock'));
    expect(asUid(1000, () => controlSocketPath(undefined, {}))).toBe(join(tmpdir(), 'knowledgefs-1000', 'control.sock'));
    expect(asUid(0, () => controlSocketPath(undefined, {}))).toBe('/run/knowledgefs/control.sock');
    expect(asUid(undefined, () => controlSocketPath(undefined, {}))).toBe(join(tmpdir(), 'knowledgefs--1', 'control.sock'));
  });
});

describe('socket trust', () => {
  it('says what is missing: the directory, or the socket in it', () => {
    expect(socketTrustProblem('/nonexistent-kfs-dir/control.sock')).toEqual({ ok: false, missing: true, problem: '/nonexistent-kfs-dir: ENOENT' });
    expect(socketTrustProblem(join(dir, 'absent.sock'))).toEqual({ ok: false, missing: true, problem: `${join(dir, 'absent.sock')}: ENOENT` });
  });

  it('refuses what is not a socket, a socket owned by another user, a socket under an open directory', async () => {
    const file = join(dir, `plain-${process.pid}`);
    writeFileSync(file, '');
    expect(socketTrustProblem(file)).toEqual({ ok: false, missing: false, problem: `${file} is not a socket` });
    const d = await fakeDaemon(() => undefined);
    try {
      expect(socketTrustProblem(d.path)).toEqual({ ok: true });
      if (process.getuid?.() === 0) {
        chownSync(d.path, 4321, 4321);
        expect(socketTrustProblem(d.path)).toEqual({ ok: false, missing: false, problem: `${d.path} is owned by uid 4321, not by root` });
        // Trusted by its owner (the directories above are root's), by default the calling process's user.
        expect(socketTrustProblem(d.path, 4321)).toEqual({ ok: true });
        expect(asUid(4321, () => socketTrustProblem(d.path))).toEqual({ ok: true });
        // Without getuid (not POSIX) the caller counts as root.
        expect(asUid(undefined, () => socketTrustProblem(d.path))).toEqual({ ok: false, missing: false, problem: `${d.path} is owned by uid 4321, not by root` });
      }
      const open = join(dir, `open2-${process.pid}`);
      mkdirSync(open);
      chmodSync(open, 0o777);
      const inOpen = join(open, 'control.sock');
      renameSync(d.path, inOpen);
      expect(socketTrustProblem(inOpen)).toEqual({ ok: false, missing: false, problem: `${open} is writable by other users (mode 0777)` });
    } finally {
      d.server.close();
    }
  });

  it('resolves a relative socket path from the working directory', () => {
    expect(socketTrustProblem('kfs-relative-absent.sock')).toEqual({ ok: false, missing: true, problem: `${join(process.cwd(), 'kfs-relative-absent.sock')}: ENOENT` });
  });
});

describe('SocketTransport failures', () => {
  it('reports a socket nobody listens on any more as no daemon, with the cause', async () => {
    const server = createNetServer();
    const live = join(dir, `live-${process.pid}.sock`);
    const stale = join(dir, `stale-${process.pid}.sock`);
    await new Promise<void>((r) => server.listen(live, r));
    linkSync(live, stale); // a second name for the socket, which outlives the listener
    await new Promise<void>((r) => server.close(() => r()));
    const t = new SocketTransport(stale, 1000);
    try {
      const err = await failure(t.call('GET', '/status'));
      expect(err).toBeInstanceOf(DaemonUnreachableError);
      expect(err).toMatchObject({ reason: 'no_daemon', socketPath: stale, message: `no knowledgefs mount daemon at ${stale}: is \`knowledgefs mount\` running? set --socket or KNOWLEDGEFS_SOCKET` });
      expect((err.cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
      // Missing altogether: refused before connecting, so there is no cause.
      const missing = await failure(new SocketTransport(join(dir, 'gone.sock')).call('GET', '/status'));
      expect(missing).toMatchObject({ reason: 'no_daemon' });
      expect('cause' in missing).toBe(false);
    } finally {
      t.close();
    }
  });

  it('gives the time bound in seconds from one second up', async () => {
    const silent = await fakeDaemon(() => { /* never answers */ });
    const t = new SocketTransport(silent.path, 1000);
    try {
      expect(await failure(t.call('GET', '/status'))).toMatchObject({ reason: 'no_answer', message: `the mount daemon at ${silent.path} did not answer within 1 s` });
    } finally {
      t.close();
      stop(silent.server);
    }
  });

  it('reports an answer broken off after it started', async () => {
    const d = await fakeDaemon((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"ok":true,', () => req.socket.destroy());
    });
    const t = new SocketTransport(d.path);
    try {
      expect(await failure(t.call('GET', '/status'))).toMatchObject({ code: 'unavailable', reason: 'no_answer', message: `the mount daemon at ${d.path} broke off its answer` });
    } finally {
      t.close();
      stop(d.server);
    }
  });

  it('refuses an answer over 64 MiB as too large', async () => {
    const cap = 64 * 1024 * 1024;
    const over = Buffer.alloc(cap + 1, 'a');
    const d = await fakeDaemon((_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }).end(over); });
    const t = new SocketTransport(d.path);
    try {
      const err = await failure(t.call('GET', '/status'));
      expect(err).not.toBeInstanceOf(DaemonUnreachableError);
      expect({ code: err.code, message: err.message }).toEqual({ code: 'too_large', message: `the mount daemon's answer is over ${cap} bytes` });
    } finally {
      t.close();
      stop(d.server);
    }
  });

  it('takes the daemon\'s error only with a known code and a message', async () => {
    const bodies: Record<string, unknown> = {
      '/coded': { ok: false, error: { code: 'denied', message: 'no team' } },
      '/nomessage': { ok: false, error: { code: 'denied' } },
      '/noerror': { ok: false },
      '/notok': { ok: 'true', text: 'x' },
    };
    const d = await fakeDaemon((req, res) => { res.writeHead(400).end(JSON.stringify(bodies[req.url ?? ''])); });
    const t = new SocketTransport(d.path);
    try {
      const coded = await failure(t.call('GET', '/coded'));
      expect(coded).toBeInstanceOf(DeniedError);
      expect(coded.message).toBe('no team');
      for (const route of ['/nomessage', '/noerror', '/notok']) {
        expect(await failure(t.call('GET', route)), route).toMatchObject({ reason: 'bad_answer', message: `the mount daemon at ${d.path} answered 400 without a usable result` });
      }
    } finally {
      t.close();
      stop(d.server);
    }
  });
});
