// The sync loop through a real mount: edits, deletions and additions under
// the data dir reach `cat`/`ls` within the sync interval (polled with a
// generous bound, never a tight timing assertion); a same-size edit that
// keeps the mtime still drops the kernel's cached pages (mtime bump); a
// creator removed from a team loses that team's files and opens; a deleted
// session empties the mount.

import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, removeDataFile, writeDataFile, writeDirectory } from './helpers/data-dir.js';
import { fuseSuite, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const TEAMS = { payments: 'Payments', search: 'Search' };
const SYNC_ARGS = ['--sync-interval', '300ms', '--grant-ttl', '500ms'];
const BOUND = 20_000; // generous: grant TTL + sync interval + scan + kernel attr cache, on a busy machine

let cp: TestControlPlane;
let dataDir: string;
const mounts: MountHandle[] = [];

async function mountFor(session: { kind: 'team' | 'personal'; creator: string; team?: string }): Promise<MountHandle> {
  const { token } = await cp.createSession(session);
  const m = await startMount({ serverUrl: cp.url, token, args: SYNC_ARGS });
  mounts.push(m);
  return m;
}

const cat = async (path: string) => run('cat', [path]);

fuseSuite('mount sync', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({
      teams: TEAMS,
      users: { alice: { teams: ['payments', 'search'] } },
      files: {
        'account/DUTY.md': '# Account\n',
        'account/edit-me.md': 'version one\n',
        'account/same-size.md': 'AAAA\n',
        'account/delete-me.md': 'soon gone\n',
        'account/stat-me.md': 'looked up, then deleted\n',
        'account/shape': 'a file for now\n',
        'teams/payments/DUTY.md': '# Payments\n',
        'teams/search/DUTY.md': '# Search\n',
        'teams/search/runbooks/reindex.md': 'reindex steps\n',
      },
    });
    cp = await startControlPlane({ dataDir });
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop();
    await cp?.close();
    await removeDataDir(dataDir);
  });

  it('edit a file under the data dir → new bytes through the mount; delete → gone; add → appears', async () => {
    const m = await mountFor({ kind: 'team', creator: 'alice', team: 'payments' });
    const edited = join(m.mountpoint, 'account/edit-me.md');
    expect((await cat(edited)).stdout).toBe('version one\n');

    await writeDataFile(dataDir, 'account/edit-me.md', 'version two, longer\n');
    const seen = await waitFor(async () => (await cat(edited)).stdout === 'version two, longer\n', BOUND);
    expect(seen).toBe(true);
    expect((await run('wc', ['-c', edited])).stdout.trim()).toBe(`20 ${edited}`);

    await removeDataFile(dataDir, 'account/delete-me.md');
    const gone = await waitFor(async () => (await run('ls', [join(m.mountpoint, 'account')])).stdout.includes('delete-me.md') === false, BOUND);
    expect(gone).toBe(true);
    const catGone = await cat(join(m.mountpoint, 'account/delete-me.md'));
    expect({ code: catGone.code, stdout: catGone.stdout, stderr: catGone.stderr }).toEqual({
      code: 1,
      stdout: '',
      stderr: `cat: ${join(m.mountpoint, 'account/delete-me.md')}: No such file or directory\n`,
    });

    await writeDataFile(dataDir, 'account/new/added.md', 'brand new\n');
    const added = await waitFor(async () => (await cat(join(m.mountpoint, 'account/new/added.md'))).stdout === 'brand new\n', BOUND);
    expect(added).toBe(true);
    const found = await run('find', ['knowledge', '-name', 'added.md'], { cwd: m.dir });
    expect(found.stdout.trim()).toBe('knowledge/account/new/added.md');
  });

  it('a deleted file stops answering stat, and a path can turn from file to directory and back', async () => {
    const m = await mountFor({ kind: 'team', creator: 'alice', team: 'payments' });
    const statMe = join(m.mountpoint, 'account/stat-me.md');
    const shape = join(m.mountpoint, 'account/shape');
    // Look both names up so the kernel caches them (entries and attributes, 1 s).
    expect((await run('stat', ['-c', '%F', statMe])).stdout.trim()).toBe('regular file');
    expect((await cat(shape)).stdout).toBe('a file for now\n');

    await removeDataFile(dataDir, 'account/stat-me.md');
    expect(await waitFor(async () => (await run('stat', [statMe])).code !== 0, BOUND)).toBe(true);
    expect((await run('stat', [statMe])).stderr).toMatch(/No such file or directory/);

    await removeDataFile(dataDir, 'account/shape');
    await writeDataFile(dataDir, 'account/shape/inside.md', 'now a directory\n');
    expect(await waitFor(async () => (await cat(join(shape, 'inside.md'))).stdout === 'now a directory\n', BOUND)).toBe(true);
    expect((await run('stat', ['-c', '%F', shape])).stdout.trim()).toBe('directory');

    await removeDataFile(dataDir, 'account/shape');
    await writeDataFile(dataDir, 'account/shape', 'a file again\n');
    expect(await waitFor(async () => (await cat(shape)).stdout === 'a file again\n', BOUND)).toBe(true);
    expect((await run('stat', ['-c', '%F', shape])).stdout.trim()).toBe('regular file');
  });

  it('a same-size edit that keeps the mtime is still seen (the kernel page cache is dropped)', async () => {
    const m = await mountFor({ kind: 'team', creator: 'alice', team: 'payments' });
    const file = join(m.mountpoint, 'account/same-size.md');
    const source = join(dataDir, 'account/same-size.md');
    const reference = join(dataDir, 'same-size.ref');
    // Read twice so the kernel has the pages cached (auto_cache keeps them while size+mtime hold).
    expect((await cat(file)).stdout).toBe('AAAA\n');
    expect((await cat(file)).stdout).toBe('AAAA\n');
    const mtimeMs = async () => Math.round(Number((await run('stat', ['-c', '%.3Y', file])).stdout.trim()) * 1000);
    const mtimeBefore = await mtimeMs();
    // Same size, and the exact same mtime (touch -r copies it to the nanosecond).
    expect((await run('touch', ['-r', source, reference])).code).toBe(0);
    await writeDataFile(dataDir, 'account/same-size.md', 'BBBB\n');
    expect((await run('touch', ['-m', '-r', reference, source])).code).toBe(0);
    expect((await stat(source)).mtimeMs).toBe((await stat(reference)).mtimeMs);
    const seen = await waitFor(async () => (await cat(file)).stdout === 'BBBB\n', BOUND);
    expect(seen).toBe(true);
    // The mount reports a slightly later mtime (1 to 4 ms) so the kernel can tell.
    const bump = (await mtimeMs()) - mtimeBefore;
    expect(bump).toBeGreaterThanOrEqual(1);
    expect(bump).toBeLessThanOrEqual(4);
    // Never a mix: every read from now on is the new version.
    for (let i = 0; i < 3; i++) expect((await cat(file)).stdout).toBe('BBBB\n');
  });

  it('creator removed from a team → its files vanish and opens fail within grant TTL + sync interval', async () => {
    const m = await mountFor({ kind: 'personal', creator: 'alice', team: 'payments' });
    const file = join(m.mountpoint, 'team_search/runbooks/reindex.md');
    expect((await cat(file)).stdout).toBe('reindex steps\n');
    expect((await run('ls', [m.mountpoint])).stdout).toContain('team_search');

    await writeDirectory(dataDir, { teams: TEAMS, users: { alice: { teams: ['payments'] } } });
    const revoked = await waitFor(async () => {
      const ls = await run('ls', [m.mountpoint]);
      const c = await cat(file);
      return !ls.stdout.includes('team_search') && c.code !== 0;
    }, BOUND);
    expect(revoked).toBe(true);
    const c = await cat(file);
    expect(c.stdout).toBe('');
    expect(c.stderr).toContain('No such file or directory');
    const grep = await run('grep', ['-r', 'reindex', m.mountpoint]);
    expect(grep.stdout).toBe('');
    // Account and the bound team still work.
    expect((await cat(join(m.mountpoint, 'team_payments/DUTY.md'))).stdout).toBe('# Payments\n');

    await writeDirectory(dataDir, { teams: TEAMS, users: { alice: { teams: ['payments', 'search'] } } });
    const back = await waitFor(async () => (await cat(file)).stdout === 'reindex steps\n', BOUND);
    expect(back).toBe(true);
  });

  it('a deleted session empties the mount (fail closed)', async () => {
    const { sessionId, token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const m = await startMount({ serverUrl: cp.url, token, args: SYNC_ARGS });
    mounts.push(m);
    expect((await run('ls', [m.mountpoint])).stdout).toContain('account');
    const res = await fetch(`${cp.url}/v1/admin/sessions/${sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${cp.adminToken}` } });
    expect(res.status).toBe(204);
    const empty = await waitFor(async () => (await run('ls', ['-A', m.mountpoint])).stdout.trim() === '', BOUND);
    expect(empty).toBe(true);
    expect((await cat(join(m.mountpoint, 'account/DUTY.md'))).code).not.toBe(0);
    expect(m.stderr).toContain('the mount is now empty');
  });
});
