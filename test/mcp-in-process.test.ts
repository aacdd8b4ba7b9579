// The MCP server (src/mcp) in this process: the SDK's real clients over
// in-memory stdio streams (helpers/mcp-in-process.ts) against the daemon's
// real control socket over an in-memory backend. What each tool, resource and
// prompt answers, word for word; errors as results; the reminder riding
// along; subscriptions on both protocol eras; and the stdio wire itself
// (garbage lines, draining on close, oversized lines, a closed stdout).
// The same server as the built CLI over real stdio is mcp-server.test.ts and
// mcp-revisions.test.ts.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { guidanceText } from '../src/mcp/guidance.js';
import { errorText, errorToolResult, readToolResult, reminderBlock } from '../src/mcp/tool-results.js';
import { MemoryBackend, startMemoryDaemon, sha256, type MemoryDaemon } from './helpers/memory-daemon.js';
import { call, MANIFEST_URI } from './helpers/mcp-client.js';
import { startInProcessMcp, type InProcessMcp, type InProcessMcpOptions } from './helpers/mcp-in-process.js';
import { initialize, line, readCall, serveRawStdio, type RawStdioOptions } from './helpers/mcp-stdio-raw.js';

const dir = mkdtempSync(join(tmpdir(), 'kfs-mcp-inproc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let daemon: MemoryDaemon;
let mcp: InProcessMcp | undefined;
beforeEach(async () => { daemon = await startMemoryDaemon(); });
afterEach(async () => {
  await mcp?.close();
  mcp = undefined;
  await daemon.close();
});

const open = async (opts: Partial<InProcessMcpOptions> = {}) => (mcp = await startInProcessMcp({ socketPath: daemon.socketPath, ...opts }));
const read = (args: Record<string, unknown>) => call(mcp!, 'read_knowledge', args);
const calls = (prefix: string) => daemon.backend.calls.filter((c) => c.startsWith(prefix));

describe('MCP server: what it offers', () => {
  it('lists the read tool with its schema and read-only annotations, and the guidance as instructions', async () => {
    await open();
    expect(mcp!.client.getInstructions()).toBe(guidanceText(false));
    const { tools } = await mcp!.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['read_knowledge']);
    const [tool] = tools as { name: string; title?: string; description?: string; annotations?: unknown; inputSchema: Record<string, unknown> }[];
    expect(tool!.title).toBe('Read a knowledge file');
    expect(tool!.description).toContain('At most 100000 characters per call');
    expect(tool!.annotations).toEqual({ title: 'Read a knowledge file', readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false });
    expect(tool!.inputSchema).toMatchObject({
      type: 'object',
      required: ['path'],
      additionalProperties: false,
      properties: { path: { type: 'string', minLength: 1, maxLength: 4096 }, offset: { type: 'integer', minimum: 0 }, limit: { type: 'integer', minimum: 1, maximum: 100000 } },
    });
  });

  it('with fs tools lists list_knowledge and search_knowledge too, read-only, and says so in the guidance', async () => {
    await open({ fsTools: true });
    expect(mcp!.client.getInstructions()).toBe(guidanceText(true));
    const { tools } = await mcp!.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['read_knowledge', 'list_knowledge', 'search_knowledge']);
    for (const t of tools.slice(1)) expect((t.annotations as { readOnlyHint?: boolean }).readOnlyHint).toBe(true);
    expect(tools[1]!.inputSchema).toMatchObject({ additionalProperties: false, properties: { path: { type: 'string' }, max_entries: { type: 'integer', minimum: 1, maximum: 10000 } } });
    expect(tools[2]!.inputSchema).toMatchObject({ required: ['pattern'], properties: { pattern: { type: 'string', minLength: 1, maxLength: 1000 }, ignore_case: { type: 'boolean' }, max_results: { type: 'integer', minimum: 1 } } });
  });

  it('serves the manifest as a resource and a prompt, byte for byte, never cached', async () => {
    daemon.backend.manifestText = '# Knowledge ✓\n\nDUTY\n';
    await open({ instructions: 'custom instructions' });
    expect(mcp!.client.getInstructions()).toBe('custom instructions');
    const { resources } = await mcp!.client.listResources();
    expect(resources).toEqual([expect.objectContaining({ uri: MANIFEST_URI, name: 'manifest', title: 'Knowledge manifest', mimeType: 'text/markdown' })]);
    const res = await mcp!.client.readResource({ uri: MANIFEST_URI });
    expect(res.contents).toEqual([{ uri: MANIFEST_URI, mimeType: 'text/markdown', text: '# Knowledge ✓\n\nDUTY\n', _meta: { sha256: sha256('# Knowledge ✓\n\nDUTY\n') } }]);
    expect({ ttlMs: res.ttlMs, cacheScope: res.cacheScope }).toEqual({ ttlMs: 0, cacheScope: 'private' });
    const { prompts } = await mcp!.client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual(['knowledge_manifest']);
    const prompt = await mcp!.client.getPrompt({ name: 'knowledge_manifest' });
    expect(prompt).toMatchObject({ description: 'The knowledge manifest', messages: [{ role: 'user', content: { type: 'text', text: '# Knowledge ✓\n\nDUTY\n' } }] });
  });

  it('fails a manifest read as a protocol error that says the outage is temporary', async () => {
    await open();
    daemon.backend.down = new KnowledgeError('unavailable', 'control plane http://cp is unreachable');
    await expect(mcp!.client.readResource({ uri: MANIFEST_URI })).rejects.toThrow('temporary: control plane http://cp is unreachable. Try again shortly.');
    await expect(mcp!.client.getPrompt({ name: 'knowledge_manifest' })).rejects.toThrow('temporary: control plane http://cp is unreachable. Try again shortly.');
  });
});

