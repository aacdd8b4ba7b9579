// Crashes, with real processes and a real mount:
//   - the control plane SIGKILLed and restarted in the middle of `grep -r`:
//     every file grep printed is whole and exact, the rest failed with EIO
//     (never partial), grep ends within the timeout, and the same daemon
//     serves everything again once the control plane is back;
//   - the control plane SIGKILLed over and over while reads and mounts
//     hammer it (directly and through the read tool): after the last
//     restart, every acknowledged mount and read is still there;
//   - the daemon SIGKILLed: the stale mount point is cleaned up by the next
//     daemon, which serves the session's mounts again.

import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { BIN, forceUnmount, fuseSuite, isMounted, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';
import { checkGrepOutput, filesSpec, grepErrors, makeCorpus, versionsOf, type CorpusFile } from './corpus.js';

const TEAMS = Array.from({ length: 10 }, (_, i) => `t${String(i).padStart(2, '0')}`);
const NO_HANG_MS = 60_000;

fuseSuite('crashes and restarts', () => {
  let dir: string;
  let cp: SpawnedControlPlane;
  let corpus: CorpusFile[];
  const mounts: MountHandle[] = [];

  beforeAll(async () => {
    corpus = makeCorpus(['account', ...TEAMS.map((t) => `team_${t}`)], 25, 400);
    dir = await makeDataDir({
      teams: Object.fromEntries(TEAMS.map((t) => [t, t.toUpperCase()])),
      users: { alice: { teams: TEAMS } },
      files: filesSpec(corpus),
    });
    cp = await spawnControlPlane({ dataDir: dir });
  });

  afterAll(async () => {
    for (const m of mounts) await m.stop().catch(() => undefined);
    await cp?.kill('SIGKILL');
    if (dir) await removeDataDir(dir);
  });

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('control plane SIGKILLed and restarted mid `grep -r`: whole files or EIO, never partial; then all back', async () => {
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 't00' });
    const m = await startMount({
      serverUrl: cp.url,
      token: session.token,
      args: ['--prefetch-content', 'off', '--cache-size', '0', '--grant-ttl', '0', '--request-timeout', '1s', '--sync-interval', '200ms'],
    });
    mounts.push(m);
    const visible = corpus; // threshold default: every loadable scope is materialised
    const versions = versionsOf(visible);

    const grep = run('grep', ['-r', '-H', '', '.'], { cwd: m.mountpoint, timeoutMs: NO_HANG_MS });
    await sleep(300);
    await cp.kill('SIGKILL');
    await sleep(1500);
    await cp.restart();
    const during = await grep;
    expect(during.timedOut, 'grep hung').toBe(false);
    const check = checkGrepOutput(during.stdout, versions);
    expect(check.problems).toEqual([]);
    const failed = grepErrors(during.stderr);
    expect(failed.every((l) => /Input\/output error/.test(l)), failed.join('\n')).toBe(true);
    // Every file either came out whole or failed loudly.
    expect(check.complete.length + failed.length).toBe(visible.length);
    expect(failed.length, 'the kill did not land during grep: nothing exercised').toBeGreaterThan(0);

    // Same daemon, no remount: everything exact again.
    const after = await waitFor(async () => {
      const r = await run('grep', ['-r', '-H', '', '.'], { cwd: m.mountpoint, timeoutMs: NO_HANG_MS });
      return r.code === 0 ? r : null;
    }, 30_000);
    expect(after, 'grep -r never succeeded again after the restart').not.toBeNull();
    const again = checkGrepOutput(after?.stdout ?? '', versions);
    expect(again.problems).toEqual([]);
    expect(again.complete.length).toBe(visible.length);
    expect(m.child.exitCode).toBeNull();
  }, 180_000);

  it('control plane SIGKILLed during state writes: no acknowledged mount or read is lost', async () => {
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 't00' });
    const m = await startMount({
      serverUrl: cp.url,
      token: session.token,
      args: ['--prefetch-threshold', '1', '--prefetch-content', 'off', '--request-timeout', '1s', '--sync-interval', '200ms'],
    });
    mounts.push(m);
    const auth = { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' };
    const acknowledgedReads = new Set<string>();
    const acknowledgedMounts = new Set<string>();
    let stop = false;
    let kills = 0;
    const killer = (async () => {
      while (!stop) {
        await sleep(150 + Math.floor(Math.random() * 250));
        await cp.kill('SIGKILL');
        kills++;
        await sleep(50);
        await cp.restart();
      }
    })();
    // Direct reads of many files: each 200 is an acknowledged read (and maybe a mount).
    const direct = async (worker: number) => {
      let i = worker;
      while (!stop) {
        const f = corpus[(i += 7) % corpus.length] as CorpusFile;
        const team = f.mountPath.startsWith('team_') ? f.mountPath.slice(5, f.mountPath.indexOf('/')) : null;
        try {
          const res = await fetch(`${cp.url}/v1/read`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ path: f.mountPath, mount: team !== null && worker % 2 === 0 }),
            signal: AbortSignal.timeout(5000),
          });
          if (res.status === 200) {
            const body = (await res.json()) as { path: string; mounted: boolean };
            acknowledgedReads.add(body.path);
            if (team !== null && worker % 2 === 0) acknowledgedMounts.add(team);
          } else {
            await res.arrayBuffer();
          }
        } catch {
          await sleep(100); // down: retry
        }
      }
    };
    // The read tool through the daemon's socket: exit 0 is an acknowledged read and mount.
    const viaTool = async () => {
      for (const t of TEAMS.slice(1)) {
        if (stop) break;
        for (let attempt = 0; attempt < 20 && !stop; attempt++) {
          const r = await run(process.execPath, [BIN, 'read', `knowledge/team_${t}/DUTY.md`, '--socket', m.socketPath, '--json'], {
            cwd: m.dir,
            timeoutMs: 30_000,
          });
          if (r.code === 0) {
            acknowledgedReads.add(`team_${t}/DUTY.md`);
            acknowledgedMounts.add(t);
            break;
          }
          expect(r.code, r.stdout + r.stderr).toBe(4); // unavailable while the control plane is down, nothing else
        }
      }
    };
    const tool = viaTool();
    const workers = [0, 1, 2].map(direct);
    const started = Date.now();
    // Condition-based, not timed: a loaded machine restarts slowly, so wait for enough crashes and acknowledgements.
    while ((kills < 4 || acknowledgedReads.size < 12) && Date.now() - started < 120_000) await sleep(100);
    stop = true;
    await Promise.all([killer, tool, ...workers]);
    expect(kills, 'too few crashes to mean anything').toBeGreaterThanOrEqual(4);
    process.stderr.write(`state-write crash test: ${kills} SIGKILLs, ${acknowledgedReads.size} acknowledged reads, ${acknowledgedMounts.size} mounts, ${Date.now() - started} ms\n`);
    expect(acknowledgedReads.size).toBeGreaterThanOrEqual(12);

    // One more crash for good measure, then check the state the new process loaded.
    await cp.kill('SIGKILL');
    await cp.restart();
    const view = (await (await fetch(`${cp.url}/v1/session`, { headers: auth })).json()) as { mounted: string[] };
    const lostMounts = [...acknowledgedMounts].filter((t) => t !== 't00' && !view.mounted.includes(t));
    expect(lostMounts, 'acknowledged mounts lost').toEqual([]);
    // Read set: change every acknowledged file; the reminder must name each one.
    for (const p of acknowledgedReads) {
      const f = corpus.find((c) => c.mountPath === p) as CorpusFile;
      await appendFile(join(dir, f.dataPath), 'changed after the crash\n');
    }
    // Each change is reported once, so collect across calls until the rescan has seen every edit.
    const reported = new Set<string>();
    await waitFor(async () => {
      const r = (await (await fetch(`${cp.url}/v1/reminder`, { headers: auth })).json()) as { changed: string[] };
      for (const p of r.changed) reported.add(p);
      return [...acknowledgedReads].every((p) => reported.has(p));
    }, 15_000);
    const lostReads = [...acknowledgedReads].filter((p) => !reported.has(p));
    expect(lostReads, 'acknowledged reads missing from the read set').toEqual([]);
    // The daemon followed: every acknowledged mount is on disk under knowledge/.
    const listed = await waitFor(async () => {
      const ls = (await run('ls', [m.mountpoint])).stdout.split('\n');
      return [...acknowledgedMounts].every((t) => ls.includes(`team_${t}`)) ? ls : null;
    }, 15_000);
    expect(listed, 'mounted teams missing from the mount').not.toBeNull();
    expect(m.child.exitCode).toBeNull();
  }, 180_000);

  it('daemon SIGKILLed: the next daemon cleans the stale mount point and serves the session again', async () => {
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 't00' });
    const base = await mkdtemp(join(tmpdir(), 'kfs-stale-'));
    const mountpoint = join(base, 'knowledge');
    try {
      const first = await startMount({ serverUrl: cp.url, token: session.token, mountpoint, args: ['--prefetch-threshold', '1', '--sync-interval', '200ms'] });
      mounts.push(first);
      const read = await run(process.execPath, [BIN, 'read', 'knowledge/team_t05/DUTY.md', '--socket', first.socketPath], { cwd: base });
      expect(read.code, read.stderr).toBe(0);
      await first.kill('SIGKILL');
      expect(isMounted(mountpoint), 'SIGKILL should leave the mount behind').toBe(true);
      const broken = await run('ls', [mountpoint], { timeoutMs: 10_000 });
      expect(broken.code).not.toBe(0);
      expect(broken.stderr).toMatch(/Transport endpoint is not connected/);

      const second = await startMount({ serverUrl: cp.url, token: session.token, mountpoint, args: ['--prefetch-threshold', '1', '--sync-interval', '200ms'] });
      mounts.push(second);
      expect(second.stderr + second.stdout).toMatch(/stale mount/);
      const ls = await run('ls', [mountpoint]);
      expect(ls.stdout.split('\n').filter(Boolean).sort()).toEqual(['account', 'team_t00', 'team_t05']);
      const duty = await readFile(join(dir, 'teams', 't05', 'DUTY.md'), 'utf8');
      expect((await run('cat', [join(mountpoint, 'team_t05', 'DUTY.md')])).stdout).toBe(duty);
      await second.stop();
      expect(isMounted(mountpoint)).toBe(false);
    } finally {
      await forceUnmount(mountpoint);
      await rm(base, { recursive: true, force: true });
    }
  }, 180_000);
});
