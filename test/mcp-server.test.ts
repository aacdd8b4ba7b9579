// `knowledgefs mcp` driven by the SDK's real Client over stdio (the built
// CLI as a child process, explicit environment) against a real control
// socket over an in-memory backend: what tools/list advertises, the read
// tool's results and errors, arguments that never reach the daemon, the
// reminder riding on results once, the manifest as resource and prompt
// byte-identical to `knowledgefs manifest`, the instructions, the list and
// search tools, and the raw stdout carrying JSON-RPC only.
// The end-to-end run over a real FUSE mount is in e2e-mcp.test.ts.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { guidanceText } from '../src/mcp/guidance.js';
import { MemoryBackend, startMemoryDaemon, sha256, type MemoryDaemon } from './helpers/memory-daemon.js';
import { call, connectMcp, type McpConnection } from './helpers/mcp-client.js';
import { BIN, run } from './helpers/mount.js';

const dir = mkdtempSync(join(tmpdir(), 'kfs-mcp-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let daemon: MemoryDaemon;
let mcp: McpConnection | undefined;
beforeEach(async () => { daemon = await startMemoryDaemon(); });
afterEach(async () => {
  await mcp?.close();
  mcp = undefined;
  await daemon.close();
});

const open = async (extra: string[] = []) => (mcp = await connectMcp(['--socket', daemon.socketPath, ...extra], { cwd: dir }));
const reads = () => daemon.backend.calls.filter((c) => c.startsWith('read '));
const read = (args: Record<string, unknown>) => call(mcp as McpConnection, 'read_knowledge', args);

describe('knowledgefs mcp: tools/list', () => {
  it('advertises read_knowledge with its schema and read-only annotations, and nothing that lists teams', async () => {
    await open();
    const { tools } = await mcp!.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['read_knowledge']);
    const [readTool] = tools;
    expect(readTool?.name).toMatch(/^[a-z0-9_]{1,64}$/);
    expect(readTool?.annotations).toEqual({ title: 'Read a knowledge file', readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false });
    expect(readTool?.inputSchema).toMatchObject({
      type: 'object',
      required: ['path'],
      additionalProperties: false,
      properties: {
        path: { type: 'string', minLength: 1 },
        offset: { type: 'integer', minimum: 0 },
        limit: { type: 'integer', minimum: 1, maximum: 100_000 },
      },
    });
  });

  it('with --fs-tools adds list_knowledge and search_knowledge, read-only too', async () => {
    await open(['--fs-tools']);
    const { tools } = await mcp!.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['list_knowledge', 'read_knowledge', 'search_knowledge']);
    for (const t of tools) {
      expect(t.name).toMatch(/^[a-z0-9_]{1,64}$/);
      expect(t.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false });
    }
  });
});