describe('MCP server: read_knowledge', () => {
  it('returns the content exactly, with the facts in _meta', async () => {
    await open();
    expect(await read({ path: 'knowledge/account/DUTY.md' })).toEqual({
      content: [{ type: 'text', text: '# Account\n' }],
      _meta: { path: 'knowledge/account/DUTY.md', sha256: sha256('# Account\n'), size: 10, offset: 0, totalChars: 10, truncated: false, nextOffset: null, mounted: false },
    });
    expect(calls('read ')).toEqual(['read account/DUTY.md mount=false']);
  });

  it('says where a cut page continues and that a team is now mounted', async () => {
    await open();
    const page = await read({ path: 'knowledge/team_search/DUTY.md', offset: 2, limit: 6 });
    expect(page.content).toEqual([
      { type: 'text', text: 'Search' },
      { type: 'text', text: '[cut at character 8 of 19: call read_knowledge again with path="knowledge/team_search/DUTY.md" and offset=8 to continue]' },
      { type: 'text', text: '[team_search is now mounted: ls, grep -r and find see knowledge/team_search/ from now on]' },
    ]);
    expect(page._meta).toMatchObject({ offset: 2, truncated: true, nextOffset: 8, mounted: true, totalChars: 19 });
    const rest = await read({ path: 'knowledge/team_search/DUTY.md', offset: 8 });
    expect(rest.content).toEqual([{ type: 'text', text: ' ünïcødé 😀\n' }]);
  });

  it('resolves a relative path from the server\'s cwd', async () => {
    await open({ cwd: '/runner/knowledge/team_payments' });
    expect((await read({ path: 'DUTY.md' }))._meta).toMatchObject({ path: 'knowledge/team_payments/DUTY.md' });
  });

  it('answers failures as isError results: the daemon\'s message, temporary outages said so, no reminder asked then', async () => {
    await open();
    expect(await read({ path: 'knowledge/team_storage/DUTY.md' })).toEqual({ content: [{ type: 'text', text: 'knowledge/team_storage/DUTY.md: no such file' }], isError: true, _meta: { code: 'not_found' } });
    daemon.backend.denied.add('team_search');
    expect(await read({ path: 'knowledge/team_search/DUTY.md' })).toEqual({ content: [{ type: 'text', text: 'this session belongs to team payments and cannot load team_search' }], isError: true, _meta: { code: 'denied' } });
    expect(await read({ path: 'knowledge/../etc' })).toMatchObject({ isError: true, _meta: { code: 'invalid_argument' } });
    const reminders = calls('reminder').length;
    daemon.backend.down = new KnowledgeError('membership_unavailable', 'membership source down');
    expect(await read({ path: 'knowledge/team_search/x' })).toEqual({ content: [{ type: 'text', text: 'temporary: membership source down. Try again shortly.' }], isError: true, _meta: { code: 'membership_unavailable' } });
    expect(calls('reminder').length).toBe(reminders);
    daemon.backend.down = new KnowledgeError('too_large', 'file over the cap');
    expect(await read({ path: 'knowledge/account/x' })).toMatchObject({ content: [{ type: 'text', text: 'too_large: file over the cap' }], isError: true, _meta: { code: 'too_large' } });
  });

  it('refuses arguments the schema does not allow before they reach the daemon', async () => {
    await open();
    for (const args of [{ path: '' }, { path: 'knowledge/a\0b' }, { path: 'knowledge/x', offset: -1 }, { path: 'knowledge/x', limit: 0 }, { path: 'knowledge/x', limit: 100_001 }, { path: 'knowledge/x', offset: 1.5 }, { path: 'knowledge/x', extra: 1 }, {}]) {
      expect((await read(args)).isError, JSON.stringify(args)).toBe(true);
    }
    expect((await read({ path: 'knowledge/a\0b' })).content[0]?.text).toContain('NUL character in path');
    expect(calls('read ')).toEqual([]);
  });

  it('appends the reminder once when files read earlier changed, and never with reminders off', async () => {
    await open();
    daemon.backend.pendingChanged = ['account/DUTY.md'];
    const first = await read({ path: 'knowledge/account/DUTY.md' });
    expect(first.content).toEqual([
      { type: 'text', text: '# Account\n' },
      { type: 'text', text: "<knowledgefs-reminder>\nToday's date is 2025-01-01.\nChanged since you read them: account/DUTY.md\n</knowledgefs-reminder>" },
    ]);
    expect((await read({ path: 'knowledge/account/DUTY.md' })).content).toHaveLength(1);
    daemon.backend.pendingDeleted = ['account/old.md'];
    const onError = await read({ path: 'knowledge/team_storage/DUTY.md' });
    expect(onError.isError).toBe(true);
    expect(onError.content[1]?.text).toBe("<knowledgefs-reminder>\nToday's date is 2025-01-01.\nGone since you read them: account/old.md\n</knowledgefs-reminder>");
    await mcp!.close();
    const before = calls('reminder').length;
    await open({ reminder: 'off' });
    daemon.backend.pendingChanged = ['account/DUTY.md'];
    expect((await read({ path: 'knowledge/account/DUTY.md' })).content).toHaveLength(1);
    expect(calls('reminder').length).toBe(before);
  });

  it('still answers when the reminder cannot be had, and logs why', async () => {
    await open();
    const backend = daemon.backend;
    const original = backend.reminder.bind(backend);
    backend.reminder = async () => { throw new KnowledgeError('internal', 'reminder broke'); };
    try {
      expect((await read({ path: 'knowledge/account/DUTY.md' })).content).toEqual([{ type: 'text', text: '# Account\n' }]);
      expect(mcp!.logs.some((l) => l.startsWith('reminder not attached: ') && l.includes('reminder broke'))).toBe(true);
    } finally {
      backend.reminder = original;
    }
  });
});

