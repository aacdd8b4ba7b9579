// Cold start at fleet scale, sized for a 2-core machine: MOUNTS daemons of
// personal sessions (everything materialised, content prefetch on) start at
// once against one control plane, and an agent's first command, `grep -r`,
// runs on one of them while all the prefetches stream. Every file must be
// read whole: no EIO. Opens are bounded by --request-timeout (1 s here, so
// the storm needs only a few mounts to outlast it): an open that waited
// behind background prefetch batches fails with EIO past it, which is what a
// fleet of 20 mounts did with the default 5 s.
//
// Then the prefetches must still complete (shed batches are asked again,
// not dropped), and the control plane must have shed some (or the storm was
// too small to test anything).

import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { BIN, fuseSuite, run, startMount, type MountHandle } from '../helpers/mount.js';
import { CONTROL_PLANE_METRICS } from '../../src/core/metrics.js';
import { checkGrepOutput, filesSpec, makeCorpus, versionsOf, type CorpusFile } from '../faults/corpus.js';

const MOUNTS = 8;
const TEAMS = ['t0', 't1', 't2'];
const OPEN_TIMEOUT = process.env.STORM_TIMEOUT ? ['--request-timeout', process.env.STORM_TIMEOUT] : [];

interface DaemonStatusJson {
  prefetch: { done: number; total: number };
  activity: { eio: number };
}

async function status(m: MountHandle): Promise<DaemonStatusJson> {
  const r = await run(process.execPath, [BIN, 'status', '--json', '--socket', m.socketPath]);
  if (r.code !== 0) throw new Error(`status failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as DaemonStatusJson;
}

fuseSuite(`${MOUNTS} mounts prefetching at once against one control plane`, () => {
  let dir = '';
  let cp: TestControlPlane | undefined;
  let corpus: CorpusFile[] = [];
  const mounts: MountHandle[] = [];

  beforeAll(async () => {
    corpus = makeCorpus(['account', ...TEAMS.map((t) => `team_${t}`)], 250, 600);
    dir = await makeDataDir({
      teams: Object.fromEntries(TEAMS.map((t) => [t, t.toUpperCase()])),
      users: { alice: { teams: TEAMS } },
      files: filesSpec(corpus),
    });
    cp = await startControlPlane({ dataDir: dir });
    const tokens = await Promise.all(Array.from({ length: MOUNTS }, () => (cp as TestControlPlane).createSession({ kind: 'personal', creator: 'alice' })));
    const started = await Promise.allSettled(
      tokens.map(({ token }) =>
        startMount({ serverUrl: (cp as TestControlPlane).url, token, args: ['--prefetch-threshold', '1GiB', ...OPEN_TIMEOUT], readyTimeoutMs: 60_000 }),
      ),
    );
    for (const s of started) if (s.status === 'fulfilled') mounts.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  });

  afterAll(async () => {
    await Promise.all(mounts.map((m) => m.stop()));
    await cp?.close();
    if (dir) await removeDataDir(dir);
  });

  it('grep -r on a mount during the storm reads every file whole: no EIO', async () => {
    const agent = mounts[mounts.length - 1] as MountHandle;
    const r = await run('grep', ['-r', '', '.'], { cwd: agent.mountpoint });
    expect(r.stderr, 'grep saw errors (EIO while the prefetches ran)').toBe('');
    expect(r.code).toBe(0);
    const check = checkGrepOutput(r.stdout, versionsOf(corpus));
    expect(check.problems).toEqual([]);
    expect(check.complete.length).toBe(corpus.length);
    expect((await status(agent)).activity.eio).toBe(0);
  });

  it('every prefetch completes (shed batches are asked again later), none with EIO', async () => {
    const deadline = Date.now() + 120_000;
    for (const m of mounts) {
      for (;;) {
        const s = await status(m);
        expect(s.activity.eio).toBe(0);
        if (s.prefetch.total > 0 && s.prefetch.done >= s.prefetch.total) break;
        if (Date.now() > deadline) throw new Error(`prefetch stuck at ${s.prefetch.done}/${s.prefetch.total}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  });

  it('the control plane shed prefetch batches (else this storm tested nothing)', async () => {
    const shed = (await (cp as TestControlPlane).cp.metrics.samples(CONTROL_PLANE_METRICS.prefetchShed))[0]?.value ?? 0;
    expect(shed).toBeGreaterThan(0);
  });
});
