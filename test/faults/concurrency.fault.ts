// 32 concurrent shell processes (`grep -r`, `cat`) and read-tool calls
// against one mount while files keep changing and, halfway through, the
// creator loses a team. Checked afterwards, process by process:
//   - every output is whole and exactly one known version of its file (no
//     partial content, no mix of versions, no unknown bytes);
//   - no stale bytes after a known change: once the mount showed version k
//     of a file (its new size visible through `stat`), no process started
//     later prints an older version;
//   - after the revocation (plus grant TTL + sync interval + slack) no
//     process prints the revoked team's bytes; the read tool refuses it at
//     once;
//   - every process ends well within the timeouts; daemon and control plane
//     keep serving; a final `grep -r` equals the final versions exactly.

import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { startFaultMembership, type FaultMembership } from '../helpers/fault-membership.js';
import { BIN, fuseSuite, run, startMount, waitFor, type MountHandle, type RunResult } from '../helpers/mount.js';
import { fileContent, filesSpec, makeCorpus, type CorpusFile } from './corpus.js';

const PROCESSES = 32;
/** Edits that must become visible while the readers run; the run lasts as long as that takes. */
const EDITS = Number(process.env['KFS_CONCURRENCY_EDITS'] ?? 4);
const MAX_RUN_MS = 150_000;
const GRANT_TTL_MS = 1000;
const SYNC_MS = 200;
/** Revocation reaches every open within grant TTL + sync interval; the rest is slack for a loaded machine. */
const REVOKE_SETTLE_MS = GRANT_TTL_MS + SYNC_MS + 3000;
const NO_HANG_MS = 60_000;

interface Job {
  readonly kind: 'grep' | 'cat' | 'read';
  readonly target?: CorpusFile;
  readonly started: number;
  readonly result: RunResult;
}