describe('knowledgefs mcp: read_knowledge', () => {
  it('returns the content exactly, with sha256, size and paging facts in _meta', async () => {
    await open();
    const r = await read({ path: 'knowledge/account/DUTY.md' });
    expect(r).toEqual({
      content: [{ type: 'text', text: '# Account\n' }],
      _meta: { path: 'knowledge/account/DUTY.md', sha256: sha256('# Account\n'), size: 10, offset: 0, totalChars: 10, truncated: false, nextOffset: null, mounted: false },
    });
    expect(reads()).toEqual(['read account/DUTY.md mount=false']);
  });

  it('pages a long file: following each cut note\'s offset yields the file exactly', async () => {
    const body = `${'ab😀\n'.repeat(62_500)}end`; // 250 003 characters, surrogate pairs on every line
    daemon.backend.files.set('account/big.md', body);
    daemon.backend.tree.add('account/big.md');
    await open();
    let got = '';
    let args: Record<string, unknown> = { path: 'knowledge/account/big.md' };
    for (let page = 0; page < 10; page++) {
      const r = await read(args);
      expect(r.isError).toBeUndefined();
      got += r.content[0]?.text ?? '';
      const note = r.content[1]?.text;
      if (note === undefined) break;
      const offset = Number(/offset=(\d+)/.exec(note)?.[1]);
      expect(note).toBe(`[cut at character ${offset} of 250003: call read_knowledge again with path="knowledge/account/big.md" and offset=${offset} to continue]`);
      expect(r._meta).toMatchObject({ truncated: true, nextOffset: offset, totalChars: 250_003 });
      args = { path: 'knowledge/account/big.md', offset };
    }
    expect(got).toBe(body);
    expect(reads()).toHaveLength(3);
    const small = await read({ path: 'knowledge/account/big.md', offset: 2, limit: 3 });
    expect(small.content[0]?.text).toBe('😀\na');
  });

  it('says when a read mounted a team', async () => {
    await open();
    const r = await read({ path: 'knowledge/team_search/DUTY.md' });
    expect(r.content).toEqual([
      { type: 'text', text: '# Search ünïcødé 😀\n' },
      { type: 'text', text: '[team_search is now mounted: ls, grep -r and find see knowledge/team_search/ from now on]' },
    ]);
    expect(r._meta).toMatchObject({ mounted: true });
    expect((await read({ path: 'knowledge/team_search/DUTY.md' })).content).toHaveLength(1);
  });

  it('answers a personal session\'s hidden denial byte for byte as a missing file', async () => {
    await open();
    const hidden = await read({ path: 'knowledge/team_storage/DUTY.md' });
    daemon.backend.hidden.clear();
    const missing = await read({ path: 'knowledge/team_storage/DUTY.md' });
    expect(hidden).toEqual({ content: [{ type: 'text', text: 'knowledge/team_storage/DUTY.md: no such file' }], isError: true, _meta: { code: 'not_found' } });
    expect(JSON.stringify(missing)).toBe(JSON.stringify(hidden));
    expect(reads()).toEqual(['read team_storage/DUTY.md mount=true', 'read team_storage/DUTY.md mount=true']);
  });

  it('gives a team session\'s denial with its guidance', async () => {
    daemon.backend.denied.add('team_search');
    await open();
    const r = await read({ path: 'knowledge/team_search/DUTY.md' });
    expect(r).toEqual({ content: [{ type: 'text', text: 'this session belongs to team payments and cannot load team_search' }], isError: true, _meta: { code: 'denied' } });
  });

  it('rejects bad arguments without calling the daemon', async () => {
    await open();
    const bad: Record<string, unknown>[] = [
      {},
      { path: '' },
      { path: 42 },
      { path: 'knowledge/a\0b' },
      { path: 'knowledge/account/DUTY.md', offset: -1 },
      { path: 'knowledge/account/DUTY.md', offset: 1.5 },
      { path: 'knowledge/account/DUTY.md', offset: '3' },
      { path: 'knowledge/account/DUTY.md', limit: 0 },
      { path: 'knowledge/account/DUTY.md', limit: 100_001 },
      { path: 'knowledge/account/DUTY.md', ofset: 3 },
      { path: 'x'.repeat(5000) },
    ];
    for (const args of bad) {
      const r = await read(args);
      expect(r.isError, JSON.stringify(args)).toBe(true);
      expect(r.content[0]?.text).toMatch(/^Input validation error: Invalid arguments for tool read_knowledge: /);
    }
    expect(daemon.backend.calls).toEqual([]);
    // A path the daemon rejects (outside knowledge/) is an isError result too, with its reason.
    const escape = await read({ path: 'knowledge/../etc/passwd' });
    expect(escape.isError).toBe(true);
    expect(escape.content[0]?.text).toMatch(/^knowledge\/\.\.\/etc\/passwd: outside knowledge\//);
    expect(reads()).toEqual([]);
  });

  it('says "temporary" when the control plane or the daemon is down, and stays up until the daemon is back', async () => {
    await open();
    daemon.backend.down = new KnowledgeError('unavailable', 'control plane http://127.0.0.1:1 is unreachable');
    const cpDown = await read({ path: 'knowledge/account/DUTY.md' });
    expect(cpDown).toEqual({ content: [{ type: 'text', text: 'temporary: control plane http://127.0.0.1:1 is unreachable. Try again shortly.' }], isError: true, _meta: { code: 'unavailable' } });

    const later = join(dir, `later-${process.pid}`, 'control.sock');
    const m2 = await connectMcp(['--socket', later], { cwd: dir });
    try {
      const noDaemon = await call(m2, 'read_knowledge', { path: 'knowledge/account/DUTY.md' });
      expect(noDaemon.isError).toBe(true);
      expect(noDaemon.content[0]?.text).toBe(`temporary: no knowledgefs mount daemon at ${later}: is \`knowledgefs mount\` running? set --socket or KNOWLEDGEFS_SOCKET. Try again shortly.`);
      await expect(m2.client.listTools()).resolves.toBeDefined();
      // The daemon starts: the same server now reads.
      mkdirSync(join(later, '..'), { mode: 0o700 });
      const { startControlSocket } = await import('../src/daemon/socket/control-socket.js');
      const sock = await startControlSocket(later, new MemoryBackend());
      try {
        expect((await call(m2, 'read_knowledge', { path: 'knowledge/account/DUTY.md' })).content[0]?.text).toBe('# Account\n');
      } finally {
        await sock.close();
      }
      expect(m2.stderr()).toContain(`serving on stdio for the mount daemon at ${later}`);
    } finally {
      await m2.close();
    }
  });
});

describe('knowledgefs mcp: reminder', () => {
  it('rides on the next tool result, delimited, once', async () => {
    await open();
    expect((await read({ path: 'knowledge/account/DUTY.md' })).content).toHaveLength(1);
    daemon.backend.pendingChanged = ['account/DUTY.md'];
    daemon.backend.pendingDeleted = ['team_payments/old.md'];
    const r = await read({ path: 'knowledge/team_payments/DUTY.md' });
    expect(r.content).toEqual([
      { type: 'text', text: '# Payments\n' },
      { type: 'text', text: "<knowledgefs-reminder>\nToday's date is 2025-01-01.\nChanged since you read them: account/DUTY.md\nGone since you read them: team_payments/old.md\n</knowledgefs-reminder>" },
    ]);
    expect((await read({ path: 'knowledge/team_payments/DUTY.md' })).content).toHaveLength(1);
    // On an error result too (not a temporary one).
    daemon.backend.pendingChanged = ['account/DUTY.md'];
    const missing = await read({ path: 'knowledge/account/nothere.md' });
    expect(missing.content[1]?.text).toMatch(/^<knowledgefs-reminder>\n/);
  });

  it('is never fetched with --reminder off', async () => {
    await open(['--reminder', 'off']);
    daemon.backend.pendingChanged = ['account/DUTY.md'];
    expect((await read({ path: 'knowledge/account/DUTY.md' })).content).toHaveLength(1);
    expect(daemon.backend.calls).not.toContain('reminder');
    expect(daemon.backend.pendingChanged).toEqual(['account/DUTY.md']);
  });
});

describe('knowledgefs mcp: manifest and instructions', () => {
  it('serves the manifest as a resource and a prompt, byte-identical to `knowledgefs manifest`', async () => {
    daemon.backend.manifestText = '# Knowledge\n\nGuidance ✓ 😀\n\n## account\n\nno trailing newline';
    await open();
    const cli = await run(process.execPath, [BIN, 'manifest', '--socket', daemon.socketPath]);
    expect(cli.code).toBe(0);
    const { resources } = await mcp!.client.listResources();
    expect(resources).toEqual([expect.objectContaining({ uri: 'knowledgefs://manifest', name: 'manifest', mimeType: 'text/markdown' })]);
    const res = await mcp!.client.readResource({ uri: 'knowledgefs://manifest' });
    expect(res.contents).toEqual([{ uri: 'knowledgefs://manifest', mimeType: 'text/markdown', text: cli.stdout, _meta: { sha256: sha256(cli.stdout) } }]);
    const { prompts } = await mcp!.client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(['knowledge_manifest']);
    const prompt = await mcp!.client.getPrompt({ name: 'knowledge_manifest' });
    expect(prompt.messages).toEqual([{ role: 'user', content: { type: 'text', text: cli.stdout } }]);
  });

  it('sends the same short guidance on every connect, or the manifest with --instructions manifest', async () => {
    await open();
    const first = mcp!.client.getInstructions();
    await mcp!.close();
    await open();
    expect(mcp!.client.getInstructions()).toBe(first);
    expect(first).toBe(guidanceText(false));
    expect(Buffer.byteLength(first ?? '')).toBeLessThan(2048);
    expect(first).not.toMatch(/team_[a-z]|20\d\d-/);
    await mcp!.close();
    daemon.backend.manifestText = '# Knowledge\nthe manifest\n';
    await open(['--instructions', 'manifest']);
    expect(mcp!.client.getInstructions()).toBe('# Knowledge\nthe manifest\n');
  });

  it('a manifest that cannot be fetched is a JSON-RPC error saying "temporary"', async () => {
    await open();
    daemon.backend.down = new KnowledgeError('unavailable', 'control plane down');
    await expect(mcp!.client.readResource({ uri: 'knowledgefs://manifest' })).rejects.toThrow(/temporary: control plane down/);
  });
});

describe('knowledgefs mcp --fs-tools', () => {
  it('lists and searches only what is on disk under the mount', async () => {
    const root = join(dir, `fs-${process.pid}`, 'knowledge');
    const files: Record<string, string> = {
      'account/DUTY.md': '# Account\nescalate to the on-call lead\n',
      'account/policies/on-call.md': 'page the primary first\nthen the ON-CALL lead\n',
      'team_payments/DUTY.md': '# Payments\n',
    };
    for (const [p, body] of Object.entries(files)) {
      mkdirSync(join(root, p, '..'), { recursive: true });
      writeFileSync(join(root, p), body);
    }
    await daemon.close();
    daemon = await startMemoryDaemon(new MemoryBackend(root));
    await open(['--fs-tools']);
    const list = (args: Record<string, unknown>) => call(mcp!, 'list_knowledge', args);
    const search = (args: Record<string, unknown>) => call(mcp!, 'search_knowledge', args);
    expect((await list({})).content[0]?.text).toBe('knowledge/account/\nknowledge/team_payments/');
    expect((await list({ path: 'knowledge/account' })).content[0]?.text).toBe('knowledge/account/DUTY.md\nknowledge/account/policies/');
    expect((await list({ path: join(root, 'account', 'policies') })).content[0]?.text).toBe('knowledge/account/policies/on-call.md');
    expect((await list({ path: 'knowledge', max_entries: 1 })).content[0]?.text).toBe('knowledge/account/\n[1 more entries not shown: list a subdirectory, or raise max_entries]');
    expect(await list({ path: 'knowledge/team_search' })).toMatchObject({ isError: true, content: [{ text: 'knowledge/team_search: no such file or directory' }] });
    expect((await list({ path: 'knowledge/../..' })).content[0]?.text).toMatch(/outside knowledge\//);

    expect((await search({ pattern: 'on-call lead' })).content[0]?.text).toBe('knowledge/account/DUTY.md:2:escalate to the on-call lead');
    expect((await search({ pattern: 'on-call lead', ignore_case: true })).content[0]?.text).toBe(
      'knowledge/account/DUTY.md:2:escalate to the on-call lead\nknowledge/account/policies/on-call.md:2:then the ON-CALL lead',
    );
    expect((await search({ pattern: 'lead', ignore_case: true, max_results: 1 })).content[0]?.text).toBe(
      'knowledge/account/DUTY.md:2:escalate to the on-call lead\n[stopped at 1 matches: narrow the path or the pattern, or raise max_results]',
    );
    expect((await search({ pattern: 'Payments', path: 'knowledge/account' })).content[0]?.text).toBe('no line under knowledge/account contains "Payments"');
    expect((await search({ pattern: '' })).isError).toBe(true);
    // These walk the disk; the daemon was only asked where the mount is.
    expect(daemon.backend.calls.filter((c) => c !== 'reminder')).toEqual([]);
  });

  it('searches a 40 MiB single-line file in bounded memory', async () => {
    const root = join(dir, `big-${process.pid}`, 'knowledge');
    mkdirSync(join(root, 'account'), { recursive: true });
    const big = Buffer.alloc(40 * 1024 * 1024, 'a');
    big.write('NEEDLE', big.length - 10);
    writeFileSync(join(root, 'account', 'big.md'), big);
    await daemon.close();
    daemon = await startMemoryDaemon(new MemoryBackend(root));
    await open(['--fs-tools']);
    const pid = mcp!.pid() as number;
    const status = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) * 1024;
    const before = status('VmRSS');
    const started = Date.now();
    const got = await call(mcp!, 'search_knowledge', { pattern: 'NEEDLE' });
    const took = Date.now() - started;
    const peak = status('VmHWM');
    expect(got.content[0]?.text).toBe(`knowledge/account/big.md:1:${'a'.repeat(400)}…`);
    const growthMiB = (peak - before) / 2 ** 20;
    console.log(`search_knowledge on a 40 MiB single-line file: MCP process RSS ${(before / 2 ** 20).toFixed(0)} MiB before, peak ${(peak / 2 ** 20).toFixed(0)} MiB (+${growthMiB.toFixed(0)} MiB), ${took} ms`);
    expect(growthMiB).toBeLessThan(200);
  });
});

describe('knowledgefs mcp over raw stdio', () => {
  it('writes only JSON-RPC to stdout, skips garbage lines, and exits 0 when stdin closes', async () => {
    const child = spawn(process.execPath, [BIN, 'mcp', '--socket', daemon.socketPath], { env: { PATH: process.env.PATH ?? '' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const send = (msg: unknown) => child.stdin.write(`${typeof msg === 'string' ? msg : JSON.stringify(msg)}\n`);
    const waitFor = async (id: number) => {
      for (let i = 0; i < 200 && !stdout.split('\n').some((l) => l.includes(`"id":${id}`)); i++) await new Promise((r) => setTimeout(r, 25));
    };
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });
    await waitFor(1);
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send('this is not json');
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'read_knowledge', arguments: { path: 'knowledge/account/DUTY.md' } } });
    send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'read_knowledge', arguments: { path: 'knowledge/team_storage/DUTY.md' } } });
    send({ jsonrpc: '2.0', id: 4, method: 'resources/read', params: { uri: 'knowledgefs://manifest' } });
    send({ jsonrpc: '2.0', id: 5, method: 'no/such/method' });
    await waitFor(5);
    child.stdin.end();
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(0);
    const lines = stdout.split('\n').filter((l) => l !== '');
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: '2.0' });
    const byId = new Map(lines.map((l) => JSON.parse(l) as { id: number; result?: { content?: { text: string }[] }; error?: unknown }).map((m) => [m.id, m]));
    expect(byId.get(2)?.result?.content?.[0]?.text).toBe('# Account\n');
    expect(byId.get(3)?.result).toMatchObject({ isError: true, content: [{ text: 'knowledge/team_storage/DUTY.md: no such file' }] });
    expect(byId.get(5)?.error).toMatchObject({ code: -32601 });
    expect(stderr).toContain('knowledgefs mcp: bad input on stdin, skipped: ');
    expect(stderr).toContain('knowledgefs mcp: stdin closed, stopped');
  });

  it('answers requests written with stdin closed at once (printf … | knowledgefs mcp), on 2026-07-28 too', async () => {
    const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' }, 'io.modelcontextprotocol/clientCapabilities': {} };
    const child = spawn(process.execPath, [BIN, 'mcp', '--socket', daemon.socketPath], { env: { PATH: process.env.PATH ?? '' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.resume();
    const read = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'read_knowledge', arguments: { path: 'knowledge/account/DUTY.md' }, _meta: envelope } });
    child.stdin.end(`${[read(1), read(2), read(3)].map((m) => JSON.stringify(m)).join('\n')}\n`);
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(0);
    const answers = stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { id: number; result: { content: { text: string }[] } });
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2, 3]);
    for (const a of answers) expect(a.result.content[0]?.text).toBe('# Account\n');
  });

  it('ends with exit 5 and says why when a message is over the 10 MiB line limit', async () => {
    const child = spawn(process.execPath, [BIN, 'mcp', '--socket', daemon.socketPath], { env: { PATH: process.env.PATH ?? '' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.stdout.resume();
    child.stdin.on('error', () => undefined); // the server may stop reading before the write ends
    child.stdin.write('x'.repeat(11 * 1024 * 1024));
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(5);
    expect(stderr).toMatch(/ReadBuffer exceeded maximum size/);
    expect(stderr).toContain('knowledgefs mcp: connection lost, stopped');
  });
});