describe('MCP server: list_knowledge and search_knowledge', () => {
  it('list and search what is on disk under the mount, and ask the daemon only where it is', async () => {
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
    await open({ fsTools: true, cwd: join(root, '..'), reminder: 'off' });
    const list = async (args: Record<string, unknown>) => (await call(mcp!, 'list_knowledge', args)).content[0]?.text;
    const search = async (args: Record<string, unknown>) => (await call(mcp!, 'search_knowledge', args)).content[0]?.text;
    expect(await list({})).toBe('knowledge/account/\nknowledge/team_payments/');
    expect(await list({ path: 'knowledge/account' })).toBe('knowledge/account/DUTY.md\nknowledge/account/policies/');
    expect(await list({ path: join(root, 'account', 'policies') })).toBe('knowledge/account/policies/on-call.md');
    expect(await list({ path: 'knowledge', max_entries: 1 })).toBe('knowledge/account/\n[1 more entries not shown: list a subdirectory, or raise max_entries]');
    expect(await call(mcp!, 'list_knowledge', { path: 'knowledge/team_search' })).toMatchObject({ isError: true, content: [{ text: 'knowledge/team_search: no such file or directory' }], _meta: { code: 'invalid_argument' } });
    expect(await list({ path: 'knowledge/account/DUTY.md' })).toBe('knowledge/account/DUTY.md: not a directory');
    expect(await list({ path: '/etc' })).toBe(`/etc: outside knowledge/ (the mount at ${root}); give a path as ls prints it, e.g. knowledge/account`);
    expect(await search({ pattern: 'on-call lead' })).toBe('knowledge/account/DUTY.md:2:escalate to the on-call lead');
    expect(await search({ pattern: 'on-call lead', ignore_case: true })).toBe('knowledge/account/DUTY.md:2:escalate to the on-call lead\nknowledge/account/policies/on-call.md:2:then the ON-CALL lead');
    expect(await search({ pattern: 'lead', ignore_case: true, max_results: 1 })).toBe('knowledge/account/DUTY.md:2:escalate to the on-call lead\n[stopped at 1 matches: narrow the path or the pattern, or raise max_results]');
    expect(await search({ pattern: 'Payments', path: 'knowledge/account' })).toBe('no line under knowledge/account contains "Payments"');
    expect(await search({ pattern: 'primary', path: 'knowledge/account/policies/on-call.md' })).toBe('knowledge/account/policies/on-call.md:1:page the primary first');
    expect(await search({ pattern: 'x', path: 'knowledge/nope' })).toBe('knowledge/nope: no such file or directory');
    expect(daemon.backend.calls).toEqual([]);
  });

  it('list 1000 entries and search 100 matches by default, and ask where the mount is once', async () => {
    const root = join(dir, `many-${process.pid}`, 'knowledge');
    mkdirSync(join(root, 'account', 'many'), { recursive: true });
    for (let i = 0; i < 1001; i++) writeFileSync(join(root, 'account', 'many', `f${String(i).padStart(4, '0')}.md`), '');
    writeFileSync(join(root, 'account', 'hits.md'), 'hit\n'.repeat(101));
    const backend = new MemoryBackend(root);
    let asked = 0;
    const status = backend.status.bind(backend);
    backend.status = () => { asked++; return status(); };
    await daemon.close();
    daemon = await startMemoryDaemon(backend);
    await open({ fsTools: true, cwd: join(root, '..'), reminder: 'off' });
    const listed = (await call(mcp!, 'list_knowledge', { path: 'knowledge/account/many' })).content[0]!.text.split('\n');
    expect(listed).toHaveLength(1001);
    expect(listed.at(-1)).toBe('[1 more entries not shown: list a subdirectory, or raise max_entries]');
    const found = (await call(mcp!, 'search_knowledge', { pattern: 'hit', path: 'knowledge/account/hits.md' })).content[0]!.text.split('\n');
    expect(found).toHaveLength(101);
    expect(found.at(-1)).toBe('[stopped at 100 matches: narrow the path or the pattern, or raise max_results]');
    expect(asked).toBe(1);
  });
});

