// `knowledgefs gc --delete` with real replicas, PostgreSQL and s3rver:
// - a replica still serving an old publication (it refuses the newer ones)
//   keeps that publication whole, and lets it go once it stops;
// - a gc killed (-9) half-way leaves the bucket servable and its lock held
//   until the lock expires; the next run takes it over and finishes;
// - gc in a loop while a real FUSE mount reads through two replicas and
//   publishes run: no open fails, every file whole.

import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobKey, indexKey, type Pointer } from '../../src/core/publication.js';
import { sha256Hex } from '../../src/core/sha256.js';
import { eachLimited } from '../../src/store/publication/blob-presence.js';
import { publishTo, s3Store } from '../helpers/bucket.js';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile } from '../helpers/data-dir.js';
import { BIN, fuseSuite, run, startMount, waitFor, type MountHandle } from '../helpers/mount.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';
import { startS3, type TestS3 } from '../helpers/s3rver.js';
import { checkGrepOutput, grepErrors } from '../faults/corpus.js';
import { EVERY_OPEN_FETCHES } from './grep-through-kill.js';

const ADMIN = 'kfsadmin_gc_0123456789abcdef0123';

let pgc: PgCluster;
let s3: TestS3;
let stateUrl: string;
const replicas: SpawnedControlPlane[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  [pgc, s3] = await Promise.all([startPostgres(), startS3()]);
  stateUrl = await pgc.createDatabase('gc');
});

afterAll(async () => {
  for (const r of replicas) await r.kill('SIGKILL').catch(() => undefined);
  await pgc?.destroy();
  await s3?.close();
  for (const d of dirs) await removeDataDir(d);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Gc {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `knowledgefs gc`; `killWhen` sends SIGKILL once stderr matches it. */
function gc(args: string[], killWhen?: RegExp): Promise<Gc> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'gc', ...args], { env: { ...process.env, ...s3.env, KNOWLEDGEFS_STATE_URL: stateUrl }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
      if (killWhen !== undefined && killWhen.test(stderr)) child.kill('SIGKILL');
    });
    child.once('exit', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

async function dataDir(files: Record<string, string>): Promise<string> {
  const dir = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files });
  dirs.push(dir);
  return dir;
}

/** Which of `keys` the bucket holds (one listing). */
async function present(prefix: string, keys: string[]): Promise<boolean[]> {
  const store = s3Store(s3, prefix);
  try {
    const held = new Set<string>();
    for await (const key of store.list('')) held.add(key);
    return keys.map((k) => held.has(k));
  } finally {
    await store.close();
  }
}

const blob = (text: string) => blobKey(sha256Hex(Buffer.from(text)));

