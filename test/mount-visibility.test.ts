// What a real mount shows, driven with real `ls`, `find`, `grep -r`, `cat`,
// `stat`, `wc`, `tail` in child processes: a team session sees account + its
// own team only; a personal session sees every team of its creator under the
// prefetch threshold and account + bound (+ mounted) over it; writes of any
// kind are EROFS; sizes, modes and bytes agree.

import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { fuseSuite, run, sh, startMount, type MountHandle } from './helpers/mount.js';

const FILES: Record<string, string> = {
  'account/DUTY.md': '# Account\nshared rules\n',
  'account/policies/severity.md': 'SEV1 means customers are down. needle-account\n',
  'teams/payments/DUTY.md': '# Payments\n',
  'teams/payments/runbooks/refunds.md': 'Refund queue stuck: drain it. needle-payments\n',
  'teams/payments/runbooks/deep/nested/ledger.md': 'ledger lines\n'.repeat(500),
  'teams/search/DUTY.md': '# Search\n',
  'teams/search/runbooks/reindex.md': 'Reindex the cluster. needle-search\n',
  'teams/storage/DUTY.md': '# Storage\n',
  'teams/storage/runbooks/disk.md': 'Disk full. needle-storage\n',
};

let cp: TestControlPlane;
let dataDir: string;
const mounts: MountHandle[] = [];

async function mountFor(session: { kind: 'team' | 'personal'; creator: string; team?: string }, args: string[] = []): Promise<MountHandle> {
  const { token } = await cp.createSession(session);
  const m = await startMount({ serverUrl: cp.url, token, args });
  mounts.push(m);
  return m;
}