describe('MCP server: manifest subscriptions', () => {
  for (const revision of ['2026-07-28', '2025-11-25'] as const) {
    it(`tells a ${revision} subscriber when a read mounted a team, and stops asking once unsubscribed`, async () => {
      await open({ revision });
      expect(mcp!.watch.subscribed).toBe(false);
      const sub = await mcp!.subscribeManifest();
      expect(mcp!.watch.subscribed).toBe(true);
      daemon.backend.manifestText = 'MANIFEST\n\n## team_search\n';
      const r = await read({ path: 'knowledge/team_search/DUTY.md' });
      expect(r._meta).toMatchObject({ mounted: true });
      await mcp!.waitForManifestUpdates(1);
      // A read that mounts nothing does not ask.
      const asked = calls('manifest').length;
      await read({ path: 'knowledge/account/DUTY.md' });
      expect(calls('manifest').length).toBe(asked);
      await sub.close();
      await mcp!.client.listTools();
      expect(mcp!.watch.subscribed).toBe(false);
      expect(mcp!.manifestUpdates()).toBe(1);
    });
  }

  it('refuses a 2025-era subscription to anything but the manifest', async () => {
    await open({ revision: '2025-11-25' });
    const legacy = mcp!.client as unknown as { subscribeResource(p: { uri: string }): Promise<unknown>; unsubscribeResource(p: { uri: string }): Promise<unknown> };
    await expect(legacy.subscribeResource({ uri: 'knowledgefs://other' })).rejects.toThrow('knowledgefs://other: no such resource; knowledgefs://manifest is the one to subscribe to');
    await expect(legacy.unsubscribeResource({ uri: 'knowledgefs://other' })).rejects.toThrow('knowledgefs://other: no such resource');
    expect(mcp!.watch.subscribed).toBe(false);
  });

  it('a 2026-07-28 listen without the manifest is no manifest subscription', async () => {
    await open();
    const client = mcp!.client as unknown as { listen(p: { resourceSubscriptions?: string[]; toolsListChanged?: boolean }): Promise<{ close(): Promise<void> }> };
    const sub = await client.listen({ resourceSubscriptions: ['knowledgefs://other'] });
    expect(mcp!.watch.subscribed).toBe(false);
    await sub.close();
  });
});

