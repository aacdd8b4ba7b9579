// `--allow-other` lets every local user read the mount. `--group G` narrows
// that to one group: files 0440 and directories 0550 owned by G, checked by
// the kernel (default_permissions). Real mounts, read by real unprivileged
// users (test/helpers/test-users.ts): one in the group, one outside it.

import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { fuseSuite, run, startMount, type MountHandle } from '../helpers/mount.js';
import { runAs, testUser, usersSuite, type TestUser } from '../helpers/test-users.js';

usersSuite('mount readers limited to one group', () => {
  fuseSuite('--group', () => {
    let dir: string;
    let cp: TestControlPlane;
    let agent: TestUser;
    let other: TestUser;
    const mounts: MountHandle[] = [];

    beforeAll(async () => {
      agent = testUser('kfs-test-victim');
      other = testUser('kfs-test-attacker');
      dir = await makeDataDir({
        teams: { payments: 'Payments' },
        users: { alice: { teams: ['payments'] } },
        files: { 'account/DUTY.md': '# Account\n', 'teams/payments/runbooks/db.md': 'failover steps\n' },
      });
      cp = await startControlPlane({ dataDir: dir });
    });
    afterAll(async () => {
      for (const m of mounts) await m.stop();
      await cp?.close();
      await removeDataDir(dir);
    });

    async function mount(args: string[]): Promise<MountHandle> {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const m = await startMount({ serverUrl: cp.url, token: s.token, args: ['--prefetch-content', 'off', ...args] });
      mounts.push(m);
      chmodSync(m.dir, 0o755); // the test's temp dir, so other users can reach the mount point
      return m;
    }

    it('only the group reads: files 0440 and directories 0550 owned by it; another user gets Permission denied', async () => {
      const m = await mount(['--group', String(agent.gid)]);
      const file = join(m.mountpoint, 'team_payments/runbooks/db.md');
      expect((await run('stat', ['-c', '%a %g', file])).stdout.trim()).toBe(`440 ${agent.gid}`);
      expect((await run('stat', ['-c', '%a %g', join(m.mountpoint, 'team_payments/runbooks')])).stdout.trim()).toBe(`550 ${agent.gid}`);

      const mine = await runAs(agent, 'cat', [file]);
      expect(mine.stderr).toBe('');
      expect(mine.stdout).toBe('failover steps\n');
      expect((await runAs(agent, 'ls', [m.mountpoint])).stdout.split('\n').filter(Boolean)).toEqual(['account', 'team_payments']);

      const theirs = await runAs(other, 'cat', [file]);
      expect(theirs.stdout).toBe('');
      expect(theirs.stderr).toContain('Permission denied');
      const list = await runAs(other, 'ls', [m.mountpoint]);
      expect(list.stdout).toBe('');
      expect(list.stderr).toContain('Permission denied');
    });

    it('a group name works like its gid; an unknown group is refused before mounting', async () => {
      const m = await mount(['--group', agent.name]);
      expect((await run('stat', ['-c', '%g', join(m.mountpoint, 'account/DUTY.md')])).stdout.trim()).toBe(String(agent.gid));
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const bad = await startMount({ serverUrl: cp.url, token: s.token, args: ['--group', 'no-such-group-kfs'] }).then(
        (h) => { mounts.push(h); return 'mounted'; },
        (err: Error) => err.message,
      );
      expect(bad).toContain('--group no-such-group-kfs: no such group');
    });

    it('without --group, --allow-other lets any local user read (the trade-off --group narrows)', async () => {
      const m = await mount(['--allow-other']);
      const theirs = await runAs(other, 'cat', [join(m.mountpoint, 'team_payments/runbooks/db.md')]);
      expect(theirs.stdout).toBe('failover steps\n');
    });
  });
});
