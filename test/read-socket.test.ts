// The control socket over a real unix socket with an in-memory backend:
// mode 0600, stale-socket handling, the read flow (fresh decision even for
// files in the tree, integrity check, plan refresh before answering a mount,
// paging by characters), and error shapes. The backend records every call so
// tests can check what reached the "control plane".

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { handleControlRequest, startControlSocket } from '../src/daemon/socket/control-socket.js';
import { sliceChars } from '../src/core/read-page.js';
import { KnowledgeClient } from '../src/client/knowledge-client.js';
import { failure } from './helpers/fake-control-client.js';
import { MEMORY_MOUNTPOINT, MemoryBackend, sha256 } from './helpers/memory-daemon.js';

const dir = mkdtempSync(join(tmpdir(), 'kfs-sock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MNT = MEMORY_MOUNTPOINT;
const sha = sha256;

let backend: MemoryBackend;
let sock: { close(): Promise<void> };
let path: string;
let client: KnowledgeClient;

beforeEach(async () => {
  backend = new MemoryBackend();
  path = join(dir, `s-${Math.random().toString(36).slice(2)}`, 'control.sock');
  sock = await startControlSocket(path, backend);
  client = new KnowledgeClient({ socketPath: path, timeoutMs: 10_000 });
});
afterEach(async () => { client.close(); await sock.close(); });

describe('control socket', () => {
  it('is mode 0600 in a 0700 directory it created, and removed on close', async () => {
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700);
    await sock.close();
    expect(existsSync(path)).toBe(false);
  });

  it('replaces a stale socket file but refuses a live one or a regular file', async () => {
    const stale = join(dir, 'stale.sock');
    // A listener in a child process, killed with SIGKILL: its socket file stays behind, dead.
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(stale)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((r) => child.stdout.once('data', () => r()));
    try {
      await expect(startControlSocket(stale, backend)).rejects.toThrow(/another process is serving/);
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    expect(existsSync(stale)).toBe(true);
    const lines: string[] = [];
    const s2 = await startControlSocket(stale, backend, (l) => lines.push(l));
    try {
      expect(lines.join('\n')).toMatch(/removed stale control socket/);
      expect((await new KnowledgeClient({ socketPath: stale }).status()).sessionId).toBe('s1');
    } finally {
      await s2.close();
    }
    const regular = join(dir, 'regular');
    writeFileSync(regular, 'x');
    await expect(startControlSocket(regular, backend)).rejects.toThrow(/not a socket/);
    expect(existsSync(regular)).toBe(true);
  });

  it('asks the control plane afresh for a file already in the tree (mount=false)', async () => {
    const res = await client.read('knowledge/account/DUTY.md', { cwd: '/' });
    expect(res).toEqual({ path: 'knowledge/account/DUTY.md', content: '# Account\n', sha256: sha(Buffer.from('# Account\n')), size: 10, offset: 0, truncated: false, totalChars: 10, nextOffset: null, mounted: false });
    expect(backend.calls).toEqual(['read account/DUTY.md mount=false']);
  });

  it('mounts a team not in the tree and refreshes the plan before answering', async () => {
    const res = await client.read('/runner/knowledge/team_search/DUTY.md', { cwd: '/tmp' });
    expect(res.content).toBe('# Search ünïcødé 😀\n');
    expect(res.mounted).toBe(true);
    expect(backend.calls).toEqual(['read team_search/DUTY.md mount=true', 'refreshPlan']);
    expect(backend.hasFile('team_search/DUTY.md')).toBe(true);
    // Next time it is in the tree: fresh decision, no mount, no refresh.
    backend.calls = [];
    expect((await client.read('DUTY.md', { cwd: '/runner/knowledge/team_search' })).mounted).toBe(false);
    expect(backend.calls).toEqual(['read team_search/DUTY.md mount=false']);
  });

  it('answers a hidden denial with exactly the missing-file error, echoing only the typed path', async () => {
    const hidden = await failure(client.read('knowledge/team_storage/DUTY.md', { cwd: '/' }));
    backend.hidden.clear();
    const reallyMissing = await failure(client.read('knowledge/team_storage/DUTY.md', { cwd: '/' }));
    expect(hidden.code).toBe('not_found');
    expect(hidden.message).toBe('knowledge/team_storage/DUTY.md: no such file');
    expect(reallyMissing.message).toBe(hidden.message);
    expect(backend.calls).toEqual(['read team_storage/DUTY.md mount=true', 'read team_storage/DUTY.md mount=true']);
  });

  it('passes on denials with guidance and unavailability with their codes', async () => {
    backend.denied.add('team_search');
    const denied = await failure(client.read('knowledge/team_search/DUTY.md', { cwd: '/' }));
    expect(denied.code).toBe('denied');
    expect(denied.message).toMatch(/belongs to team payments/);
    backend.down = new KnowledgeError('membership_unavailable', 'membership source http://x failed');
    expect((await failure(client.read('knowledge/team_search/x', { cwd: '/' }))).code).toBe('membership_unavailable');
    backend.down = new KnowledgeError('unavailable', 'control plane down');
    expect((await failure(client.read('knowledge/account/DUTY.md', { cwd: '/' }))).code).toBe('unavailable');
  });

  it('discards content whose checksum does not match', async () => {
    backend.corrupt = true;
    const err = await failure(client.read('knowledge/account/DUTY.md', { cwd: '/' }));
    expect(err.code).toBe('integrity');
    expect(err.message).not.toContain('Account');
  });

  it('asks the control plane for the page alone, and takes the whole file from one that predates pages', async () => {
    backend.files.set('account/big.md', `${'é'.repeat(150_000)}end`);
    backend.tree.add('account/big.md');
    const paged = await client.read('knowledge/account/big.md', { cwd: '/', offset: 149_999, limit: 3 });
    expect(backend.lastRead).toEqual({ path: 'account/big.md', mount: false, offset: 149_999, limit: 3 });
    expect(paged).toMatchObject({ content: 'éen', offset: 149_999, totalChars: 150_003, truncated: true, size: 300_003, sha256: sha(`${'é'.repeat(150_000)}end`) });
    backend.wholeFiles = true;
    expect(await client.read('knowledge/account/big.md', { cwd: '/', offset: 149_999, limit: 3 })).toEqual(paged);
    backend.corrupt = true;
    expect((await failure(client.read('knowledge/account/big.md', { cwd: '/' }))).code).toBe('integrity');
  });

  it('pages by characters with offset and limit, never splitting a surrogate pair', async () => {
    backend.files.set('account/big.md', `${'😀'.repeat(150_000)}end`);
    backend.tree.add('account/big.md');
    const first = await client.read('knowledge/account/big.md', { cwd: '/' });
    expect(first.truncated).toBe(true);
    expect(first.totalChars).toBe(150_003);
    expect([...first.content].length).toBe(100_000);
    expect(first.content.isWellFormed()).toBe(true);
    const second = await client.read('knowledge/account/big.md', { cwd: '/', offset: 100_000 });
    expect(second.truncated).toBe(false);
    expect(second.content).toBe(`${'😀'.repeat(50_000)}end`);
    const small = await client.read('knowledge/account/big.md', { cwd: '/', offset: 149_999, limit: 2 });
    expect(small).toMatchObject({ content: '😀e', truncated: true, offset: 149_999 });
    const beyond = await client.read('knowledge/account/big.md', { cwd: '/', offset: 10_000_000 });
    expect(beyond).toMatchObject({ content: '', truncated: false });
    expect(first.nextOffset).toBe(100_000);
    expect(small.nextOffset).toBe(150_001);
    expect(second.nextOffset).toBeNull();
    // The daemon clamps a limit above the cap (the client library refuses one before sending it).
    const clamped = await handleControlRequest(backend, 'POST', '/read', { path: 'knowledge/account/big.md', cwd: '/', limit: 500_000 });
    expect([...(clamped.body as { content: string }).content].length).toBe(100_000);
  });

  it('rejects bad paths and bad requests before asking the control plane', async () => {
    expect((await failure(client.read('knowledge/../etc/passwd', { cwd: '/' }))).code).toBe('invalid_argument');
    expect((await failure(client.read('knowledge/team_x', { cwd: '/' }))).message).toMatch(/scope directory/);
    expect((await failure(client.read('knowledge/account/x', { cwd: '/', offset: -1 }))).code).toBe('invalid_argument');
    expect(backend.calls).toEqual([]);
    const negative = await handleControlRequest(backend, 'POST', '/read', { path: 'knowledge/account/x', cwd: '/', offset: -1 });
    expect(negative).toEqual({ status: 400, body: { ok: false, error: { code: 'invalid_argument', message: 'offset must be an integer ≥ 0' } } });
    expect(backend.calls).toEqual([]);
    const r = await handleControlRequest(backend, 'POST', '/read', 'nope');
    expect(r).toEqual({ status: 400, body: { ok: false, error: { code: 'invalid_argument', message: 'request body must be a JSON object' } } });
    expect((await handleControlRequest(backend, 'GET', '/nope', undefined)).status).toBe(400);
  });

  it('serves manifest, reminder and status', async () => {
    expect(await client.manifest()).toEqual({ text: 'MANIFEST\n', sha256: sha(Buffer.from('MANIFEST\n')) });
    backend.pendingChanged = ['a/b'];
    expect(await client.reminder()).toEqual({ text: "Today's date is 2025-01-01.\nChanged since you read them: a/b\n", date: '2025-01-01', changed: ['a/b'], deleted: [] });
    expect(await client.status()).toEqual({ mountpoint: MNT, sessionId: 's1', planVersion: 'v', files: 2, scopes: ['account'], prefetch: { done: 0, total: 0 } });
  });

  it('hides internal errors behind a generic message and logs them', async () => {
    const lines: string[] = [];
    const broken = Object.assign(Object.create(backend) as MemoryBackend, { manifest: async () => { throw new TypeError('boom'); } });
    const r = await handleControlRequest(broken, 'GET', '/manifest', undefined, (l) => lines.push(l));
    expect(r.status).toBe(500);
    expect(JSON.stringify(r.body)).not.toContain('boom');
    expect(lines.join('\n')).toContain('boom');
  });
});

describe('sliceChars', () => {
  it('counts code points', () => {
    expect(sliceChars('a😀b', 1, 1)).toEqual({ content: '😀', totalChars: 3 });
    expect(sliceChars('', 0, 5)).toEqual({ content: '', totalChars: 0 });
    expect(sliceChars('abc', 3, 5)).toEqual({ content: '', totalChars: 3 });
  });
});