describe('MCP stdio wire', () => {
  const serveRaw = (opts: RawStdioOptions = {}) => serveRawStdio(daemon.socketPath, opts);

  it('skips and logs lines that are not JSON-RPC, takes CRLF and blank lines, and answers what was asked before stdin closed', async () => {
    const s = serveRaw();
    s.stdin.write(line(initialize));
    expect((await s.answered(1))?.result).toBeDefined();
    s.stdin.write(line({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    s.stdin.write('this is not json\n\n   \n');
    s.stdin.write(`${JSON.stringify(readCall(2))}\r\n`);
    // Split across two writes, and closed right after.
    const third = line(readCall(3, 'knowledge/team_storage/DUTY.md'));
    s.stdin.write(third.slice(0, 10));
    s.stdin.end(third.slice(10));
    expect(await s.ended).toBe('stdin closed');
    const byId = new Map(s.messages().map((m) => [m.id, m]));
    expect(byId.get(2)?.result?.content?.[0]?.text).toBe('# Account\n');
    expect(byId.get(3)?.result).toMatchObject({ isError: true, content: [{ text: 'knowledge/team_storage/DUTY.md: no such file' }] });
    expect(s.logs.filter((l) => l.startsWith('bad input on stdin, skipped: '))).toHaveLength(1);
    expect(s.logs.find((l) => l.startsWith('bad input'))).not.toContain('\n');
  });

  it('ends on the stop signal, naming it', async () => {
    let stopWith!: (signal: string) => void;
    const s = serveRaw({ stop: new Promise<string>((r) => { stopWith = r; }) });
    s.stdin.write(line(initialize));
    await s.answered(1);
    stopWith('SIGTERM');
    expect(await s.ended).toBe('SIGTERM');
  });

  it('waits at most drainMs for an answer when stdin closes', async () => {
    const backend = daemon.backend;
    backend.read = () => new Promise(() => undefined); // never answers
    const s = serveRaw({ drainMs: 200 });
    s.stdin.write(line(initialize));
    await s.answered(1);
    const started = Date.now();
    s.stdin.end(line(readCall(2)));
    expect(await s.ended).toBe('stdin closed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(s.messages().some((m) => m.id === 2)).toBe(false);
  });

  it('gives up as "connection lost" on a line over 10 MiB', async () => {
    const s = serveRaw();
    s.stdin.write('x'.repeat(10 * 1024 * 1024 + 1));
    expect(await s.ended).toBe('connection lost');
    expect(s.logs).toContain('ReadBuffer exceeded maximum size of 10485760 bytes');
  });

  it('takes lines of several MiB across many chunks, one after another', async () => {
    const s = serveRaw();
    s.stdin.write(line(initialize));
    await s.answered(1);
    // Two lines of 6 MiB: the limit is per line, not for the whole session.
    for (const id of [2, 4]) {
      const big = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'read_knowledge', arguments: { path: 'knowledge/account/DUTY.md', pad: 'p'.repeat(6 * 1024 * 1024) } } });
      for (let i = 0; i < big.length; i += 1024 * 1024) s.stdin.write(big.slice(i, i + 1024 * 1024));
      s.stdin.write('\n');
    }
    s.stdin.write(line(readCall(3)));
    expect((await s.answered(3))?.result?.content?.[0]?.text).toBe('# Account\n');
    expect((await s.answered(2))?.result).toMatchObject({ isError: true });
    expect((await s.answered(4))?.result).toMatchObject({ isError: true });
    s.stdin.end();
    expect(await s.ended).toBe('stdin closed');
  });

  it('decodes a character split between two chunks', async () => {
    const s = serveRaw();
    s.stdin.write(line(initialize));
    await s.answered(1);
    const bytes = Buffer.from(line(readCall(2, 'knowledge/account/ü.md')));
    const cut = bytes.indexOf(Buffer.from('ü')) + 1; // inside the two bytes of ü
    s.stdin.write(bytes.subarray(0, cut));
    s.stdin.write(bytes.subarray(cut));
    expect((await s.answered(2))?.result).toMatchObject({ isError: true, content: [{ text: 'knowledge/account/ü.md: no such file' }] });
    s.stdin.end();
    await s.ended;
  });

  it('does not wait for a request the client cancelled, nor on a stop signal, and stops reading', async () => {
    daemon.backend.read = () => new Promise(() => undefined); // never answers
    const cancelled = serveRaw({ drainMs: 20_000 });
    cancelled.stdin.write(line(initialize));
    await cancelled.answered(1);
    const started = Date.now();
    cancelled.stdin.write(line(readCall(2)));
    cancelled.stdin.end(line({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2 } }));
    expect(await cancelled.ended).toBe('stdin closed');
    expect(Date.now() - started).toBeLessThan(10_000);

    let stopWith!: (signal: string) => void;
    const stopped = serveRaw({ stop: new Promise<string>((r) => { stopWith = r; }), drainMs: 20_000 });
    stopped.stdin.write(line(initialize));
    await stopped.answered(1);
    stopped.stdin.write(line(readCall(3)));
    await new Promise((r) => setTimeout(r, 50));
    const at = Date.now();
    stopWith('SIGINT');
    expect(await stopped.ended).toBe('SIGINT');
    expect(Date.now() - at).toBeLessThan(10_000);
    expect(stopped.stdin.isPaused()).toBe(true);
    // Closed: a request written now gets no answer.
    stopped.stdin.resume();
    stopped.stdin.write(line({ jsonrpc: '2.0', id: 9, method: 'tools/list' }));
    await new Promise((r) => setTimeout(r, 100));
    expect(stopped.messages().some((m) => m.id === 9)).toBe(false);
  });

  it('does not wait for an open 2026-07-28 listen when stdin closes', async () => {
    mcp = await startInProcessMcp({ socketPath: daemon.socketPath });
    const sub = await mcp.subscribeManifest();
    expect(mcp.watch.subscribed).toBe(true);
    void sub;
    const started = Date.now();
    await mcp.close();
    mcp = undefined;
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it('ends as "stdout closed" when stdout fails, and logs the code', async () => {
    const s = serveRaw();
    s.stdout.emit('error', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    expect(await s.ended).toBe('stdout closed');
    expect(s.logs).toContain('stdout: EPIPE');
  });
});

describe('tool results', () => {
  const base = { path: 'knowledge/team_x/a.md', content: 'abc', sha256: 'h', size: 3, offset: 0, totalChars: 3, truncated: false, nextOffset: null, mounted: false };

  it('names the total as the offset to continue when the cut page has no next offset', () => {
    expect(readToolResult({ ...base, truncated: true, nextOffset: null }).content[1]?.text).toBe('[cut at character 3 of 3: call read_knowledge again with path="knowledge/team_x/a.md" and offset=3 to continue]');
  });

  it('names the scope that was mounted, from the path', () => {
    expect(readToolResult({ ...base, mounted: true }).content.map((c) => c.text)).toEqual(['abc', '[team_x is now mounted: ls, grep -r and find see knowledge/team_x/ from now on]']);
    expect(readToolResult({ ...base, path: 'solo', mounted: true }).content[1]?.text).toBe('[solo is now mounted: ls, grep -r and find see solo/solo/ from now on]');
  });

  it('hides an internal error behind a fixed text and logs its stack', () => {
    const logged: string[] = [];
    const err = new TypeError('boom');
    expect(errorToolResult(err, (l) => logged.push(l))).toEqual({ content: [{ type: 'text', text: 'internal error in knowledgefs mcp (see its log)' }], isError: true, _meta: { code: 'internal' } });
    expect(logged).toEqual([`internal error: ${err.stack}`]);
    logged.length = 0;
    expect(errorText('a string', (l) => logged.push(l))).toBe('internal error in knowledgefs mcp (see its log)');
    expect(logged).toEqual(['internal error: a string']);
    const noStack = new Error('no stack');
    noStack.stack = undefined;
    errorText(noStack, (l) => logged.push(l));
    expect(logged.at(-1)).toBe('internal error: no stack');
  });

  it('passes refusals through untouched, says which are temporary, and prefixes other codes', () => {
    const none = () => { throw new Error('nothing should be logged'); };
    expect(errorText(new KnowledgeError('not_found', 'nf'), none)).toBe('nf');
    expect(errorText(new KnowledgeError('denied', 'dn'), none)).toBe('dn');
    expect(errorText(new KnowledgeError('invalid_argument', 'ia'), none)).toBe('ia');
    expect(errorText(new KnowledgeError('integrity', 'bad bytes'), none)).toBe('temporary: bad bytes. Try again shortly.');
    expect(errorText(new KnowledgeError('unauthorized', 'no token'), none)).toBe('unauthorized: no token');
  });

  it('delimits the reminder only when it names changes, ending its text with one newline', () => {
    expect(reminderBlock({ text: 'Today.\n', date: 'd', changed: [], deleted: [] })).toBeUndefined();
    expect(reminderBlock({ text: 'Today.\nChanged: a', date: 'd', changed: ['a'], deleted: [] })).toEqual({ type: 'text', text: '<knowledgefs-reminder>\nToday.\nChanged: a\n</knowledgefs-reminder>' });
    expect(reminderBlock({ text: 'Gone: b\n', date: 'd', changed: [], deleted: ['b'] })?.text).toBe('<knowledgefs-reminder>\nGone: b\n</knowledgefs-reminder>');
  });
});

describe('MCP server: what it tells the agent about each tool', () => {
  type Tool = { name: string; title?: string; description?: string; annotations?: { title?: string }; inputSchema: { properties: Record<string, { description?: string; maximum?: number }> } };

  it('describes every tool and argument by what it does, its default and its bound', async () => {
    await open({ fsTools: true });
    const { tools } = (await mcp!.client.listTools()) as unknown as { tools: Tool[] };
    const [readTool, listTool, searchTool] = tools;
    expect(readTool!.description).toMatch(/^Read a file under knowledge\/ by the path ls\/find print\. Access is checked afresh on every call\. A file of a team that is not on disk yet is loaded .*the whole team is then mounted/);
    expect(readTool!.inputSchema.properties['path']?.description).toContain('knowledge/<scope>/<path>');
    expect(readTool!.inputSchema.properties['offset']?.description).toContain('(default 0)');
    expect(readTool!.inputSchema.properties['offset']?.maximum).toBe(Number.MAX_SAFE_INTEGER);
    expect(readTool!.inputSchema.properties['limit']?.description).toBe('Characters to return at most (default and maximum 100000)');
    expect({ title: listTool!.title, annotation: listTool!.annotations?.title }).toEqual({ title: 'List a knowledge directory', annotation: 'List a knowledge directory' });
    expect(listTool!.description).toContain('as `ls -p` would');
    expect(listTool!.description).toContain('read one of its files with read_knowledge to mount it');
    expect(listTool!.inputSchema.properties['path']?.description).toBe('Directory to list, as ls prints it (default knowledge)');
    expect(listTool!.inputSchema.properties['max_entries']?.description).toBe('Entries to return at most (default 1000)');
    expect({ title: searchTool!.title, annotation: searchTool!.annotations?.title }).toEqual({ title: 'Search knowledge files', annotation: 'Search knowledge files' });
    expect(searchTool!.description).toContain('as `grep -rn -F` would: path:line:text');
    expect(searchTool!.inputSchema.properties['pattern']?.description).toBe('Text to look for (literal, not a regular expression)');
    expect(searchTool!.inputSchema.properties['path']?.description).toBe('Directory or file to search, as ls prints it (default knowledge)');
    expect(searchTool!.inputSchema.properties['ignore_case']?.description).toBe('Match regardless of case (default false)');
    expect(searchTool!.inputSchema.properties['max_results']).toMatchObject({ description: 'Matching lines to return at most (default 100)', maximum: 1000 });
  });

  it('describes the manifest resource and prompt, and marks the lists as fixed for the process', async () => {
    await open();
    const caps = (mcp!.client as unknown as { getServerCapabilities(): Record<string, unknown> }).getServerCapabilities();
    expect(caps).toMatchObject({ tools: { listChanged: false }, prompts: { listChanged: false }, resources: { subscribe: true, listChanged: false } });
    const tools = (await mcp!.client.listTools()) as unknown as { ttlMs?: number; cacheScope?: string };
    expect({ ttlMs: tools.ttlMs, cacheScope: tools.cacheScope }).toEqual({ ttlMs: 3_600_000, cacheScope: 'private' });
    for (const list of [await mcp!.client.listResources(), await mcp!.client.listPrompts()] as unknown as { ttlMs?: number; cacheScope?: string }[]) {
      expect({ ttlMs: list.ttlMs, cacheScope: list.cacheScope }).toEqual({ ttlMs: 3_600_000, cacheScope: 'private' });
    }
    const { resources } = (await mcp!.client.listResources()) as unknown as { resources: { description?: string }[] };
    expect(resources[0]?.description).toContain('the DUTY.md of every scope this session has');
    const { prompts } = (await mcp!.client.listPrompts()) as unknown as { prompts: { title?: string; description?: string }[] };
    expect(prompts[0]).toMatchObject({ title: 'Knowledge manifest' });
    expect(prompts[0]?.description).toContain('again after a context compaction');
  });
});
