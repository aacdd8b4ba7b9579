// The daemon with no privileges: `knowledgefs mount-helper` (root) mounts
// and hands the /dev/fuse descriptor to `knowledgefs mount --fuse-fd 3`,
// which runs as an ordinary user with an empty capability bounding set
// (setpriv). Real mounts, real users (test/helpers/test-users.ts): the daemon
// user `kfs-test-daemon` and the agent `kfs-test-victim`, who reads through
// allow_other and tries to take the mount down.

import { chmodSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { localBuildPath, PACKAGE_ROOT } from '../src/daemon/fuse/native-addon.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { BIN, fuseSuite, isMounted, REPO_ROOT, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';
import { runAs, testUser, usersSuite, type TestUser } from './helpers/test-users.js';

// --fuse-fd exists on the native binding only: these daemons mount with it even in
// the run of the suite on fuse-native (npm run test:fuse-native sets this to fuse-native).
process.env.KNOWLEDGEFS_FUSE_BINDING = 'native';

const EMPTY_CAPS = '0000000000000000';

usersSuite('an unprivileged mount daemon (mount-helper + --fuse-fd)', () => {
  fuseSuite('mount-helper', () => {
    let dataDir: string;
    let cp: TestControlPlane;
    let daemonUser: TestUser;
    let agent: TestUser;
    const mounts: MountHandle[] = [];

    beforeAll(async () => {
      daemonUser = testUser('kfs-test-daemon');
      agent = testUser('kfs-test-victim');
      dataDir = await makeDataDir({
        teams: { payments: 'Payments' },
        users: { alice: { teams: ['payments'] } },
        files: { 'account/DUTY.md': '# Account\n', 'account/edit-me.md': 'version one\n', 'teams/payments/runbooks/db.md': 'failover steps\n' },
      });
      cp = await startControlPlane({ dataDir });
    });
    afterAll(async () => {
      for (const m of mounts) await m.stop();
      await cp?.close();
      await removeDataDir(dataDir);
    });

    /** mount-helper as root, the daemon as `daemonUser`; `helperArgs`/`daemonArgs` are extra flags for each. */
    async function helperMount(helperArgs: string[], daemonArgs: string[], socketPath?: string): Promise<MountHandle> {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const m = await startMount({
        serverUrl: cp.url,
        token: s.token,
        ...(socketPath === undefined ? {} : { socketPath }),
        args: ['--prefetch-content', 'off', '--sync-interval', '200ms', '--fuse-fd', '3', ...daemonArgs],
        daemonUser,
        wrap: (mountArgs) => ['mount-helper', mountArgs[1]!, '--user', daemonUser.name, ...helperArgs, '--', process.execPath, BIN, ...mountArgs],
      });
      mounts.push(m);
      chmodSync(m.dir, 0o755); // the test's temp dir, so the agent can reach the mount point
      return m;
    }

    /** The daemon: the helper's child (setpriv execs into it, keeping its pid). */
    function daemonPid(m: MountHandle): number {
      const children = readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[1] === String(m.pid);
          } catch {
            return false;
          }
        });
      expect(children).toHaveLength(1);
      return Number(children[0]);
    }

    function status(pid: number): Record<string, string> {
      const fields: Record<string, string> = {};
      for (const line of readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')) {
        const at = line.indexOf(':');
        if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1).trim();
      }
      return fields;
    }

    it('the daemon runs as an ordinary user with no capabilities at all, and the mount works: ls, cat, grep, the read tool, sync', async () => {
      const m = await helperMount(['--group', agent.name], ['--group', agent.name]);
      const pid = daemonPid(m);
      const st = status(pid);
      expect(st.Uid).toBe(`${daemonUser.uid}\t${daemonUser.uid}\t${daemonUser.uid}\t${daemonUser.uid}`);
      expect(st.Gid).toBe(`${daemonUser.gid}\t${daemonUser.gid}\t${daemonUser.gid}\t${daemonUser.gid}`);
      expect(st.Groups).toBe('');
      for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) expect(st[cap], cap).toBe(EMPTY_CAPS);
      expect(st.NoNewPrivs).toBe('1');
      expect(readlinkSync(`/proc/${pid}/fd/3`)).toBe('/dev/fuse');
      expect(m.stderr).toMatch(/fuse-binding native, fuse-fd 3 \(mounted by another process\)/);

      const mountLine = readFileSync('/proc/mounts', 'utf8').split('\n').find((l) => l.split(' ')[1] === m.mountpoint);
      expect(mountLine).toMatch(new RegExp(`^knowledgefs \\S+ fuse\\.knowledgefs ro,nosuid,nodev\\S*user_id=${daemonUser.uid},group_id=${daemonUser.gid},default_permissions,allow_other`));

      // The agent reads through the kernel like any mount.
      expect((await runAs(agent, 'ls', [m.mountpoint])).stdout.split('\n').filter(Boolean)).toEqual(['account', 'team_payments']);
      const file = join(m.mountpoint, 'team_payments/runbooks/db.md');
      const cat = await runAs(agent, 'cat', [file]);
      expect(cat.stderr).toBe('');
      expect(cat.stdout).toBe('failover steps\n');
      expect((await runAs(agent, 'grep', ['-rl', 'failover', m.mountpoint])).stdout.trim()).toBe(file);

      // The read tool, through the control socket the daemon user created.
      const read = await runAs(daemonUser, process.execPath, [BIN, 'read', 'knowledge/team_payments/runbooks/db.md', '--socket', m.socketPath], { cwd: m.dir });
      expect(read.stderr).toBe('');
      expect(read.stdout).toContain('failover steps');

      // Sync: an edit on the control plane's side shows up.
      const edited = join(m.mountpoint, 'account/edit-me.md');
      expect((await runAs(agent, 'cat', [edited])).stdout).toBe('version one\n');
      await writeDataFile(dataDir, 'account/edit-me.md', 'version two\n');
      expect(await waitFor(async () => (await runAs(agent, 'cat', [edited])).stdout === 'version two\n', 20_000)).toBe(true);
    });

    it('a separate agent user reads through the socket when the daemon user is named; unnamed, or another owner named, it is refused', async () => {
      const base = mkdtempSync(join(tmpdir(), 'kfs-helper-socket-'));
      chmodSync(base, 0o755);
      const sock = join(base, 'kfs', 'control.sock');
      try {
        const m = await helperMount(['--group', agent.name, '--socket', sock], ['--group', agent.name], sock);
        // The helper made the directory: the daemon user's, group agent, setgid, nobody else in.
        const dir = statSync(join(base, 'kfs'));
        expect([dir.uid, dir.gid, (dir.mode & 0o7777).toString(8)]).toEqual([daemonUser.uid, agent.gid, '2750']);
        const socket = statSync(sock);
        expect([socket.uid, socket.gid, (socket.mode & 0o777).toString(8)]).toEqual([daemonUser.uid, agent.gid, '660']);
        expect(m.stderr).toContain(`control socket listening on ${sock} (group ${agent.gid} may connect)`);

        const path = 'knowledge/team_payments/runbooks/db.md';
        const named = await runAs(agent, process.execPath, [BIN, 'read', path, '--socket', sock, '--daemon-user', daemonUser.name], { cwd: m.dir });
        expect(named.stderr).toBe('');
        expect(named.stdout).toContain('failover steps');
        const byEnv = await runAs(agent, process.execPath, [BIN, 'manifest', '--socket', sock], { cwd: m.dir, env: { KNOWLEDGEFS_DAEMON_USER: String(daemonUser.uid) } });
        expect(byEnv.code, byEnv.stderr).toBe(0);
        expect(byEnv.stdout).toContain('team_payments');

        // Not named: the directory's owner is not trusted, whoever it is.
        const unnamed = await runAs(agent, process.execPath, [BIN, 'read', path, '--socket', sock], { cwd: m.dir });
        expect(unnamed.code).toBe(4);
        expect(unnamed.stdout).toBe('');
        expect(unnamed.stderr).toContain(`refusing to use the control socket ${sock}: ${join(base, 'kfs')} is owned by uid ${daemonUser.uid}, not by root or uid ${agent.uid}`);
        expect(unnamed.stderr).toContain('name it (--daemon-user or KNOWLEDGEFS_DAEMON_USER)');
        // Another user named: still refused (the name must be the owner's).
        const other = testUser('kfs-test-other');
        const wrong = await runAs(agent, process.execPath, [BIN, 'read', path, '--socket', sock, '--daemon-user', other.name], { cwd: m.dir });
        expect(wrong.code).toBe(4);
        expect(wrong.stderr).toContain(`is owned by uid ${daemonUser.uid}, not by root, uid ${agent.uid} or uid ${other.uid}`);
        const unknown = await runAs(agent, process.execPath, [BIN, 'read', path, '--socket', sock, '--daemon-user', 'kfs-test-no-such-user'], { cwd: m.dir });
        expect(unknown.code).toBe(2);
        expect(unknown.stderr).toContain('the daemon user kfs-test-no-such-user is not a user in /etc/passwd');
        // A user outside the group cannot reach the socket at all.
        const outsider = await runAs(other, process.execPath, [BIN, 'read', path, '--socket', sock, '--daemon-user', daemonUser.name], { cwd: m.dir });
        expect(outsider.code).not.toBe(0);
        expect(outsider.stdout).not.toContain('failover');

        // The agent can neither signal the daemon nor read its environment, memory or token.
        const pid = daemonPid(m);
        expect((await runAs(agent, 'sh', ['-c', `kill -TERM ${pid}`])).code).not.toBe(0);
        for (const file of [`/proc/${pid}/environ`, `/proc/${pid}/mem`, join(dirname(m.socketPath), 'token')]) {
          expect((await runAs(agent, 'cat', [file])).code, file).not.toBe(0);
        }
        expect(status(pid).Uid?.split('\t')[0]).toBe(String(daemonUser.uid));
      } finally {
        rmSync(base, { recursive: true, force: true });
      }
    });

    it('the handed mount is read-only at the kernel level: every write-mode open of a warm file, and every change, is EROFS', async () => {
      const m = await helperMount(['--group', agent.name], ['--group', agent.name]);
      const file = join(m.mountpoint, 'account/DUTY.md');
      expect((await runAs(agent, 'cat', [file])).stdout).toBe('# Account\n'); // warm: the kernel has it cached
      const tries: Array<[string, string[]]> = [
        ['append', ['sh', '-c', `echo x >> '${file}'`]],
        ['overwrite', ['sh', '-c', `echo x > '${file}'`]],
        ['truncate', ['truncate', '-s', '0', file]],
        ['touch', ['touch', file]],
        ['create', ['touch', join(m.mountpoint, 'account/new.md')]],
        ['mkdir', ['mkdir', join(m.mountpoint, 'account/d')]],
        ['rm', ['rm', '-f', file]],
      ];
      for (const who of [agent, daemonUser]) {
        for (const [what, [cmd, ...args]] of tries) {
          const r = await runAs(who, cmd!, args);
          expect(r.code, `${who.name} ${what}`).not.toBe(0);
          expect(r.stderr, `${who.name} ${what}`).toMatch(/Read-only file system/);
        }
        // O_RDWR and O_WRONLY opens, by the syscall's own errno.
        const open = await runAs(who, process.execPath, ['-e', `const fs=require('fs');for(const f of ['r+','w','a'])try{fs.closeSync(fs.openSync(${JSON.stringify(file)},f))}catch(e){console.log(f,e.code)}`]);
        expect(open.stdout.trim().split('\n'), who.name).toEqual(['r+ EROFS', 'w EROFS', 'a EROFS']);
      }
      expect((await runAs(agent, 'cat', [file])).stdout).toBe('# Account\n');
    });

    it('the agent cannot unmount it, nor mount over it', async () => {
      const m = await helperMount(['--allow-other'], ['--allow-other']);
      const umount = await runAs(agent, 'umount', [m.mountpoint]);
      expect(umount.code).not.toBe(0);
      const lazy = await runAs(agent, 'umount', ['-l', m.mountpoint]);
      expect(lazy.code).not.toBe(0);
      const fusermount = await runAs(agent, 'fusermount3', ['-u', m.mountpoint]);
      expect(fusermount.code).not.toBe(0);
      expect(fusermount.stderr).toMatch(/fusermount3:/);
      // A FUSE mount of its own over it, the way any unprivileged libfuse program mounts: refused by /dev/fuse's
      // permissions where it is not world-writable, else by the setuid fusermount3 (no write access to the mount point).
      const over = await runAs(agent, process.execPath, ['-e', `require(${JSON.stringify(localBuildPath(PACKAGE_ROOT))}).mount(${JSON.stringify(m.mountpoint)}, 'fsname=evil', () => {})`]);
      expect(over.code).not.toBe(0);
      expect(over.stderr).toMatch(/failed to open \/dev\/fuse: Permission denied|fusermount3: .*(write access|Permission denied)/);
      const bind = await runAs(agent, 'mount', ['--bind', '/tmp', m.mountpoint]);
      expect(bind.code).not.toBe(0);

      expect(isMounted(m.mountpoint)).toBe(true);
      expect((await runAs(agent, 'cat', [join(m.mountpoint, 'account/DUTY.md')])).stdout).toBe('# Account\n');
      const mountLines = readFileSync('/proc/mounts', 'utf8').split('\n').filter((l) => l.split(' ')[1] === m.mountpoint);
      expect(mountLines).toHaveLength(1);
    });

    it('SIGTERM to the helper: the mount point is unmounted, the daemon has stopped, exit 0', async () => {
      const m = await helperMount(['--allow-other'], ['--allow-other']);
      const pid = daemonPid(m);
      const result = await m.kill('SIGTERM');
      expect(result).toEqual({ code: 0, signal: null });
      expect(isMounted(m.mountpoint)).toBe(false);
      expect(() => readFileSync(`/proc/${pid}/status`)).toThrow();
      expect((await run('ls', ['-A', m.mountpoint])).stdout).toBe('');
    });

    it('SIGTERM to the daemon itself: it stops without unmounting (it cannot), and the helper detaches and exits 0', async () => {
      const m = await helperMount(['--allow-other'], ['--allow-other']);
      process.kill(daemonPid(m), 'SIGTERM');
      const result = await m.exited;
      expect(result, m.stderr).toEqual({ code: 0, signal: null });
      expect(isMounted(m.mountpoint)).toBe(false);
      expect(m.stderr).not.toMatch(/fusermount|exit 6|did not finish/);
    });

    it('the daemon dying on its own (SIGKILL) still unmounts: the helper detaches and exits with its status', async () => {
      const m = await helperMount(['--allow-other'], ['--allow-other']);
      process.kill(daemonPid(m), 'SIGKILL');
      const result = await m.exited;
      expect(result).toEqual({ code: 128 + 9, signal: null });
      expect(isMounted(m.mountpoint)).toBe(false);
    });

    it('SIGHUP to the helper reaches the daemon (its log reopens); the helper, the daemon and the mount stay', async () => {
      const m = await helperMount(['--allow-other'], ['--allow-other']);
      const pid = daemonPid(m);
      m.child.kill('SIGHUP');
      expect(await waitFor(() => m.stderr.includes('SIGHUP: log file reopened'), 10_000), m.stderr).toBe(true);
      expect(m.child.exitCode).toBeNull();
      expect(daemonPid(m)).toBe(pid);
      expect(isMounted(m.mountpoint)).toBe(true);
      expect((await runAs(agent, 'cat', [join(m.mountpoint, 'account/DUTY.md')])).stdout).toBe('# Account\n');
    });

    it('mount-helper itself needs privilege: as an ordinary user it fails, saying so, and mounts nothing', async () => {
      const dir = join(REPO_ROOT, 'node_modules', '.kfs-test-unprivileged-helper');
      const r = await runAs(agent, process.execPath, [BIN, 'mount-helper', join(dir, 'knowledge'), '--user', daemonUser.name, '--', 'true']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/cannot open \/dev\/fuse \(EACCES\): mount-helper is the privileged step|cannot mount .*knowledge/);
      expect(isMounted(join(dir, 'knowledge'))).toBe(false);
    });

    it("a mount point someone else serves is refused and left alone", async () => {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const theirs = await startMount({ serverUrl: cp.url, token: s.token, args: ['--prefetch-content', 'off'] });
      mounts.push(theirs);
      const r = await run(process.execPath, [BIN, 'mount-helper', theirs.mountpoint, '--user', daemonUser.name, '--', 'true']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`${theirs.mountpoint} is already mounted`);
      expect(isMounted(theirs.mountpoint)).toBe(true);
      expect((await run('cat', [join(theirs.mountpoint, 'account/DUTY.md')])).stdout).toBe('# Account\n');
    });

    it('flags that disagree with how it was mounted are refused before serving, naming the fix', async () => {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const failed = await startMount({
        serverUrl: cp.url,
        token: s.token,
        args: ['--fuse-fd', '3', '--group', agent.name],
        daemonUser,
        wrap: (mountArgs) => ['mount-helper', mountArgs[1]!, '--user', daemonUser.name, '--allow-other', '--', process.execPath, BIN, ...mountArgs],
      }).then(
        (h) => {
          mounts.push(h);
          return 'mounted';
        },
        (err: Error) => err.message,
      );
      expect(failed).toMatch(/mounted without default_permissions, so --group would not be enforced/);
      expect(failed).toMatch(/exited \(code 2/);
    });
  });
});
