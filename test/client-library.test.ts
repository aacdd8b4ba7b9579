// The client library (`import { KnowledgeClient } from 'knowledgefs'`) against
// real unix sockets: the daemon's own control socket over an in-memory backend,
// and hand-made servers for the faults (silent, garbage, connections dropped).
// Checks the typed results, the error class and code of every failure,
// arguments that cannot be right never reaching the daemon, one kept-alive
// connection for many calls (and a fresh one when the daemon dropped it), and
// the package entry as a harness sees it: a separate Node process importing
// 'knowledgefs', and tsc type-checking a consumer against the built .d.ts.

import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
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
import { KnowledgeError as CoreKnowledgeError } from '../src/core/errors.js';
import { failure } from './helpers/fake-control-client.js';
import { startMemoryDaemon, sha256, type MemoryDaemon } from './helpers/memory-daemon.js';
import { REPO_ROOT, run } from './helpers/mount.js';

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
      expect(err.message).toContain(`refusing to use the control socket ${spoofPath}: ${open} is writable by other users (mode 0777)`);
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
    const server = createNetServer((conn) => conn.once('data', () => conn.destroy()));
    await new Promise<void>((r) => server.listen(path, r));
    const c = new KnowledgeClient({ socketPath: path });
    try {
      expect(await failure(c.status())).toMatchObject({ reason: 'no_answer', message: `the mount daemon at ${path} closed the connection before answering` });
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

describe("the 'knowledgefs' package", () => {
  let consumer = '';
  beforeAll(() => {
    // A harness project with knowledgefs installed: node_modules/knowledgefs → this repository (built).
    consumer = join(dir, 'harness');
    mkdirSync(join(consumer, 'node_modules'), { recursive: true });
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'harness', type: 'module', private: true }));
    symlinkSync(REPO_ROOT, join(consumer, 'node_modules', 'knowledgefs'));
    symlinkSync(join(REPO_ROOT, 'node_modules', '@types'), join(consumer, 'node_modules', '@types'));
  });

  it('is importable by name from another process, and an idle connection does not keep that process alive', async () => {
    writeFileSync(join(consumer, 'use.mjs'), `
      import { KnowledgeClient, NotFoundError, isTemporary } from 'knowledgefs';
      const kfs = new KnowledgeClient({ socketPath: process.argv[2], cwd: '/' });
      const r = await kfs.read('knowledge/account/DUTY.md');
      let hidden;
      try { await kfs.read('knowledge/team_storage/DUTY.md'); } catch (e) { hidden = { notFound: e instanceof NotFoundError, code: e.code, temporary: isTemporary(e) }; }
      console.log(JSON.stringify({ content: r.content, hidden, manifest: (await kfs.manifest()).text }));
    `);
    const r = await run(process.execPath, ['use.mjs', daemon.socketPath], { cwd: consumer, timeoutMs: 20_000 });
    expect(r.timedOut).toBe(false);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ content: '# Account\n', hidden: { notFound: true, code: 'not_found', temporary: false }, manifest: 'MANIFEST\n' });
  });

  it('ships types: a TypeScript consumer type-checks, and a misuse does not', async () => {
    const tsconfig = { compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, types: ['node'] }, files: ['good.ts', 'bad.ts'] };
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify(tsconfig));
    writeFileSync(join(consumer, 'good.ts'), `
      import { KnowledgeClient, NotFoundError, type ReadResult, type Manifest, type ErrorCode } from 'knowledgefs';
      const kfs = new KnowledgeClient({ socketPath: '/run/knowledgefs/control.sock', timeoutMs: 5000 });
      export async function tool(path: string): Promise<string> {
        try {
          const r: ReadResult = await kfs.read(path, { offset: 0, limit: 1000 });
          const next: number | null = r.nextOffset;
          const mounted: boolean = r.mounted;
          return r.content + String(next) + String(mounted);
        } catch (err) {
          if (err instanceof NotFoundError) { const code: ErrorCode = err.code; return code; }
          throw err;
        }
      }
      export const m: Promise<Manifest> = kfs.manifest();
    `);
    writeFileSync(join(consumer, 'bad.ts'), `
      import { KnowledgeClient } from 'knowledgefs';
      export const n: number = (await new KnowledgeClient().read('x')).content;
    `);
    const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: consumer, timeoutMs: 60_000 });
    // The only error is the deliberate one in bad.ts: good.ts resolved every name and type.
    expect(r.stdout.trim().split('\n')).toEqual([expect.stringMatching(/^bad\.ts\(3,\d+\): error TS2322: Type 'string' is not assignable to type 'number'\.$/)]);
  });
});
