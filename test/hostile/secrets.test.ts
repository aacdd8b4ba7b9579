// The runner token is a secret held by the daemon alone. It must not show up
// in the daemon's argv (/proc/PID/cmdline) or environment (token-file mode;
// with $KNOWLEDGEFS_TOKEN the daemon drops the variable before it starts
// anything, so its children never see it, though /proc/PID/environ keeps the
// initial environment),
// in anything the daemon or the control plane logs (including while things
// fail: control plane down, session revoked), in the audit log or the state
// file, in anything the control socket answers, or anywhere under the mount
// (`grep -r` for it finds nothing). The control socket is mode 0600.

import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { BIN, fuseSuite, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';

fuseSuite('secrets stay secret', () => {
  let dir: string;
  let cp: SpawnedControlPlane;
  let mount: MountHandle;
  let envMount: MountHandle;
  let session: { sessionId: string; token: string };
  let envSession: { sessionId: string; token: string };
  /** A `fusermount` first in the env-mode daemon's PATH that records the environment it was started with. */
  let spyDir: string;
  const tokens = () => [session.token, envSession.token];

  beforeAll(async () => {
    dir = await makeDataDir({
      teams: { payments: 'Payments', search: 'Search' },
      users: { alice: { teams: ['payments', 'search'] } },
      files: {
        'account/DUTY.md': '# Account\n',
        'teams/payments/DUTY.md': '# Payments\n',
        'teams/payments/runbooks/a.md': 'runbook\n',
        'teams/search/DUTY.md': '# Search\n',
      },
    });
    cp = await spawnControlPlane({ dataDir: dir });
    session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    envSession = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    mount = await startMount({ serverUrl: cp.url, token: session.token, args: ['--prefetch-threshold', '1', '--request-timeout', '1s', '--sync-interval', '200ms'] });
    // A second daemon (team session, token in $KNOWLEDGEFS_TOKEN) whose session gets revoked below.
    spyDir = await mkdtemp(join(tmpdir(), 'kfs-envspy-'));
    const realFusermount = (await run('sh', ['-c', 'command -v fusermount'])).stdout.trim();
    expect(realFusermount).not.toBe('');
    await writeFile(join(spyDir, 'fusermount'), `#!/bin/sh\nenv > "${spyDir}/fusermount.env"\nexec ${realFusermount} "$@"\n`);
    await chmod(join(spyDir, 'fusermount'), 0o755);
    envMount = await startMount({
      serverUrl: cp.url,
      token: envSession.token,
      tokenVia: 'env',
      // fuse-native unmounts by running fusermount, the child this test inspects; the native binding
      // unmounts as root with umount2 and starts no process at all.
      args: ['--sync-interval', '200ms', '--fuse-binding', 'fuse-native'],
      env: { PATH: `${spyDir}:${process.env.PATH ?? ''}` },
    });
  });

  afterAll(async () => {
    await mount?.stop();
    await envMount?.stop();
    await cp?.kill('SIGTERM');
    if (spyDir) await rm(spyDir, { recursive: true, force: true });
    if (dir) await removeDataDir(dir);
  });

  function expectNoToken(text: string, where: string): void {
    for (const t of tokens()) expect(text.includes(t), `token found in ${where}`).toBe(false);
    expect(text.includes(cp.adminToken), `admin token found in ${where}`).toBe(false);
  }

  it('the control socket is 0600', async () => {
    for (const m of [mount, envMount]) {
      const s = await stat(m.socketPath);
      expect(s.isSocket()).toBe(true);
      expect(s.mode & 0o777).toBe(0o600);
    }
  });

  it('neither argv nor the environment of a daemon carries its token', async () => {
    for (const m of [mount, envMount]) {
      const cmdline = await readFile(`/proc/${m.pid}/cmdline`, 'utf8');
      expect(cmdline).toContain('mount');
      expectNoToken(cmdline, `/proc/${m.pid}/cmdline`);
    }
    expectNoToken(await readFile(`/proc/${mount.pid}/environ`, 'utf8'), 'the token-file daemon environment');
    const cpCmdline = await readFile(`/proc/${cp.pid}/cmdline`, 'utf8');
    expectNoToken(cpCmdline, 'the control plane argv');
  });

  it('nothing under the mount contains the token (grep -r), and the control socket never answers it', async () => {
    // Use the mount a little first: read tool, manifest, reminder, a mounted team.
    const kfs = (args: string[]) => run(process.execPath, [BIN, ...args, '--socket', mount.socketPath], { cwd: mount.dir });
    const outputs = [
      await kfs(['read', 'knowledge/team_search/DUTY.md', '--json']),
      await kfs(['read', 'knowledge/team_nosuch/DUTY.md', '--json']),
      await kfs(['manifest', '--json']),
      await kfs(['reminder', '--json']),
    ];
    for (const o of outputs) expectNoToken(o.stdout + o.stderr, 'read tool output');
    const status = await run('curl', ['-s', '--unix-socket', mount.socketPath, 'http://x/status']);
    expectNoToken(status.stdout, 'control socket /status');
    for (const m of [mount, envMount]) {
      for (const t of tokens()) {
        const grep = await run('grep', ['-r', '-F', '-l', t, '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
        expect(grep.code, `grep -r found the token in ${grep.stdout}`).toBe(1);
      }
      const names = await run('find', ['.'], { cwd: m.mountpoint });
      expectNoToken(names.stdout, 'file names under the mount');
    }
  });

  it('no log line carries the token, even while failing (control plane down, session revoked)', async () => {
    await cp.kill('SIGKILL');
    const down = await run('cat', [join(mount.mountpoint, 'team_payments', 'runbooks', 'a.md')], { timeoutMs: 30_000 });
    const tool = await run(process.execPath, [BIN, 'read', 'knowledge/account/DUTY.md', '--socket', mount.socketPath], { cwd: mount.dir });
    expectNoToken(down.stderr + tool.stdout + tool.stderr, 'errors while the control plane is down');
    await cp.restart();
    // Revoke the second daemon's session: it now gets 401s, and must not log what it sent.
    const del = await fetch(`${cp.url}/v1/admin/sessions/${envSession.sessionId}`, { method: 'DELETE', headers: { authorization: `Bearer ${cp.adminToken}` } });
    expect(del.status).toBe(204);
    await run('cat', [join(envMount.mountpoint, 'team_payments', 'DUTY.md')], { timeoutMs: 30_000 });
    const logged = await waitFor(() => /401|unauthori[sz]ed|revoked|invalid/i.test(envMount.stderr), 10_000);
    expect(logged, `the revoked daemon logged nothing about it:\n${envMount.stderr}`).toBe(true);
    for (const m of [mount, envMount]) {
      expectNoToken(m.stdout, 'daemon stdout');
      expectNoToken(m.stderr, 'daemon stderr');
    }
    expectNoToken(cp.stdout, 'control plane stdout');
    expectNoToken(cp.stderr, 'control plane stderr');
  });

  it('the audit log, the state file and its journal never hold a token', async () => {
    const internal = join(dir, '.knowledgefs');
    const audit = await readFile(join(internal, 'audit.log'), 'utf8');
    expect(audit.split('\n').filter(Boolean).length).toBeGreaterThan(0);
    expectNoToken(audit, 'the audit log');
    const state = await readFile(join(internal, 'state.json'), 'utf8');
    expect(state).toContain(session.sessionId);
    expectNoToken(state, 'the state file');
    const journal = await readFile(join(internal, 'state.json.journal'), 'utf8');
    expect(journal).toContain(envSession.sessionId);
    expectNoToken(journal, 'the state journal');
  });

  it('KNOWLEDGEFS_TOKEN mode: the daemon works, and nothing it starts inherits the token; /proc/PID/environ still shows it', async () => {
    expect(envMount.child.spawnargs.join(' ')).not.toContain('--token-file');
    // What docs/RELIABILITY.md says: the kernel keeps the initial environment block.
    const initial = await readFile(`/proc/${envMount.pid}/environ`, 'utf8');
    expect(initial.split('\0')).toContain(`KNOWLEDGEFS_TOKEN=${envSession.token}`);
    // Stopping the daemon runs fusermount (through the spy) from the daemon's own environment.
    expect((await envMount.stop()).code).toBe(0);
    const childEnv = await readFile(join(spyDir, 'fusermount.env'), 'utf8');
    expect(childEnv).toContain(`PATH=${spyDir}:`);
    expect(childEnv).not.toContain('KNOWLEDGEFS_TOKEN');
    expectNoToken(childEnv, 'the environment of a process the daemon started');
  });
});
