// End to end: a real control plane, real mounts (`knowledgefs mount` as child
// processes), the real CLI (`node bin/knowledgefs.js read|manifest|reminder`)
// and real shell tools, for the read tool's scenarios:
//
// - personal session (creator in payments and search, bound to payments,
//   threshold too low for search): search is not on disk, `cat` fails, `read`
//   loads it and mounts the team, `ls`/`grep -r` see it at once, the manifest
//   gains its DUTY.md in the mount section; a team the creator is not in reads
//   exactly like a missing file;
// - team session asking for another team: exit 3 and the guidance;
// - membership source down (port closed, then HTTP 500): other teams fail with
//   exit 4 naming the membership source; account and own team still read;
// - a file still in the tree whose team was revoked: refused, content not
//   printed, not in the read set;
// - reminder: an edited read file is named once; new files and denied reads
//   never appear;
// - control plane unreachable: exit 4 naming the control plane.
//
// Membership comes from an HTTP service the test controls, so revocation and
// outages happen without touching the data dir.

import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KnowledgeClient } from '../src/client/knowledge-client.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile } from './helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.js';
import { BIN, fuseSuite, run, startMount, type MountHandle, type RunResult } from './helpers/mount.js';

const SEARCH_DUTY = '# Search\nOwns indexing and ranking. SEARCH-DUTY-MARKER\n';
const FILES = {
  'account/DUTY.md': '# Account\nShared policies.\n',
  'account/policies/on-call.md': 'page the primary first\n',
  'teams/payments/DUTY.md': '# Payments\nCards and payouts.\n',
  'teams/payments/runbooks/checkout-5xx.md': 'restart the checkout pods\n',
  'teams/search/DUTY.md': SEARCH_DUTY,
  'teams/search/runbooks/reindex.md': 'reindex-marker-7f3a: run the reindex job\n',
  'teams/search/runbooks/cluster-red.md': 'cluster red: check shard allocation\n',
  'teams/storage/DUTY.md': '# Storage\nSTORAGE-SECRET-MARKER\n',
};
const LOW = ['--prefetch-threshold', '1', '--grant-ttl', '0', '--sync-interval', '200ms'];

let data = '';
let members: FaultMembership;
let cp: TestControlPlane;
const mounts: MountHandle[] = [];

beforeAll(async () => {
  data = await makeDataDir({ teams: { payments: 'Payments', search: 'Search', storage: 'Storage' }, files: FILES });
  members = await startFaultMembership({ alice: ['payments', 'search'], carol: ['payments'] });
  cp = await startControlPlane({ dataDir: data, membershipUrl: members.url, membershipTimeoutMs: 1_000 });
});

afterAll(async () => {
  for (const m of mounts) await m.stop().catch(() => undefined);
  await cp?.close();
  await members?.close();
  if (data) await removeDataDir(data);
});

async function mountSession(input: { kind: 'team' | 'personal'; creator: string; team?: string }, args: string[], serverUrl = cp.url) {
  const session = await cp.createSession(input);
  const m = await startMount({ serverUrl, token: session.token, args });
  mounts.push(m);
  return { m, sessionId: session.sessionId };
}

/** `knowledgefs <args>` from the directory holding the mount. */
function kfs(m: MountHandle, args: string[], cwd = m.dir): Promise<RunResult> {
  return run(process.execPath, [BIN, ...args, '--socket', m.socketPath], { cwd, timeoutMs: 30_000 });
}

const ls = async (m: MountHandle, sub = '') => (await run('ls', [join('knowledge', sub)], { cwd: m.dir })).stdout.split('\n').filter(Boolean);
const readSetOf = (sessionId: string) => (cp.cp.sessions.cached(sessionId)?.readSet ?? []).map((e) => e.path);