describe('gc with replicas', () => {
  it('a replica still serving an old publication keeps it whole; once it stops, the next gc removes it', async () => {
    const prefix = 'stuck';
    const dir = await dataDir({ 'account/DUTY.md': '# Account\n', 'teams/payments/db.md': 'db v1\n' });
    const p1 = (await publishTo(s3, prefix, dir)).pointer;
    // --max-file-size 100: it refuses every later publication (big.md is larger), so it stays on p1.
    const stuck = await spawnControlPlane({
      adminToken: ADMIN,
      env: s3.env,
      args: ['--store', `s3://${s3.bucket}/${prefix}`, '--publication-poll', '200ms', '--state', stateUrl, '--state-heartbeat', '200ms', '--max-file-size', '100', '--audit-log', `${dir}/.knowledgefs/audit-stuck.log`],
    });
    replicas.push(stuck);
    await writeDataFile(dir, 'teams/payments/db.md', 'db v2\n');
    await writeDataFile(dir, 'account/big.md', 'x'.repeat(500));
    await publishTo(s3, prefix, dir);
    await writeDataFile(dir, 'teams/payments/db.md', 'db v3\n');
    await publishTo(s3, prefix, dir);
    const published = Date.now();
    await waitFor(() => /refusing the publication/.test(stuck.stderr), 10_000);
    const p1Keys = [blob('db v1\n'), indexKey('team_payments', p1.scopes['team_payments'] as string)];
    // p2 and its objects must be older than the grace of 3 s, counted from the
    // last publish (the refusal may come at once); the replica's heartbeat
    // (--state-heartbeat, every 200 ms) keeps p1 inside it.
    await sleep(Math.max(0, published + 3_500 - Date.now()));
    const kept = await gc(['--store', `s3://${s3.bucket}/${prefix}`, '--keep', '1', '--grace', '3s', '--delete']);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stdout).toMatch(/ served\n/);
    // p2's db.md, its index, its history copy.
    expect(kept.stdout).toMatch(/\ndeleted 3 objects, .*: 1 blob \(6 B\), 1 index \(.*\), 1 publication \(.*\)\n/);
    expect(await present(prefix, p1Keys)).toEqual([true, true]);
    // p1 is still served whole.
    const session = await stuck.createSession({ kind: 'personal', creator: 'alice' });
    const read = await fetch(`${stuck.url}/v1/read`, { method: 'POST', headers: { authorization: `Bearer ${session.token}` }, body: JSON.stringify({ path: 'team_payments/db.md', mount: true }) });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ sha256: sha256Hex(Buffer.from('db v1\n')) });

    await stuck.kill('SIGTERM');
    // Its last heartbeat, at most 200 ms before it exited, falls out of the 3 s grace.
    await sleep(3_500);
    const gone = await gc(['--store', `s3://${s3.bucket}/${prefix}`, '--keep', '1', '--grace', '3s', '--delete']);
    expect(gone.code, gone.stderr).toBe(0);
    expect(gone.stdout).not.toMatch(/ served\n/);
    expect(await present(prefix, p1Keys)).toEqual([false, false]);
  }, 120_000);

  it('a gc killed half-way leaves the bucket servable and its lock held until it expires; the next run finishes', async () => {
    const prefix = 'killed';
    const dir = await dataDir({ 'account/DUTY.md': '# Account\n', 'teams/payments/db.md': 'db\n' });
    const pointer: Pointer = (await publishTo(s3, prefix, dir)).pointer;
    // 2 500 unnamed blobs (three DeleteObjects batches).
    const store = s3Store(s3, prefix);
    try {
      await eachLimited(Array.from({ length: 2_500 }, (_, i) => i), 16, (i) => store.put(blob(`garbage ${i}\n`), Buffer.from(`garbage ${i}\n`)));
    } finally {
      await store.close();
    }
    await sleep(1_100);
    const where = `s3://${s3.bucket}/${prefix}`;
    const killed = await gc(['--store', where, '--keep', '1', '--grace', '1s', '--delete', '--lock-ttl', '5s'], /gc: deleted 1 000\/2 500 objects…/);
    expect(killed.signal).toBe('SIGKILL');
    // Its lock is still held: another run is refused (exit 4), naming the holder.
    const refused = await gc(['--store', where, '--keep', '1', '--grace', '1s', '--delete']);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(/another gc holds the lock on s3:\/\/knowledge\/killed .*; try again later/);
    // Half-way: some garbage gone, some left, everything the publication names there.
    const sample = await present(prefix, Array.from({ length: 2_500 }, (_, i) => blob(`garbage ${i}\n`)));
    expect(sample.filter((x) => !x).length).toBeGreaterThanOrEqual(1_000);
    expect(sample.filter((x) => x).length).toBeGreaterThan(0);
    expect(await present(prefix, ['current.json', blob('# Account\n'), blob('db\n'), indexKey('team_payments', pointer.scopes['team_payments'] as string)])).toEqual([true, true, true, true]);
    // Once it expired (5 s after its last renewal), the next run takes it over and finishes the job.
    await sleep(5_200);
    const finished = await gc(['--store', where, '--keep', '1', '--grace', '1s', '--delete']);
    expect(finished.code, finished.stderr).toBe(0);
    expect(finished.stdout).toMatch(/\ndeleted \d[\d ]* objects/);
    expect((await present(prefix, Array.from({ length: 2_500 }, (_, i) => blob(`garbage ${i}\n`)))).every((x) => !x)).toBe(true);
    const again = await gc(['--store', where, '--keep', '1', '--grace', '1s', '--delete']);
    expect(again.stdout).toMatch(/\ndeleted 0 objects, 0 B\n/);
  }, 120_000);
});

