// `knowledgefs mcp` end to end: a real control plane, a real FUSE mount
// (`knowledgefs mount` as a child process), the SDK's real MCP client
// spawning `knowledgefs mcp --socket …` with a cleared environment, and real
// `ls`/`grep` on the mount. A personal session of alice (member of payments
// and search, bound to payments; the threshold keeps search off disk):
//
// - an MCP read of search's DUTY.md mounts the team, says so, and `ls` and
//   `grep -r` see it when the call has returned; the list tool too;
// - storage (alice is not a member) reads exactly like a path that does not
//   exist, and never shows up in the list tool;
// - the reminder rides on a later tool result once, naming an edited file the
//   agent read, and never the file it was denied;
// - the manifest resource is byte-identical to `knowledgefs manifest`, and
//   gained search's DUTY.md;
// - a client subscribed to the manifest (2026-07-28 `subscriptions/listen`,
//   the 2.x SDK client) is told it changed when its read mounts a team.

import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';
import { call, connectMcp, MANIFEST_URI, type McpConnection } from './helpers/mcp-client.js';
import { BIN, fuseSuite, run, startMount, type MountHandle } from './helpers/mount.js';

const FILES = {
  'account/DUTY.md': '# Account\nShared policies.\n',
  'teams/payments/DUTY.md': '# Payments\nCards and payouts.\n',
  'teams/payments/runbooks/checkout-5xx.md': 'restart the checkout pods\n',
  'teams/search/DUTY.md': '# Search\nOwns indexing. SEARCH-DUTY-MARKER\n',
  'teams/search/runbooks/reindex.md': 'reindex-marker-7f3a: run the reindex job\n',
  'teams/storage/DUTY.md': '# Storage\nSTORAGE-SECRET-MARKER\n',
};

let data = '';
let members: FaultMembership;
let cp: TestControlPlane;
let m: MountHandle | undefined;
let mcp: McpConnection | undefined;

beforeAll(async () => {
  data = await makeDataDir({ teams: { payments: 'Payments', search: 'Search', storage: 'Storage' }, files: FILES });
  members = await startFaultMembership({ alice: ['payments', 'search'] });
  cp = await startControlPlane({ dataDir: data, membershipUrl: members.url, membershipTimeoutMs: 1_000 });
});

afterAll(async () => {
  await mcp?.close().catch(() => undefined);
  await m?.stop().catch(() => undefined);
  await cp?.close();
  await members?.close();
  if (data) await removeDataDir(data);
});

afterEach(async () => {
  await mcp?.close().catch(() => undefined);
  mcp = undefined;
  await m?.stop().catch(() => undefined);
  m = undefined;
});

const ls = async (sub = '') => (await run('ls', [`knowledge/${sub}`], { cwd: m!.dir })).stdout.split('\n').filter(Boolean);
const read = (path: string) => call(mcp!, 'read_knowledge', { path });