fuseSuite('read tool end to end', () => {
  it('personal session: read loads and mounts an eligible team; a team the creator is not in reads like a missing file', async () => {
    const { m, sessionId } = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' }, LOW);
    try {
      expect(await ls(m)).toEqual(['account', 'team_payments']);
      const cat = await run('cat', ['knowledge/team_search/DUTY.md'], { cwd: m.dir });
      expect(cat.code).not.toBe(0);
      expect(cat.stderr).toMatch(/No such file or directory/);
      const before = await kfs(m, ['manifest']);
      expect(before.stdout).not.toContain('SEARCH-DUTY-MARKER');

      const read = await kfs(m, ['read', 'knowledge/team_search/DUTY.md']);
      expect(read).toMatchObject({ code: 0, stdout: SEARCH_DUTY, stderr: '' });
      // Mounted before the command returned: no waiting.
      expect(await ls(m)).toEqual(['account', 'team_payments', 'team_search']);
      expect(await ls(m, 'team_search/runbooks')).toEqual(['cluster-red.md', 'reindex.md']);
      const grep = await run('grep', ['-r', 'reindex-marker-7f3a', 'knowledge'], { cwd: m.dir });
      expect(grep.code).toBe(0);
      expect(grep.stdout).toBe('knowledge/team_search/runbooks/reindex.md:reindex-marker-7f3a: run the reindex job\n');
      expect((await run('cat', ['knowledge/team_search/DUTY.md'], { cwd: m.dir })).stdout).toBe(SEARCH_DUTY);

      // The absolute path form, from anywhere.
      const abs = await kfs(m, ['read', join(m.mountpoint, 'team_search/runbooks/cluster-red.md')], '/');
      expect(abs).toMatchObject({ code: 0, stdout: 'cluster red: check shard allocation\n' });

      const manifest = await kfs(m, ['manifest']);
      expect(manifest.code).toBe(0);
      const mountSection = manifest.stdout.indexOf('## Mounted teams');
      expect(manifest.stdout.indexOf('SEARCH-DUTY-MARKER')).toBeGreaterThan(mountSection);
      expect(manifest.stdout.slice(0, mountSection)).toBe(before.stdout.slice(0, before.stdout.indexOf('## Mounted teams')));

      // Not a member of storage: exactly what a path that does not exist prints.
      const hidden = await kfs(m, ['read', 'knowledge/team_storage/DUTY.md']);
      const missing = await kfs(m, ['read', 'knowledge/team_nothere/DUTY.md']);
      const missingInTeam = await kfs(m, ['read', 'knowledge/team_search/nothere.md']);
      expect(hidden.code).toBe(1);
      expect(hidden.stdout).toBe('');
      expect(hidden.stderr).toBe('knowledgefs: knowledge/team_storage/DUTY.md: no such file\n');
      expect({ ...missing, ms: 0, stderr: missing.stderr.replace('team_nothere', 'team_storage') }).toEqual({ ...hidden, ms: 0 });
      expect(missingInTeam.stderr).toBe('knowledgefs: knowledge/team_search/nothere.md: no such file\n');
      const hiddenJson = await kfs(m, ['read', 'knowledge/team_storage/DUTY.md', '--json']);
      const missingJson = await kfs(m, ['read', 'knowledge/team_nothere/DUTY.md', '--json']);
      expect(hiddenJson.code).toBe(1);
      expect(missingJson.stdout.replace('team_nothere', 'team_storage')).toBe(hiddenJson.stdout);
      expect(await ls(m)).toEqual(['account', 'team_payments', 'team_search']);

      expect(readSetOf(sessionId)).toEqual(['team_search/DUTY.md', 'team_search/runbooks/cluster-red.md']);
      expect(cp.cp.sessions.cached(sessionId)?.mounted).toEqual(['search']);
    } finally {
      await m.stop();
    }
  });

  it('team session asking for another team: exit 3 and the guidance', async () => {
    const { m, sessionId } = await mountSession({ kind: 'team', creator: 'alice', team: 'payments' }, LOW);
    try {
      const r = await kfs(m, ['read', 'knowledge/team_search/DUTY.md']);
      expect(r.code).toBe(3);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/belongs to team "payments" and cannot load team "search"/);
      expect(r.stderr).toMatch(/ask an admin to share/);
      expect(r.stderr).toMatch(/personal session/);
      expect(r.stderr).toMatch(/hand the incident to team "search"/);
      const json = JSON.parse((await kfs(m, ['read', 'knowledge/team_search/DUTY.md', '--json'])).stdout) as { ok: boolean; error: { code: string } };
      expect(json).toMatchObject({ ok: false, error: { code: 'denied' } });
      expect((await kfs(m, ['read', 'knowledge/team_payments/DUTY.md'])).code).toBe(0);
      expect(await ls(m)).toEqual(['account', 'team_payments']);
      expect(readSetOf(sessionId)).toEqual(['team_payments/DUTY.md']);
    } finally {
      await m.stop();
    }
  });

  it('membership source down: other teams fail with exit 4 naming it; account and own team still read', async () => {
    const { m, sessionId } = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' }, LOW);
    try {
      for (const mode of [{ kind: 'down' as const }, { kind: 'status' as const, status: 500 }]) {
        await members.setMode(mode);
        const other = await kfs(m, ['read', 'knowledge/team_search/DUTY.md']);
        expect(other.code, mode.kind).toBe(4);
        expect(other.stdout).toBe('');
        expect(other.stderr).toMatch(/membership source/);
        const json = JSON.parse((await kfs(m, ['read', 'knowledge/team_search/DUTY.md', '--json'])).stdout) as { error: { code: string } };
        expect(json.error.code).toBe('membership_unavailable');
        expect(await kfs(m, ['read', 'knowledge/account/DUTY.md'])).toMatchObject({ code: 0, stdout: FILES['account/DUTY.md'] });
        expect(await kfs(m, ['read', 'knowledge/team_payments/DUTY.md'])).toMatchObject({ code: 0, stdout: FILES['teams/payments/DUTY.md'] });
      }
      expect(await ls(m)).toEqual(['account', 'team_payments']);
      expect(readSetOf(sessionId)).toEqual(['account/DUTY.md', 'team_payments/DUTY.md']);
      expect(cp.cp.sessions.cached(sessionId)?.mounted).toEqual([]);
    } finally {
      await members.setMode({ kind: 'ok' });
      await m.stop();
    }
  });

  it('a file still in the tree whose team was revoked: refused, not printed, not in the read set', async () => {
    const proxy: FaultProxy = await startFaultProxy(cp.url);
    // Everything on disk that the session may load (search included, no read needed).
    const { m, sessionId } = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' }, ['--grant-ttl', '0', '--sync-interval', '200ms'], proxy.url);
    try {
      expect(await ls(m)).toEqual(['account', 'team_payments', 'team_search']);
      expect((await kfs(m, ['read', 'knowledge/team_search/DUTY.md'])).code).toBe(0);
      // Freeze the daemon's view: plan requests hang, so team_search stays in its tree.
      proxy.setRules([{ match: (method, url) => method === 'GET' && url.startsWith('/v1/plan'), mode: { kind: 'hang' } }]);
      members.setTeams('alice', ['payments']);
      const client = new KnowledgeClient({ socketPath: m.socketPath });
      const status = await client.status();
      client.close();
      expect(status.scopes).toContain('team_search');

      const r = await kfs(m, ['read', 'knowledge/team_search/runbooks/reindex.md']);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe('knowledgefs: knowledge/team_search/runbooks/reindex.md: no such file\n');
      expect(r.stderr).not.toContain('reindex-marker');
      expect(readSetOf(sessionId)).toEqual(['team_search/DUTY.md']);
      // The refused file never shows up in the reminder; the one read before is now gone for this session.
      const reminder = await kfs(m, ['reminder', '--json']);
      const body = JSON.parse(reminder.stdout) as { changed: string[]; deleted: string[]; text: string };
      expect(body.deleted).toEqual(['team_search/DUTY.md']);
      expect(body.text).not.toContain('reindex');

      // Control plane unreachable: exit 4, naming the control plane; nothing printed.
      proxy.setRules([]);
      proxy.setMode({ kind: 'refuse' });
      const down = await kfs(m, ['read', 'knowledge/account/DUTY.md']);
      expect(down.code).toBe(4);
      expect(down.stdout).toBe('');
      expect(down.stderr).toMatch(/control plane at http:\/\/127\.0\.0\.1:\d+ unavailable/);
    } finally {
      members.setTeams('alice', ['payments', 'search']);
      proxy.setRules([]);
      proxy.dropConnections();
      await m.stop();
      await proxy.close();
    }
  });

  it('reminder: an edited read file is named once; new files and denied reads never appear', async () => {
    const { m, sessionId } = await mountSession({ kind: 'personal', creator: 'alice', team: 'payments' }, LOW);
    try {
      const first = await kfs(m, ['reminder']);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/^Today's date is \d{4}-\d{2}-\d{2}\.\n$/);

      expect((await kfs(m, ['read', 'knowledge/team_payments/runbooks/checkout-5xx.md'])).code).toBe(0);
      expect((await kfs(m, ['read', 'knowledge/team_storage/DUTY.md'])).code).toBe(1);
      await writeDataFile(data, 'teams/payments/runbooks/checkout-5xx.md', 'restart the checkout pods, then drain the queue\n');
      await writeDataFile(data, 'teams/payments/runbooks/new-runbook.md', 'brand new\n');
      await writeDataFile(data, 'teams/storage/DUTY.md', '# Storage\nedited\n');
      await cp.rescan();

      const changed = await kfs(m, ['reminder']);
      expect(changed.code).toBe(0);
      expect(changed.stdout).toContain('- knowledge/team_payments/runbooks/checkout-5xx.md\n');
      expect(changed.stdout).not.toContain('drain the queue');
      expect(changed.stdout).not.toContain('new-runbook');
      expect(changed.stdout).not.toContain('storage');
      // Reported once.
      const again = await kfs(m, ['reminder', '--json']);
      expect(JSON.parse(again.stdout)).toMatchObject({ ok: true, changed: [], deleted: [] });

      // Deleted after reading: reported once as gone.
      await removeDataFile(data, 'teams/payments/runbooks/checkout-5xx.md');
      await cp.rescan();
      const gone = JSON.parse((await kfs(m, ['reminder', '--json'])).stdout) as { changed: string[]; deleted: string[] };
      expect(gone).toMatchObject({ changed: [], deleted: ['team_payments/runbooks/checkout-5xx.md'] });
      expect(JSON.parse((await kfs(m, ['reminder', '--json'])).stdout)).toMatchObject({ changed: [], deleted: [] });
      expect(readSetOf(sessionId)).toEqual([]);
    } finally {
      await writeDataFile(data, 'teams/payments/runbooks/checkout-5xx.md', FILES['teams/payments/runbooks/checkout-5xx.md']);
      await removeDataFile(data, 'teams/payments/runbooks/new-runbook.md');
      await m.stop();
    }
  });
});
