// --log-format and --log-file on real `serve` and `mount` processes: every
// line of a JSON log parses, with time, level, component and message; the
// request id of an admin call appears on its log line; no token is ever
// written; SIGHUP reopens the log file after a rename (rotation). Plus the
// pure line formatting and redaction.

import { mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatLogLine, parseLogFormat, redactSecrets } from '../src/core/text/log-line.js';
import { spawnControlPlane, type SpawnedControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { fuseSuite, startMount, waitFor } from './helpers/mount.js';

interface JsonLine {
  time: string;
  level: string;
  component: string;
  message: string;
  [field: string]: unknown;
}

/** Every line must be one JSON object of the documented shape. */
function parseLines(text: string, component: string): JsonLine[] {
  const lines = text.split('\n').filter((l) => l !== '');
  return lines.map((line) => {
    const value = JSON.parse(line) as JsonLine;
    expect(Number.isNaN(Date.parse(value.time)), line).toBe(false);
    expect(value.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(['info', 'warn', 'error'], line).toContain(value.level);
    expect(value.component, line).toBe(component);
    expect(typeof value.message, line).toBe('string');
    return value;
  });
}

describe('log lines', () => {
  it('json: one object with time, level, component, message and fields; text: the message', () => {
    const t = new Date('2026-12-01T03:00:00.000Z');
    expect(JSON.parse(formatLogLine('json', t, 'serve', 'session s1 created', { session: 's1', requestId: 'r-1', skipped: undefined }))).toEqual({
      time: '2026-12-01T03:00:00.000Z',
      level: 'info',
      component: 'serve',
      message: 'session s1 created',
      session: 's1',
      requestId: 'r-1',
    });
    expect(JSON.parse(formatLogLine('json', t, 'mount', 'x', { level: 'error' })).level).toBe('error');
    expect(formatLogLine('text', t, 'serve', 'listening')).toBe('listening\n');
    // A stack trace stays on one line.
    expect(formatLogLine('text', t, 'serve', 'boom\n    at f (a.js:1)')).toBe('boom\\n    at f (a.js:1)\n');
    expect(formatLogLine('json', t, 'serve', 'a\nb').split('\n')).toHaveLength(2);
  });

  it('never carries a token, a bearer credential or a URL password', () => {
    const runner = `kfs_${'A1b2_C3-'.repeat(5)}`;
    const admin = `kfsadmin_${'x9Y8z7'.repeat(6)}`;
    const text = `token ${runner} admin=${admin} Authorization: Bearer abc.def postgres://kfs:s3cret@db:5432/kfs`;
    const clean = redactSecrets(text);
    for (const secret of [runner, admin, 'abc.def', 's3cret']) expect(clean).not.toContain(secret);
    expect(clean).toBe('token kfs_[redacted] admin=kfsadmin_[redacted] Authorization: Bearer [redacted] postgres://kfs:[redacted]@db:5432/kfs');
    const json = formatLogLine('json', new Date(), 'serve', `got ${runner}`, { header: `Bearer ${admin}` });
    expect(json).not.toContain(runner);
    expect(json).not.toContain(admin);
  });

  it('--log-format takes text or json only', () => {
    expect(parseLogFormat('json')).toBe('json');
    expect(() => parseLogFormat('yaml')).toThrow('expected text or json, not "yaml"');
  });
});

describe('serve --log-format json --log-file', () => {
  let data = '';
  let dir = '';
  let cp: SpawnedControlPlane;
  let file = '';

  beforeAll(async () => {
    data = await makeDataDir({ teams: { payments: 'P' }, users: { alice: { teams: ['payments'] } }, files: { 'account/DUTY.md': 'a\n', 'teams/payments/DUTY.md': 'p\n' } });
    dir = await mkdtemp(join(tmpdir(), 'kfs-logs-'));
    file = join(dir, 'logs', 'serve.log');
    cp = await spawnControlPlane({ dataDir: data, args: ['--log-format', 'json', '--log-file', file] });
  });

  afterAll(async () => {
    await cp?.kill('SIGTERM');
    if (data) await removeDataDir(data);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const createSession = async () => {
    const res = await fetch(`${cp.url}/v1/admin/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cp.adminToken}`, 'content-type': 'application/json', 'x-request-id': `create-${Date.now()}` },
      body: JSON.stringify({ kind: 'personal', creator: 'alice' }),
    });
    expect(res.status).toBe(201);
    return { requestId: res.headers.get('x-request-id') as string, ...((await res.json()) as { sessionId: string; token: string }) };
  };

  it('writes parseable lines to the file, nothing to stderr, the request id on the line, no token', async () => {
    const created = await createSession();
    // A runner request that fails to authenticate, with the token in the header the server saw.
    await fetch(`${cp.url}/v1/plan`, { headers: { authorization: `Bearer ${created.token}x` } });
    const lines: JsonLine[] = await waitFor(async () => {
      const l = parseLines(await readFile(file, 'utf8'), 'serve');
      return l.some((x) => x.session === created.sessionId) ? l : undefined;
    }).then((l) => l ?? []);
    expect(lines[0]?.message).toMatch(/^serving /);
    const line = lines.find((x) => x.session === created.sessionId);
    expect(line).toMatchObject({ level: 'info', requestId: created.requestId });
    expect(line?.message).toContain(`session ${created.sessionId} created`);
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain(created.token);
    expect(text).not.toContain(cp.adminToken);
    expect(cp.stderr).toBe('');
    expect((await import('node:fs')).statSync(file).mode & 0o777).toBe(0o600);
  });

  it('reopens the file on SIGHUP after a rotation rename', async () => {
    const rotated = `${file}.1`;
    await rename(file, rotated);
    process.kill(cp.pid as number, 'SIGHUP');
    const reopened = await waitFor(async () => {
      try {
        return parseLines(await readFile(file, 'utf8'), 'serve');
      } catch {
        return undefined;
      }
    });
    expect(reopened?.map((l) => l.message).slice(0, 2)).toEqual(['SIGHUP: log file reopened', expect.stringMatching(/^SIGHUP: reopening the audit log /)]);
    const created = await createSession();
    const after = await waitFor(async () => {
      const l = parseLines(await readFile(file, 'utf8'), 'serve');
      return l.some((x) => x.session === created.sessionId) ? l : undefined;
    });
    expect(after?.length).toBeGreaterThanOrEqual(2);
    // The rotated file got nothing more, and the process is still serving.
    expect(parseLines(await readFile(rotated, 'utf8'), 'serve').some((x) => x.session === created.sessionId)).toBe(false);
    expect((await fetch(`${cp.url}/healthz`)).status).toBe(200);
  });
});

describe('serve --log-format json on stderr', () => {
  it('parses line by line, the shutdown line included', async () => {
    const data = await makeDataDir({ files: { 'account/DUTY.md': 'a\n' } });
    const cp = await spawnControlPlane({ dataDir: data, args: ['--log-format', 'json'] });
    try {
      await cp.kill('SIGTERM');
      const lines = parseLines(cp.stderr, 'serve');
      expect(lines.map((l) => l.message)).toEqual([expect.stringMatching(/^serving /), 'SIGTERM: shutting down']);
    } finally {
      await removeDataDir(data);
    }
  });
});

fuseSuite('mount --log-format json', () => {
  it('writes every stderr line as JSON, never the runner token', async () => {
    const data = await makeDataDir({ teams: { payments: 'P' }, users: { alice: { teams: ['payments'] } }, files: { 'account/DUTY.md': 'a\n' } });
    const { startControlPlane } = await import('./helpers/control-plane.js');
    const cp = await startControlPlane({ dataDir: data });
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const m = await startMount({ serverUrl: cp.url, token, args: ['--log-format', 'json'] });
    try {
      await m.stop();
      const lines = parseLines(m.stderr, 'mount');
      expect(lines.length).toBeGreaterThanOrEqual(3);
      expect(lines.some((l) => l.message.startsWith('knowledgefs mount: '))).toBe(true);
      expect(m.stderr).not.toContain(token);
    } finally {
      await m.stop();
      await cp.close();
      await removeDataDir(data);
    }
  });
});