fuseSuite('32 concurrent readers while files change and a team is revoked', () => {
  let dir: string;
  let members: FaultMembership;
  let cp: SpawnedControlPlane;
  let mount: MountHandle;
  let corpus: CorpusFile[];

  beforeAll(async () => {
    corpus = makeCorpus(['account', 'team_payments', 'team_search'], 12, 300);
    dir = await makeDataDir({ teams: { payments: 'Payments', search: 'Search' }, files: filesSpec(corpus) });
    members = await startFaultMembership({ alice: ['payments', 'search'] });
    // Its own process: the test process is busy spawning 32 children and must not starve it.
    cp = await spawnControlPlane({ dataDir: dir, args: ['--membership-url', members.url, '--membership-timeout', '1s', '--scan-interval', '100ms'] });
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    mount = await startMount({
      serverUrl: cp.url,
      token: session.token,
      args: ['--grant-ttl', `${GRANT_TTL_MS}ms`, '--sync-interval', `${SYNC_MS}ms`, '--request-timeout', '5s'],
    });
    const m = mount;
    expect(await waitFor(() => /prefetch: .*done/.test(m.stderr), 30_000), m.stderr).toBe(true);
  });

  afterAll(async () => {
    await mount?.stop();
    await cp?.kill('SIGTERM');
    await members?.close();
    if (dir) await removeDataDir(dir);
  });

  it('no partial, wrong, stale or revoked bytes; nothing hangs; everything keeps serving', async () => {
    // Versions of every file, in order; version 1 is the corpus.
    const versions = new Map<string, string[]>(corpus.map((f) => [f.mountPath, [f.content]]));
    const byContent = new Map<string, { path: string; version: number }>();
    for (const f of corpus) byContent.set(`${f.mountPath}\0${f.content}`, { path: f.mountPath, version: 1 });
    /** When the mount was first seen showing version k (k ≥ 2) of a file. */
    const known = new Map<string, { version: number; at: number }[]>();
    const editable = corpus.filter((f) => !f.mountPath.startsWith('team_search/') && !f.mountPath.endsWith('DUTY.md')).slice(0, 8);
    const search = corpus.filter((f) => f.mountPath.startsWith('team_search/'));
    const jobs: Job[] = [];
    const startedAt = Date.now();
    let revokedAt = Infinity;
    let writerDone = false;
    // Readers stop once every edit is visible and the revocation has had time to settle (and some more).
    const running = () =>
      Date.now() - startedAt < MAX_RUN_MS && !(writerDone && Date.now() > revokedAt + REVOKE_SETTLE_MS + 3000);

    const writer = async () => {
      let round = 0;
      while (round < EDITS && Date.now() - startedAt < MAX_RUN_MS) {
        const f = editable[round % editable.length] as CorpusFile;
        const list = versions.get(f.mountPath) as string[];
        const version = list.length + 1;
        const content = fileContent(f.mountPath, version, 5 + ((round * 37) % 200) + version);
        list.push(content);
        byContent.set(`${f.mountPath}\0${content}`, { path: f.mountPath, version });
        // Atomic replace (write aside, rename over): a plain writeFile passes through an empty file
        // on disk, which the control plane may legitimately scan and serve as a version of its own.
        const aside = join(dir, `.edit-${round}.tmp`);
        await writeFile(aside, content);
        await rename(aside, join(dir, f.dataPath));
        const size = String(Buffer.byteLength(content));
        const seen = await waitFor(async () => (await run('stat', ['-c', '%s', join(mount.mountpoint, f.mountPath)])).stdout.trim() === size, 30_000, 50);
        if (seen) known.set(f.mountPath, [...(known.get(f.mountPath) ?? []), { version, at: Date.now() }]);
        round++;
        // Halfway through the edits, the creator leaves the search team.
        if (round === Math.ceil(EDITS / 2)) {
          members.setTeams('alice', ['payments']);
          revokedAt = Date.now();
        }
      }
      writerDone = true;
    };
    const worker = async (i: number) => {
      let n = 0;
      while (running()) {
        const started = Date.now();
        n++;
        if (i < 6) {
          jobs.push({ kind: 'grep', started, result: await run('grep', ['-r', '-H', '', '.'], { cwd: mount.mountpoint, timeoutMs: NO_HANG_MS }) });
        } else if (i < 28) {
          const pool = n % 3 === 0 ? search : n % 3 === 1 ? editable : corpus;
          const f = pool[(i * 7 + n) % pool.length] as CorpusFile;
          jobs.push({ kind: 'cat', target: f, started, result: await run('cat', [join(mount.mountpoint, f.mountPath)], { timeoutMs: NO_HANG_MS }) });
        } else {
          const pool = n % 2 === 0 ? search : editable;
          const f = pool[(i + n) % pool.length] as CorpusFile;
          const result = await run(process.execPath, [BIN, 'read', `knowledge/${f.mountPath}`, '--socket', mount.socketPath], { cwd: mount.dir, timeoutMs: NO_HANG_MS });
          jobs.push({ kind: 'read', target: f, started, result });
        }
      }
    };
    await Promise.all([writer(), ...Array.from({ length: PROCESSES }, (_, i) => worker(i))]);

    const problems: string[] = [];
    const stale = (path: string, version: number, started: number): boolean =>
      (known.get(path) ?? []).some((k) => k.version > version && k.at < started);
    /** Checks one file's printed text; returns the version, or null after recording the problem. */
    const judge = (job: Job, path: string, text: string): void => {
      const id = byContent.get(`${path}\0${text}`);
      if (id === undefined) {
        const all = versions.get(path) ?? [];
        const prefixOf = all.findIndex((v) => v.startsWith(text));
        problems.push(
          `${job.kind} ${path}: ${prefixOf >= 0 ? `partial content: ${Buffer.byteLength(text)} bytes of v${prefixOf + 1}` : `bytes of no version (${Buffer.byteLength(text)} bytes)`}` +
            ` (versions: ${all.map((v, i) => `v${i + 1}=${Buffer.byteLength(v)}`).join(' ')}; started ${job.started - startedAt} ms in;` +
            ` known: ${(known.get(path) ?? []).map((k) => `v${k.version}@${k.at - startedAt}`).join(' ')})`,
        );
        return;
      }
      if (stale(path, id.version, job.started)) problems.push(`${job.kind} ${path}: stale v${id.version} after a newer version was known`);
      if (path.startsWith('team_search/') && job.started > revokedAt + (job.kind === 'read' ? 0 : REVOKE_SETTLE_MS)) {
        problems.push(`${job.kind} ${path}: revoked team's bytes ${job.started - revokedAt} ms after the revocation`);
      }
    };
    let grepFiles = 0;
    let transient = 0;
    for (const job of jobs) {
      const r = job.result;
      if (r.timedOut) problems.push(`${job.kind} ${job.target?.mountPath ?? ''}: hung`);
      if (job.kind === 'grep') {
        const byFile = new Map<string, string>();
        for (const line of r.stdout.split('\n')) {
          if (line === '') continue;
          const colon = line.indexOf(':');
          const path = line.slice(0, colon).replace(/^\.\//, '');
          byFile.set(path, (byFile.get(path) ?? '') + line.slice(colon + 1) + '\n');
        }
        for (const [path, text] of byFile) judge(job, path, text);
        grepFiles += byFile.size;
        for (const l of r.stderr.split('\n').filter(Boolean)) {
          if (!/Input\/output error|No such file or directory/.test(l)) problems.push(`grep: unexpected error ${l}`);
        }
      } else if (job.target !== undefined) {
        if (r.code === 0) judge(job, job.target.mountPath, r.stdout);
        else if (r.stdout !== '') problems.push(`${job.kind} ${job.target.mountPath}: failed yet printed ${r.stdout.length} chars`);
        else if (!job.target.mountPath.startsWith('team_search/')) {
          // A team that stays loadable may only fail transiently (EIO while its file changes under the open).
          if (job.kind === 'cat' && !/Input\/output error/.test(r.stderr)) problems.push(`cat ${job.target.mountPath}: ${r.stderr.trim()}`);
          if (job.kind === 'read' && r.code !== 4) problems.push(`read ${job.target.mountPath}: exit ${r.code} ${r.stderr.trim()}`);
          transient++;
        }
      }
    }
    const searchReadsAfter = jobs.filter((j) => j.kind === 'read' && j.target?.mountPath.startsWith('team_search/') && j.started > revokedAt);
    const summary = {
      jobs: jobs.length,
      grep: jobs.filter((j) => j.kind === 'grep').length,
      cat: jobs.filter((j) => j.kind === 'cat').length,
      read: jobs.filter((j) => j.kind === 'read').length,
      failed: jobs.filter((j) => j.result.code !== 0).length,
      transientFailures: transient,
      grepFiles,
      edits: [...versions.values()].reduce((n, v) => n + v.length - 1, 0),
      knownEdits: [...known.values()].reduce((n, v) => n + v.length, 0),
      slowestMs: Math.max(...jobs.map((j) => j.result.ms)),
      runMs: Date.now() - startedAt,
    };
    process.stderr.write(`concurrency: ${JSON.stringify(summary)}\n`);
    expect(problems.slice(0, 20)).toEqual([]);
    expect(summary.knownEdits, 'edits that never became visible through the mount').toBe(EDITS);
    expect(Number.isFinite(revokedAt)).toBe(true);
    expect(searchReadsAfter.length, 'no read-tool call after the revocation').toBeGreaterThan(0);
    // Refused either way: "no such file" (1), or the membership source too slow to answer under this load (4).
    for (const j of searchReadsAfter) {
      expect([1, 4], j.result.stderr).toContain(j.result.code);
      expect(j.result.stdout).toBe('');
    }

    // Still serving: a final grep equals the final versions, without search.
    const finalVersions = new Map(
      [...versions].filter(([p]) => !p.startsWith('team_search/')).map(([p, v]) => [p, v[v.length - 1] as string]),
    );
    const final = await waitFor(async () => {
      const r = await run('grep', ['-r', '-H', '', '.'], { cwd: mount.mountpoint, timeoutMs: NO_HANG_MS });
      const byFile = new Map<string, string>();
      for (const line of r.stdout.split('\n').filter(Boolean)) {
        const colon = line.indexOf(':');
        const path = line.slice(0, colon).replace(/^\.\//, '');
        byFile.set(path, (byFile.get(path) ?? '') + line.slice(colon + 1) + '\n');
      }
      return r.code === 0 && byFile.size === finalVersions.size && [...finalVersions].every(([p, v]) => byFile.get(p) === v);
    }, 20_000);
    expect(final, 'the final grep -r does not match the final versions').toBe(true);
    expect(mount.child.exitCode).toBeNull();
  }, 240_000);
});