fuseSuite('gc while a mount reads through replicas and publishes run', () => {
  const mounts: MountHandle[] = [];
  afterAll(async () => {
    for (const m of mounts) await m.stop().catch(() => undefined);
  });

  it('no open fails and every file is whole, while gc --delete runs again and again', async () => {
    const prefix = 'live';
    const files: Record<string, string> = { 'account/DUTY.md': '# Account\n' };
    for (let i = 0; i < 40; i++) files[`teams/payments/docs/f${i}.md`] = `f${i} version 0\n`.repeat(1 + i);
    const dir = await dataDir(files);
    await publishTo(s3, prefix, dir);
    const args = (i: number) => ['--store', `s3://${s3.bucket}/${prefix}`, '--publication-poll', '200ms', '--state', stateUrl, '--state-heartbeat', '200ms', '--audit-log', `${dir}/.knowledgefs/audit-live-${i}.log`];
    const a = await spawnControlPlane({ adminToken: ADMIN, env: s3.env, args: args(0) });
    const b = await spawnControlPlane({ adminToken: ADMIN, env: s3.env, args: args(1) });
    replicas.push(a, b);
    const session = await a.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    const m = await startMount({ serverUrl: `${a.url},${b.url}`, token: session.token, args: EVERY_OPEN_FETCHES });
    mounts.push(m);

    let stop = false;
    let version = 0;
    const publishing = (async () => {
      while (!stop) {
        version++;
        for (let i = 0; i < 40; i += 3) await writeDataFile(dir, `teams/payments/docs/f${i}.md`, `f${i} version ${version}\n`.repeat(1 + i));
        await publishTo(s3, prefix, dir);
        await sleep(700);
      }
    })();
    const collecting = (async () => {
      const runs: Gc[] = [];
      while (!stop) {
        runs.push(await gc(['--store', `s3://${s3.bucket}/${prefix}`, '--keep', '1', '--grace', '3s', '--delete']));
        await sleep(300);
      }
      return runs;
    })();
    // Reads: every file, whole, one of its versions, over and over for 12 s.
    const whole = (path: string, text: string) => {
      const i = Number(/f(\d+)\.md$/.exec(path)?.[1]);
      return Number.isInteger(i) ? new RegExp(`^(f${i} version (\\d+)\\n){${1 + i}}$`).test(text) && new Set(text.split('\n').filter(Boolean)).size === 1 : true;
    };
    const until = Date.now() + 12_000;
    let opens = 0;
    const failures: string[] = [];
    while (Date.now() < until) {
      const grep = await run('grep', ['-r', '-H', '-c', '', '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
      failures.push(...grepErrors(grep.stderr));
      const cat = await run('sh', ['-c', 'for f in team_payments/docs/*.md; do cat "$f" > /dev/null || echo "FAILED $f"; done'], { cwd: m.mountpoint, timeoutMs: 60_000 });
      failures.push(...cat.stdout.split('\n').filter((l) => l.startsWith('FAILED')), ...grepErrors(cat.stderr));
      opens += 2 * 41;
      for (let i = 0; i < 40; i += 7) {
        const one = await run('cat', [`team_payments/docs/f${i}.md`], { cwd: m.mountpoint, timeoutMs: 30_000 });
        if (one.code !== 0 || !whole(`f${i}.md`, one.stdout)) failures.push(`f${i}.md: ${one.code} ${one.stderr}${one.stdout.slice(0, 80)}`);
        opens++;
      }
    }
    stop = true;
    await publishing;
    const runs = await collecting;
    expect(failures, `${failures.length} failed of ${opens} opens`).toEqual([]);
    expect(runs.every((r) => r.code === 0), runs.map((r) => r.stderr).join('\n')).toBe(true);
    // gc did collect something while the mount read: the check exercised deletions.
    const deleted = runs.reduce((n, r) => n + Number(/\ndeleted (\d+) objects/.exec(r.stdout)?.[1] ?? 0), 0);
    expect(deleted).toBeGreaterThan(0);
    expect(version).toBeGreaterThan(3);
    void checkGrepOutput;
  }, 180_000);
});
