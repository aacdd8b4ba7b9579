// `knowledgefs mcp` to the SDK's own client for each protocol revision it
// speaks (2026-07-28 with the 2.x client; 2025-11-25 and 2025-06-18 with the
// 1.x client), each spawning the built CLI with a cleared environment
// against a real control socket over an in-memory backend: the revision
// agreed, the read tool, the manifest, and a manifest subscription told of a
// change (by the poll, and at once after a read that mounted a team). Then
// what is particular to 2026-07-28: ttlMs/cacheScope, and a tools/list that
// is byte-identical across server processes. The rest of the server's
// behaviour is in mcp-server.test.ts.

import { spawn } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startMemoryDaemon, sha256, type MemoryDaemon } from './helpers/memory-daemon.js';
import { call, connectMcp, MANIFEST_URI, REVISIONS, type McpConnection, type Revision } from './helpers/mcp-client.js';
import { BIN } from './helpers/mount.js';

let daemon: MemoryDaemon;
let mcp: McpConnection | undefined;
beforeEach(async () => { daemon = await startMemoryDaemon(); });
afterEach(async () => {
  await mcp?.close();
  mcp = undefined;
  await daemon.close();
});

const manifestCalls = () => daemon.backend.calls.filter((c) => c === 'manifest').length;

describe.each(REVISIONS.map((r) => [r]))('knowledgefs mcp to the SDK client speaking %s', (revision: Revision) => {
  it('agrees on the revision, serves the read tool and the manifest', async () => {
    mcp = await connectMcp(['--socket', daemon.socketPath], { revision });
    expect(mcp.negotiated()).toBe(revision);
    expect((await mcp.client.listTools()).tools.map((t) => t.name)).toEqual(['read_knowledge']);
    expect(await call(mcp, 'read_knowledge', { path: 'knowledge/account/DUTY.md' })).toMatchObject({ content: [{ type: 'text', text: '# Account\n' }] });
    const res = await mcp.client.readResource({ uri: MANIFEST_URI });
    expect(res.contents).toEqual([{ uri: MANIFEST_URI, mimeType: 'text/markdown', text: 'MANIFEST\n', _meta: { sha256: sha256('MANIFEST\n') } }]);
    // Cache hints are 2026-07-28 vocabulary: a 2025-era result has none.
    if (revision !== '2026-07-28') expect(Object.keys(res).filter((k) => k === 'ttlMs' || k === 'cacheScope')).toEqual([]);
  });

  it('tells a manifest subscriber of a change the poll finds, and asks nothing once unsubscribed', async () => {
    mcp = await connectMcp(['--socket', daemon.socketPath, '--manifest-poll', '100ms'], { revision });
    const sub = await mcp.subscribeManifest();
    daemon.backend.manifestText = 'MANIFEST\n\n## team_search\n';
    await mcp.waitForManifestUpdates(1);
    // Unchanged from then on: polled, not notified again.
    const before = manifestCalls();
    while (manifestCalls() < before + 2) await new Promise((r) => setTimeout(r, 50));
    expect(mcp.manifestUpdates()).toBe(1);
    await sub.close();
    await mcp.client.listTools(); // a round trip after the unsubscribe: the server has seen it
    const after = manifestCalls();
    await new Promise((r) => setTimeout(r, 400)); // four poll intervals
    expect(manifestCalls()).toBe(after);
  });

  it('tells a manifest subscriber at once when a read mounted a team, and asks nothing without a subscriber', async () => {
    // An hour between polls: the notice can only come from the read.
    mcp = await connectMcp(['--socket', daemon.socketPath, '--manifest-poll', '1h'], { revision });
    daemon.backend.manifestText = 'MANIFEST\n';
    const mounted = await call(mcp, 'read_knowledge', { path: 'knowledge/team_search/DUTY.md' });
    expect(mounted._meta).toMatchObject({ mounted: true });
    expect(manifestCalls()).toBe(0);

    await mcp.subscribeManifest();
    daemon.backend.mountedTeams = []; // as if the team were new again
    daemon.backend.tree.delete('team_search/DUTY.md');
    daemon.backend.manifestText = 'MANIFEST\n\n## team_search\n';
    const again = await call(mcp, 'read_knowledge', { path: 'knowledge/team_search/DUTY.md' });
    expect(again._meta).toMatchObject({ mounted: true });
    // Sent before the read's result.
    expect(mcp.manifestUpdates()).toBe(1);
    // A read that mounts nothing asks nothing.
    const calls = manifestCalls();
    await call(mcp, 'read_knowledge', { path: 'knowledge/account/DUTY.md' });
    expect(manifestCalls()).toBe(calls);
    expect(mcp.manifestUpdates()).toBe(1);
  });
});

describe('knowledgefs mcp on 2026-07-28', () => {
  it('puts true cache hints on list and read results: lists for the process, the manifest never', async () => {
    const lines = await rawModern(['--socket', daemon.socketPath], [
      { method: 'server/discover' },
      { method: 'tools/list' },
      { method: 'resources/list' },
      { method: 'prompts/list' },
      { method: 'resources/read', params: { uri: MANIFEST_URI } },
    ]);
    const results = lines.map((l) => (JSON.parse(l) as { id: number; result: Record<string, unknown> })).sort((a, b) => a.id - b.id).map((m) => m.result);
    for (const r of results.slice(0, 4)) expect(r).toMatchObject({ ttlMs: 3_600_000, cacheScope: 'private' });
    expect(results[4]).toMatchObject({ ttlMs: 0, cacheScope: 'private', contents: [{ text: 'MANIFEST\n' }] });
  });

  it('answers tools/list byte for byte the same from two server processes, in a fixed order', async () => {
    const args = ['--socket', daemon.socketPath, '--fs-tools'];
    const [a, b] = await Promise.all([rawModern(args, [{ method: 'tools/list' }]), rawModern(args, [{ method: 'tools/list' }])]);
    expect(a).toHaveLength(1);
    expect(b).toEqual(a);
    const { tools } = (JSON.parse(a[0] ?? '') as { result: { tools: { name: string }[] } }).result;
    expect(tools.map((t) => t.name)).toEqual(['read_knowledge', 'list_knowledge', 'search_knowledge']);
  });
});

const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** Sends 2026-07-28 requests (ids 1, 2, …) over raw stdio to a fresh server; resolves with its stdout lines once all are answered. */
async function rawModern(args: string[], requests: { method: string; params?: Record<string, unknown> }[]): Promise<string[]> {
  const child = spawn(process.execPath, [BIN, 'mcp', ...args], { env: { PATH: process.env.PATH ?? '' }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  child.stderr.resume();
  const answered = new Promise<void>((resolve) => {
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (stdout.split('\n').filter((l) => l !== '').length >= requests.length) resolve();
    });
  });
  requests.forEach((r, i) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: i + 1, method: r.method, params: { ...r.params, _meta: ENVELOPE } })}\n`));
  await answered;
  child.stdin.end();
  await new Promise((r) => child.once('exit', r));
  return stdout.split('\n').filter((l) => l !== '');
}
