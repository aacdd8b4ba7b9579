// The real CLI (`node bin/knowledgefs.js`, built) against a control socket
// backed by an in-memory backend: exit codes, plain and --json output, the
// truncation hint, and byte-identical output for a hidden denial and a
// missing file. The end-to-end tests with a real control plane and mount are
// in e2e-read.test.ts.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import type { ReadRequest, ReadResponse } from '../src/core/wire.js';
import { startControlSocket, type ReadToolBackend } from '../src/daemon/socket/control-socket.js';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin', 'knowledgefs.js');
const dir = mkdtempSync(join(tmpdir(), 'kfs-cli-'));
const SOCK = join(dir, 'control.sock');
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const files = new Map<string, string>([
  ['account/DUTY.md', '# Account\nno trailing newline'],
  ['team_payments/big.md', 'ab😀'.repeat(40_000)], // 120 000 characters
  ['team_search/DUTY.md', '# Search\n'],
]);
let mode: 'ok' | 'membership-down' | 'cp-down' = 'ok';

const backend: ReadToolBackend = {
  mountpoint: join(dir, 'knowledge'),
  hasFile: (p) => p.startsWith('account/') || p.startsWith('team_payments/'),
  async read(req: ReadRequest): Promise<ReadResponse> {
    const scope = req.path.split('/')[0];
    if (mode === 'cp-down') throw new KnowledgeError('unavailable', 'control plane at http://127.0.0.1:1 is unreachable');
    if (scope === 'team_ops') throw new KnowledgeError('denied', 'this team session belongs to team payments; it cannot load team ops. Ask an admin to share it, use a personal session, or hand the incident to team ops.');
    if (mode === 'membership-down' && scope !== 'account' && scope !== 'team_payments') {
      throw new KnowledgeError('membership_unavailable', 'membership source http://127.0.0.1:2 failed: connection refused; other teams cannot be loaded until it answers');
    }
    const text = files.get(req.path);
    if (text === undefined || scope === 'team_storage') throw new KnowledgeError('not_found', `not found: ${req.path}`);
    const bytes = Buffer.from(text);
    return { path: req.path, sha256: sha(bytes), size: bytes.length, contentBase64: bytes.toString('base64'), mounted: false };
  },
  canLoad: () => Promise.reject(new Error('unused')),
  manifest: async () => ({ text: '# Knowledge\nmanifest body\n', sha256: sha(Buffer.from('# Knowledge\nmanifest body\n')) }),
  reminder: async () => ({ text: "Today's date is 2025-01-01.\n", date: '2025-01-01', changed: [], deleted: [] }),
  refreshPlan: async () => {},
  status: () => ({ mountpoint: join(dir, 'knowledge'), sessionId: 's', planVersion: 'v', files: 0, scopes: [], prefetch: { done: 0, total: 0 } }),
};