fuseSuite('mount visibility', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({
      teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
      users: { alice: { teams: ['payments', 'search'] }, root: { teams: ['payments', 'search', 'storage'], role: 'owner' } },
      files: FILES,
    });
    cp = await startControlPlane({ dataDir });
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop();
    await cp?.close();
    await removeDataDir(dataDir);
  });

  it('team session: ls, find, grep -r, cat, stat see account + own team only; other teams are ENOENT', async () => {
    // An owner of every team gets no exemption in a team session.
    const m = await mountFor({ kind: 'team', creator: 'root', team: 'payments' });
    expect(m.readyLine).toBe(`mounted ${m.mountpoint} (5 files, 2 scopes)`);

    const ls = await run('ls', [m.mountpoint]);
    expect(ls.stdout.split('\n').filter(Boolean)).toEqual(['account', 'team_payments']);

    const find = await run('find', ['knowledge', '-type', 'f'], { cwd: m.dir });
    expect(find.stdout.split('\n').filter(Boolean).sort()).toEqual([
      'knowledge/account/DUTY.md',
      'knowledge/account/policies/severity.md',
      'knowledge/team_payments/DUTY.md',
      'knowledge/team_payments/runbooks/deep/nested/ledger.md',
      'knowledge/team_payments/runbooks/refunds.md',
    ]);

    const grep = await run('grep', ['-r', 'needle-', 'knowledge'], { cwd: m.dir });
    expect(grep.code).toBe(0);
    expect(grep.stdout).toContain('needle-account');
    expect(grep.stdout).toContain('needle-payments');
    expect(grep.stdout).not.toContain('needle-search');
    expect(grep.stdout).not.toContain('needle-storage');

    const cat = await run('cat', [join(m.mountpoint, 'team_payments/runbooks/refunds.md')]);
    expect(cat.stdout).toBe(FILES['teams/payments/runbooks/refunds.md']);

    for (const other of ['team_search', 'team_search/DUTY.md', 'team_storage/runbooks/disk.md']) {
      const st = await run('stat', [join(m.mountpoint, other)]);
      expect(st.code).not.toBe(0);
      expect(st.stderr).toContain('No such file or directory');
      const c = await run('cat', [join(m.mountpoint, other)]);
      expect(c.stderr).toContain('No such file or directory');
    }
  });

  it('sizes, modes and bytes agree: ls -l, stat, wc -c, tail -c', async () => {
    const m = await mountFor({ kind: 'team', creator: 'alice', team: 'payments' });
    const file = join(m.mountpoint, 'team_payments/runbooks/deep/nested/ledger.md');
    const expected = FILES['teams/payments/runbooks/deep/nested/ledger.md']!;
    const st = await run('stat', ['-c', '%s %a %F', file]);
    expect(st.stdout.trim()).toBe(`${Buffer.byteLength(expected)} 444 regular file`);
    const dirSt = await run('stat', ['-c', '%a %F', join(m.mountpoint, 'team_payments/runbooks')]);
    expect(dirSt.stdout.trim()).toBe('555 directory');
    const wc = await run('wc', ['-c', file]);
    expect(wc.stdout.trim()).toBe(`${Buffer.byteLength(expected)} ${file}`);
    const tail = await run('tail', ['-c', '13', file]);
    expect(tail.stdout).toBe('ledger lines\n');
    const lsl = await sh(`ls -l ${JSON.stringify(join(m.mountpoint, 'account'))} | awk '{print $1, $5, $9}'`);
    expect(lsl.stdout).toContain(`-r--r--r-- ${Buffer.byteLength(FILES['account/DUTY.md']!)} DUTY.md`);
    expect(lsl.stdout).toContain('dr-xr-xr-x 4096 policies');
  });

  it('personal session under the threshold sees every team of its creator', async () => {
    const m = await mountFor({ kind: 'personal', creator: 'alice', team: 'payments' });
    const ls = await run('ls', [m.mountpoint]);
    expect(ls.stdout.split('\n').filter(Boolean)).toEqual(['account', 'team_payments', 'team_search']);
    const grep = await run('grep', ['-rl', 'needle-search', m.mountpoint]);
    expect(grep.stdout.trim()).toBe(join(m.mountpoint, 'team_search/runbooks/reindex.md'));
    const storage = await run('ls', [join(m.mountpoint, 'team_storage')]);
    expect(storage.stderr).toContain('No such file or directory');
  });

  it('personal session over the threshold sees account + bound team only', async () => {
    const m = await mountFor({ kind: 'personal', creator: 'alice', team: 'payments' }, ['--prefetch-threshold', '100']);
    const ls = await run('ls', [m.mountpoint]);
    expect(ls.stdout.split('\n').filter(Boolean)).toEqual(['account', 'team_payments']);
    const cat = await run('cat', [join(m.mountpoint, 'team_search/DUTY.md')]);
    expect(cat.code).not.toBe(0);
    expect(cat.stderr).toContain('No such file or directory');
  });

  it('touch, echo >, rm, mkdir, mv, chmod, ln fail with "Read-only file system"', async () => {
    const m = await mountFor({ kind: 'team', creator: 'alice', team: 'payments' });
    const duty = join(m.mountpoint, 'account/DUTY.md');
    const attempts: Array<[string, string[]]> = [
      ['touch', [join(m.mountpoint, 'account/new.md')]],
      ['touch', [duty]],
      ['sh', ['-c', `echo x > ${JSON.stringify(duty)}`]],
      ['sh', ['-c', `echo x >> ${JSON.stringify(duty)}`]],
      ['sh', ['-c', `echo x > ${JSON.stringify(join(m.mountpoint, 'account/other.md'))}`]],
      ['rm', [duty]],
      ['rm', ['-r', join(m.mountpoint, 'account/policies')]],
      ['mkdir', [join(m.mountpoint, 'account/newdir')]],
      ['mv', [duty, join(m.mountpoint, 'account/moved.md')]],
      ['chmod', ['777', duty]],
      ['ln', ['-s', duty, join(m.mountpoint, 'account/link')]],
      ['truncate', ['-s', '0', duty]],
    ];
    for (const [cmd, args] of attempts) {
      const r = await run(cmd, args);
      expect(r.code, `${cmd} ${args.join(' ')}`).not.toBe(0);
      expect(r.stderr, `${cmd} ${args.join(' ')}`).toContain('Read-only file system');
    }
    const still = await run('cat', [duty]);
    expect(still.stdout).toBe(FILES['account/DUTY.md']);
  });
});
