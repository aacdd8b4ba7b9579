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

// open, stat and readdir of argv[1] from a program: the error code each gives.
const ERRNO_PROBE = `
const fs = require('node:fs');
const out = {};
for (const [op, f] of [['open', (p) => fs.closeSync(fs.openSync(p, 'r'))], ['stat', (p) => fs.statSync(p)], ['readdir', (p) => fs.readdirSync(p)]]) {
  try { f(process.argv[1]); out[op] = 'ok'; } catch (e) { out[op] = e.code; }
}
process.stdout.write(JSON.stringify(out));
`;

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
    // df's numbers: the materialised bytes in 4 KiB blocks, the file count, nothing free.
    const total = ['account/DUTY.md', 'account/policies/severity.md', 'teams/payments/DUTY.md', 'teams/payments/runbooks/refunds.md', 'teams/payments/runbooks/deep/nested/ledger.md']
      .reduce((sum, k) => sum + Buffer.byteLength(FILES[k]!), 0);
    const fsStat = await run('stat', ['-f', '-c', '%S %b %f %a %c %d', m.mountpoint]);
    expect(fsStat.stdout.trim()).toBe(`4096 ${Math.ceil(total / 4096)} 0 0 5 0`);
  });

  it('readdir lists . and .. like a real directory (ls -a), and find is unchanged', async () => {
    const m = await mountFor({ kind: 'team', creator: 'alice', team: 'payments' });
    const root = await run('ls', ['-a', m.mountpoint]);
    expect(root.stdout.split('\n').filter(Boolean)).toEqual(['.', '..', 'account', 'team_payments']);
    const sub = await run('ls', ['-a', join(m.mountpoint, 'team_payments/runbooks')]);
    expect(sub.stdout.split('\n').filter(Boolean)).toEqual(['.', '..', 'deep', 'refunds.md']);
    const lsla = await sh(`ls -la ${JSON.stringify(join(m.mountpoint, 'team_payments/runbooks'))} | awk '{print $1, $9}'`);
    expect(lsla.stdout).toContain('dr-xr-xr-x .\n');
    expect(lsla.stdout).toContain('dr-xr-xr-x ..\n');
    const find = await run('find', ['knowledge/team_payments'], { cwd: m.dir });
    expect(find.stdout.split('\n').filter(Boolean).sort()).toEqual([
      'knowledge/team_payments',
      'knowledge/team_payments/DUTY.md',
      'knowledge/team_payments/runbooks',
      'knowledge/team_payments/runbooks/deep',
      'knowledge/team_payments/runbooks/deep/nested',
      'knowledge/team_payments/runbooks/deep/nested/ledger.md',
      'knowledge/team_payments/runbooks/refunds.md',
    ]);
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

  it('personal session: a team it may not load, one not materialised and one that does not exist look exactly like a missing path (cat, stat, ls, errno)', async () => {
    const m = await mountFor({ kind: 'personal', creator: 'alice', team: 'payments' }, ['--prefetch-threshold', '100']);
    /** Everything a shell user or a program can observe about `knowledge/<scope>/<suffix>`, the scope name masked. */
    const observe = async (scope: string, suffix: string) => {
      const path = `knowledge/${scope}${suffix === '' ? '' : `/${suffix}`}`;
      const seen: Record<string, unknown> = {};
      for (const [tool, args] of [['cat', [path]], ['stat', [path]], ['ls', [path]], ['ls', ['-l', path]]] as const) {
        const r = await run(tool, [...args], { cwd: m.dir });
        seen[`${tool} ${args.join(' ')}`.replaceAll(scope, 'SCOPE')] = { code: r.code, stdout: r.stdout.replaceAll(scope, 'SCOPE'), stderr: r.stderr.replaceAll(scope, 'SCOPE') };
      }
      const probe = await run(process.execPath, ['-e', ERRNO_PROBE, path], { cwd: m.dir });
      seen['errno'] = JSON.parse(probe.stdout) as unknown;
      return seen;
    };
    for (const suffix of ['runbooks/disk.md', 'runbooks', '']) {
      const ghost = await observe('team_ghost', suffix);
      expect(Object.values(ghost).every((o) => JSON.stringify(o).includes('ENOENT') || JSON.stringify(o).includes('No such file or directory'))).toBe(true);
      expect(await observe('team_storage', suffix), `team_storage/${suffix}`).toEqual(ghost);
      expect(await observe('team_search', suffix), `team_search/${suffix}`).toEqual(ghost);
      if (suffix !== '') expect(await observe('account', suffix), `account/${suffix}`).toEqual(ghost);
    }
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