let sock: { close(): Promise<void> };
beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('run `npm run build` first');
  sock = await startControlSocket(SOCK, backend);
});
afterAll(async () => {
  await sock?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Run { code: number | null; stdout: string; stderr: string }

function cli(args: string[], env: Record<string, string> = {}, cwd = dir): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { ...process.env, KNOWLEDGEFS_SOCKET: SOCK, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('knowledgefs read', () => {
  it('prints the file exactly and exits 0', async () => {
    const r = await cli(['read', 'knowledge/account/DUTY.md']);
    expect(r).toEqual({ code: 0, stdout: '# Account\nno trailing newline', stderr: '' });
  });

  it('prints the same bytes and exit code for a hidden denial and a missing file', async () => {
    const hidden = await cli(['read', 'knowledge/team_storage/DUTY.md']);
    const missing = await cli(['read', 'knowledge/team_nobody/DUTY.md'], {}, '/');
    expect(hidden.code, hidden.stderr).toBe(1);
    expect(hidden.stdout).toBe('');
    expect(hidden.stderr).toBe('knowledgefs: knowledge/team_storage/DUTY.md: no such file\n');
    expect({ ...missing, stderr: missing.stderr.replace('team_nobody', 'team_storage') }).toEqual(hidden);
    const hiddenJson = await cli(['read', 'knowledge/team_storage/DUTY.md', '--json']);
    const missingJson = await cli(['read', 'knowledge/team_nobody/DUTY.md', '--json']);
    expect(hiddenJson.code, hiddenJson.stderr).toBe(1);
    expect(JSON.parse(hiddenJson.stdout)).toEqual({ ok: false, error: { code: 'not_found', message: 'knowledge/team_storage/DUTY.md: no such file' } });
    expect(missingJson.stdout.replace('team_nobody', 'team_storage')).toBe(hiddenJson.stdout);
  });

  it('exits 3 with the guidance for a denied team', async () => {
    const r = await cli(['read', 'knowledge/team_ops/DUTY.md']);
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/belongs to team payments.*ask an admin to share it/i);
  });

  it('exits 4 naming the membership source or the control plane', async () => {
    mode = 'membership-down';
    try {
      const other = await cli(['read', 'knowledge/team_search/DUTY.md']);
      expect(other.code, other.stderr).toBe(4);
      expect(other.stderr).toMatch(/membership source/);
      const acct = await cli(['read', 'knowledge/account/DUTY.md']);
      expect(acct, JSON.stringify(acct)).toMatchObject({ code: 0 });
      const json = await cli(['read', 'knowledge/team_search/DUTY.md', '--json']);
      expect(JSON.parse(json.stdout).error.code).toBe('membership_unavailable');
      mode = 'cp-down';
      const cp = await cli(['read', 'knowledge/account/DUTY.md']);
      expect(cp.code, cp.stderr).toBe(4);
      expect(cp.stderr).toMatch(/control plane/);
    } finally {
      mode = 'ok';
    }
  });

  it('caps output and says how to continue; following the hint yields the rest', async () => {
    const full = files.get('team_payments/big.md') ?? '';
    const first = await cli(['read', 'knowledge/team_payments/big.md']);
    expect(first.code, first.stderr).toBe(0);
    expect([...first.stdout].length).toBe(100_000);
    expect(first.stderr).toBe('\n… truncated at character 100000 of 120000; continue with: knowledgefs read knowledge/team_payments/big.md --offset 100000\n');
    const hint = /continue with: knowledgefs (.*)\n$/.exec(first.stderr)?.[1]?.split(' ') ?? [];
    const rest = await cli(hint);
    expect(rest.code, rest.stderr).toBe(0);
    expect(rest.stderr).toBe('');
    expect(first.stdout + rest.stdout).toBe(full);
    const page = await cli(['read', 'knowledge/team_payments/big.md', '--offset', '3', '--limit', '3', '--json']);
    expect(JSON.parse(page.stdout)).toMatchObject({ ok: true, path: 'knowledge/team_payments/big.md', content: 'ab😀', offset: 3, truncated: true, size: Buffer.byteLength(full), sha256: sha(Buffer.from(full)) });
  });

  it('exits 2 on usage errors', async () => {
    for (const args of [['read'], ['read', 'x', '--offset', '-1'], ['read', 'x', '--limit', '0'], ['read', 'x', '--limit', '100001'], ['read', 'x', '--offset', 'abc']]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
    }
    const out = await cli(['read', 'knowledge/../etc/passwd']);
    expect(out.code, out.stderr).toBe(2);
    expect(out.stderr).toMatch(/outside knowledge\//);
    expect(out.stdout).toBe('');
  });

  it('exits 4 with a clear message when no daemon listens', async () => {
    const missing = join(dir, 'none.sock');
    const r = await cli(['read', 'knowledge/account/DUTY.md', '--socket', missing]);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toBe(`knowledgefs: no knowledgefs mount daemon at ${missing}: is \`knowledgefs mount\` running? set --socket or KNOWLEDGEFS_SOCKET\n`);
    const viaEnv = await cli(['manifest', '--json'], { KNOWLEDGEFS_SOCKET: missing });
    expect(viaEnv.code, viaEnv.stderr).toBe(4);
    expect(JSON.parse(viaEnv.stdout).error.code).toBe('unavailable');
  });
});

describe('knowledgefs manifest / reminder', () => {
  it('print the text exactly, or JSON with --json', async () => {
    expect(await cli(['manifest'])).toEqual({ code: 0, stdout: '# Knowledge\nmanifest body\n', stderr: '' });
    expect(JSON.parse((await cli(['manifest', '--json', '--socket', SOCK])).stdout)).toEqual({ ok: true, text: '# Knowledge\nmanifest body\n', sha256: sha(Buffer.from('# Knowledge\nmanifest body\n')) });
    expect(await cli(['reminder'])).toEqual({ code: 0, stdout: "Today's date is 2025-01-01.\n", stderr: '' });
    expect(JSON.parse((await cli(['reminder', '--json'])).stdout)).toEqual({ ok: true, text: "Today's date is 2025-01-01.\n", date: '2025-01-01', changed: [], deleted: [] });
  });
});