fuseSuite('knowledgefs mcp end to end', () => {
  it('mounts an eligible team through an MCP read, hides the rest like missing files, and reminds once', async () => {
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    m = await startMount({ serverUrl: cp.url, token: session.token, args: ['--prefetch-threshold', '1', '--grant-ttl', '0', '--sync-interval', '200ms'] });
    mcp = await connectMcp(['--socket', m.socketPath, '--fs-tools'], { cwd: m.dir });
    const list = async (path: string) => (await call(mcp!, 'list_knowledge', { path })).content[0]?.text ?? '';

    expect(await ls()).toEqual(['account', 'team_payments']);
    expect(await list('knowledge')).toBe('knowledge/account/\nknowledge/team_payments/');

    const searchDuty = await read('knowledge/team_search/DUTY.md');
    expect(searchDuty.isError).toBeUndefined();
    expect(searchDuty.content).toEqual([
      { type: 'text', text: FILES['teams/search/DUTY.md'] },
      { type: 'text', text: '[team_search is now mounted: ls, grep -r and find see knowledge/team_search/ from now on]' },
    ]);
    expect(searchDuty._meta).toMatchObject({ path: 'knowledge/team_search/DUTY.md', mounted: true, size: Buffer.byteLength(FILES['teams/search/DUTY.md']) });
    // On disk as soon as the call returned.
    expect(await ls()).toEqual(['account', 'team_payments', 'team_search']);
    const grep = await run('grep', ['-r', 'reindex-marker-7f3a', 'knowledge'], { cwd: m.dir });
    expect(grep.stdout).toBe('knowledge/team_search/runbooks/reindex.md:reindex-marker-7f3a: run the reindex job\n');
    expect(await list('knowledge')).toBe('knowledge/account/\nknowledge/team_payments/\nknowledge/team_search/');
    expect((await call(mcp, 'search_knowledge', { pattern: 'reindex-marker' })).content[0]?.text).toBe('knowledge/team_search/runbooks/reindex.md:1:reindex-marker-7f3a: run the reindex job');

    // storage: exactly a missing file, in every byte of the result.
    const hidden = await read('knowledge/team_storage/DUTY.md');
    const missing = await read('knowledge/team_nothere/DUTY.md');
    expect(hidden).toEqual({ content: [{ type: 'text', text: 'knowledge/team_storage/DUTY.md: no such file' }], isError: true, _meta: { code: 'not_found' } });
    expect(JSON.stringify(missing).replace('team_nothere', 'team_storage')).toBe(JSON.stringify(hidden));
    expect(await ls()).not.toContain('team_storage');
    expect((await call(mcp, 'search_knowledge', { pattern: 'STORAGE-SECRET' })).content[0]?.text).toBe('no line under knowledge contains "STORAGE-SECRET"');

    // The manifest gained search's DUTY.md, and is byte-identical to the CLI's.
    const cli = await run(process.execPath, [BIN, 'manifest', '--socket', m.socketPath]);
    const resource = await mcp.client.readResource({ uri: 'knowledgefs://manifest' });
    expect(resource.contents[0]).toMatchObject({ text: cli.stdout });
    expect(cli.stdout).toContain('SEARCH-DUTY-MARKER');
    expect(cli.stdout).not.toContain('STORAGE-SECRET-MARKER');

    // Edit a file read through MCP, and the file that was denied.
    expect((await read('knowledge/team_payments/runbooks/checkout-5xx.md')).content[0]?.text).toBe('restart the checkout pods\n');
    await writeDataFile(data, 'teams/payments/runbooks/checkout-5xx.md', 'restart the checkout pods, then drain the queue\n');
    await writeDataFile(data, 'teams/storage/DUTY.md', '# Storage\nedited\n');
    await cp.rescan();
    const next = await read('knowledge/account/DUTY.md');
    expect(next.content[0]?.text).toBe(FILES['account/DUTY.md']);
    const reminder = next.content[1]?.text ?? '';
    expect(reminder).toMatch(/^<knowledgefs-reminder>\nToday's date is \d{4}-\d{2}-\d{2}\.\n[\s\S]*- knowledge\/team_payments\/runbooks\/checkout-5xx\.md\n[\s\S]*<\/knowledgefs-reminder>$/);
    expect(reminder).not.toContain('storage');
    expect(reminder).not.toContain('drain the queue');
    expect(next.content).toHaveLength(2);
    // Once.
    expect((await read('knowledge/account/DUTY.md')).content).toHaveLength(1);
    expect(mcp.stderr()).not.toMatch(/internal error/);
  });

  it('tells a client subscribed to the manifest that it changed when its read mounted a team', async () => {
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    m = await startMount({ serverUrl: cp.url, token: session.token, args: ['--prefetch-threshold', '1', '--grant-ttl', '0'] });
    // An hour between polls: the notice can only come from the read that mounted.
    mcp = await connectMcp(['--socket', m.socketPath, '--manifest-poll', '1h'], { cwd: m.dir, revision: '2026-07-28' });
    const before = await mcp.client.readResource({ uri: MANIFEST_URI });
    expect(JSON.stringify(before.contents)).not.toContain('SEARCH-DUTY-MARKER');
    await mcp.subscribeManifest();

    const searchDuty = await read('knowledge/team_search/runbooks/reindex.md');
    expect(searchDuty._meta).toMatchObject({ mounted: true });
    await mcp.waitForManifestUpdates(1);
    const after = await mcp.client.readResource({ uri: MANIFEST_URI });
    expect(JSON.stringify(after.contents)).toContain('SEARCH-DUTY-MARKER');
    expect(await ls()).toEqual(['account', 'team_payments', 'team_search']);
    // Reading in a team already mounted changes nothing and says nothing.
    await read('knowledge/team_search/DUTY.md');
    expect(mcp.manifestUpdates()).toBe(1);
  });
});
