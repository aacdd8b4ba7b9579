#!/usr/bin/env node
// `npm run bench`: our mount on both FUSE bindings (native = the libfuse 3
// addon, fuse-native = libfuse 2) side by side with local disk (the limit),
// an in-memory libfuse 3 filesystem in C (the C ceiling: FUSE's own limit),
// an in-memory fuse-native filesystem (the fuse-native ceiling) and rclone
// over HTTP (the peer), on the same generated corpus, in one run. Prints one
// table of medians with ratios and the FUSE requests one warm `grep -r`
// costs each filesystem (strace), checks the targets of docs/PERFORMANCE.md,
// writes everything (every sample) to bench/results/<timestamp>.json.
//
//   node bench/run.mjs [--quick] [--files N] [--runs N] [--peer-runs N] [--only a,b,…]
//                      [--scale-files N,M] [--runners N] [--work DIR]
//                      [--scale-out-runners N] [--storm-mounts N] [--no-drop-caches] [--verbose]
// Sections (--only): disk ceiling ours rclone read load scale scaleout store storm
// (ceiling = both ceilings, C and fuse-native).
// scaleout: 1 and 3 replicas on a throwaway PostgreSQL, --scale-out-runners
// (default 1 000) simulated runners (bench/lib/scale-out.mjs).
// store: publish and replicas over object storage (bench/lib/store.mjs).
// storm: --storm-mounts (default 20) mounts prefetching at once, an agent's
// walk over one of them meanwhile; one control plane, then 2 replicas on a
// bucket (bench/lib/storm.mjs).
// --runs: rounds for everything (default 5); --peer-runs: rounds rclone
// takes part in (default 3: its rows cost ~40 s a round).
//
// Measurements are interleaved: each cold round starts a fresh instance of
// every filesystem in turn (dropped page cache for local disk) and times its
// ready line and first `grep -r`; then every filesystem is mounted at once
// and each warm command visits them in rounds. So the ratios come from the
// same stretches of time even when the shared machine's load drifts.
//
// Progress goes to stderr; every child process and mount is cleaned up on
// success, failure and Ctrl-C (bench/lib/proc.mjs).

import { mkdirSync, writeFileSync, cpSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import os from 'node:os';
import { generateCorpus, DEFAULTS } from './corpus.mjs';
import { log, setVerbose, installCleanupHandlers, cleanup, onCleanup, run, stop } from './lib/proc.mjs';
import { summarize, round3 } from './lib/stats.mjs';
import { battery, timed, grepCommand } from './lib/commands.mjs';
import { coldRounds, warmRounds } from './lib/rounds.mjs';
import { startCeiling, startCeilingC, startRclone, startStaticServer, stopPeer } from './lib/peers.mjs';
import { REPO, BIN, startServer, createSession, writeToken, startMount, stopMount, rssMiB, waitPrefetch, idleCpuMsPerS } from './lib/knowledgefs.mjs';
import { readToolLatency } from './lib/read-tool.mjs';
import { countFuseOps, HAS_STRACE } from './lib/fuse-ops.mjs';
import { controlPlaneLoad } from './lib/load.mjs';
import { measureScale, breakdownSummary } from './lib/scale.mjs';
import { scaleOut } from './lib/scale-out.mjs';
import { prefetchStorm, bucketStorm, stormTable } from './lib/storm.mjs';
import { measureStore, storeTable } from './lib/store.mjs';
import { mainTable, opsTable, sideTable, checkTargets, targetsText, consistencyErrors } from './lib/report.mjs';

const SECTIONS = ['disk', 'ceiling', 'ours', 'rclone', 'read', 'load', 'scale', 'scaleout', 'store', 'storm'];

function parseArgs(argv) {
  const o = { quick: false, files: DEFAULTS.files, runs: 5, peerRuns: null, only: SECTIONS, work: join(os.tmpdir(), 'knowledgefs-bench'), dropCaches: true, verbose: false, scaleFiles: null, runners: 200, scaleOutRunners: 1000, stormMounts: 20 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') o.quick = true;
    else if (a === '--files') o.files = Number(val());
    else if (a === '--runs') o.runs = Number(val());
    else if (a === '--peer-runs') o.peerRuns = Number(val());
    else if (a === '--only') o.only = val().split(',');
    else if (a === '--scale-files') o.scaleFiles = val().split(',').map(Number);
    else if (a === '--runners') o.runners = Number(val());
    else if (a === '--scale-out-runners') o.scaleOutRunners = Number(val());
    else if (a === '--storm-mounts') o.stormMounts = Number(val());
    else if (a === '--work') o.work = val();
    else if (a === '--no-drop-caches') o.dropCaches = false;
    else if (a === '--verbose') o.verbose = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(readFileSync(new URL(import.meta.url), 'utf8').split('\n').slice(1).filter((l) => l.startsWith('//')).map((l) => l.slice(3)).join('\n') + '\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a} (see --help)`);
  }
  for (const s of o.only) if (!SECTIONS.includes(s)) throw new Error(`unknown section ${s} (sections: ${SECTIONS.join(' ')})`);
  if (o.quick) {
    if (!argv.includes('--files')) o.files = 603;
    if (!argv.includes('--runs')) o.runs = 3;
    if (!argv.includes('--runners')) o.runners = 50;
  }
  o.scaleFiles ??= o.quick ? [o.files, 10_003] : [o.files, 100_000];
  if (!Number.isInteger(o.files) || o.files < 10) throw new Error('--files must be an integer ≥ 10');
  if (!Number.isInteger(o.runs) || o.runs < 1) throw new Error('--runs must be an integer ≥ 1');
  // rclone's rows take ~25 s per cold round and ~15 s per warm round: 3 of each keep the default run near 5 minutes.
  o.peerRuns ??= Math.min(o.runs, 3);
  if (!Number.isInteger(o.peerRuns) || o.peerRuns < 1) throw new Error('--peer-runs must be an integer ≥ 1');
  return o;
}

const opts = parseArgs(process.argv.slice(2));
setVerbose(opts.verbose);
installCleanupHandlers();
const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(0)} s`;
const want = (s) => opts.only.includes(s);
const results = {
  startedAt: new Date().toISOString(),
  host: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model, memGiB: round3(os.totalmem() / 2 ** 30), loadAvgAtStart: os.loadavg().map(round3), node: process.version, kernel: os.release() },
  options: opts,
  errors: [],
  notes: [],
};
/** Which code is measured: the commit, and a fingerprint of the built dist/ (a rebuild mid-run is reported). */
async function codeVersion() {
  const commit = (await run('git rev-parse --short HEAD', { cwd: REPO })).stdout.trim();
  const dirty = (await run('git status --porcelain -- src', { cwd: REPO })).stdout.trim() !== '';
  const dist = (await run("find dist -name '*.js' -printf '%T@\\n' | sort -n | tail -1", { cwd: REPO })).stdout.trim();
  return { commit, srcDirty: dirty, distBuiltAt: dist ? new Date(Number(dist) * 1000).toISOString() : null };
}
results.code = await codeVersion();
const fail = (section, err) => {
  const msg = `${section}: ${err instanceof Error ? err.message : String(err)}`;
  results.errors.push(msg);
  log(`ERROR ${msg}`);
};

// ---- corpus and the plain-disk view (same layout as the mount) ----------
mkdirSync(opts.work, { recursive: true });
const extraTeams = opts.quick ? 20 : 100;
const dataDir = join(opts.work, `data-${opts.files}-x${extraTeams}`);
log(`corpus: ${opts.files} files in ${dataDir}…`);
const corpus = { ...generateCorpus(dataDir, { files: opts.files, extraTeams }), dir: dataDir };
results.corpus = { files: corpus.materialisedFiles, bytes: corpus.bytes, diskBytes: corpus.diskBytes, teams: corpus.teams, dataDir };
const viewDir = join(opts.work, `view-${corpus.key}`);
if (!existsSync(`${viewDir}.done`)) {
  rmSync(viewDir, { recursive: true, force: true });
  cpSync(join(dataDir, 'account'), join(viewDir, 'account'), { recursive: true, preserveTimestamps: true });
  for (const t of corpus.teams) cpSync(join(dataDir, 'teams', t), join(viewDir, `team_${t}`), { recursive: true, preserveTimestamps: true });
  writeFileSync(`${viewDir}.done`, '');
}
const runDir = join(opts.work, `run-${process.pid}`);
mkdirSync(runDir, { recursive: true });
onCleanup(() => rmSync(runDir, { recursive: true, force: true }));
log(`corpus ready: ${corpus.materialisedFiles} files, ${(corpus.bytes / 1e6).toFixed(1)} MB (${(corpus.diskBytes / 1e6).toFixed(1)} MB on disk) [${elapsed()}]`);

/** Re-reads the corpus so servers that read it (control plane, static server) start warm again after a cache drop. */
const rewarm = () => run(`find '${dataDir}' '${viewDir}' -type f -exec cat {} + > /dev/null`);

async function baselines() {
  const node = [];
  const cli = [];
  for (let i = 0; i < opts.runs; i++) {
    node.push((await timed(`${process.execPath} -e 0`)).ms);
    cli.push((await timed(`${process.execPath} ${BIN} --version`)).ms);
  }
  results.baseline = { nodeStartMs: summarize(node), cliStartMs: summarize(cli) };
  log(`baseline: node -e 0 ${results.baseline.nodeStartMs.median.toFixed(0)} ms, knowledgefs --version ${results.baseline.cliStartMs.median.toFixed(0)} ms`);
}

async function sideBySide(server, tokenFile, http) {
  const mountOurs = (o) => () => startMount(server, tokenFile, runDir, o);
  const parts = { inProcessMs: [], sessionPlanMs: [], treeMs: [], mountMs: [] };
  const checkFiles = (m) => {
    if (m.files !== corpus.materialisedFiles) throw new Error(`mount shows ${m.files} files, corpus has ${corpus.materialisedFiles}`);
    if (m.breakdown) for (const k of Object.keys(parts)) parts[k].push(m.breakdown[k]);
  };
  // ---- cold rounds -------------------------------------------------------
  const canDrop = want('disk') && opts.dropCaches && (await run('echo 3 > /proc/sys/vm/drop_caches')).code === 0;
  if (want('disk') && !canDrop) results.notes.push('local disk cold runs skipped: cannot write /proc/sys/vm/drop_caches');
  const cold = [];
  if (canDrop) cold.push({ key: 'disk', label: 'disk', start: async () => { await run('sync; echo 3 > /proc/sys/vm/drop_caches'); return { mnt: viewDir, readyMs: null }; }, stop: rewarm });
  if (want('ceiling')) cold.push({ key: 'ceilingC', label: 'C ceiling', start: () => startCeilingC(viewDir, runDir), stop: stopPeer });
  if (want('ceiling')) cold.push({ key: 'ceiling', label: 'ceiling', start: () => startCeiling(viewDir, runDir), stop: stopPeer });
  if (server) {
    cold.push({ key: 'oursOn', label: 'ours (prefetch on)', start: mountOurs({ prefetch: 'on', binding: 'native' }), stop: stopMount, onReady: checkFiles });
    cold.push({
      key: 'oursOff', label: 'ours (prefetch off)', start: mountOurs({ prefetch: 'off', binding: 'native' }), stop: stopMount,
      onReady: (m, extra) => { checkFiles(m); (extra.rssAtReady ??= []).push(rssMiB(m.handle.pid).rss); },
    });
    cold.push({ key: 'oursFnOn', label: 'ours fuse-native (prefetch on)', start: mountOurs({ prefetch: 'on', binding: 'fuse-native' }), stop: stopMount, onReady: checkFiles });
  }
  if (http) cold.push({ key: 'rclone', label: 'rclone', runs: opts.peerRuns, start: () => startRclone(http.url, runDir), stop: stopPeer });
  log(`cold rounds: ${cold.map((t) => t.label).join(', ')} [${elapsed()}]`);
  const c = await coldRounds(cold, opts.runs, results.errors);

  // ---- warm rounds: everything mounted at once -----------------------------
  log(`warm rounds [${elapsed()}]`);
  const all = battery('/').map((x) => x.id);
  const mounted = [];
  const stops = [];
  try {
    if (want('disk')) mounted.push({ key: 'disk', label: 'disk', mnt: viewDir, commands: all });
    if (want('ceiling')) {
      const cc = await startCeilingC(viewDir, runDir);
      stops.push(() => stopPeer(cc));
      mounted.push({ key: 'ceilingC', label: 'C ceiling', mnt: cc.mnt, commands: all, handle: cc.handle });
      const best = await startCeiling(viewDir, runDir);
      stops.push(() => stopPeer(best));
      mounted.push({ key: 'ceiling', label: 'ceiling', mnt: best.mnt, commands: all, handle: best.handle });
      const policy = await startCeiling(viewDir, runDir, 'ours');
      stops.push(() => stopPeer(policy));
      mounted.push({ key: 'ceilingOurPolicy', label: 'ceiling (our cache policy)', mnt: policy.mnt, commands: ['grep'], handle: policy.handle });
    }
    let ours = null;
    let oursFn = null;
    if (server) {
      ours = await mountOurs({ prefetch: 'on', binding: 'native' })();
      stops.push(() => stopMount(ours));
      oursFn = await mountOurs({ prefetch: 'on', binding: 'fuse-native' })();
      stops.push(() => stopMount(oursFn));
      const ttl0 = await mountOurs({ prefetch: 'on', grantTtl: '0', binding: 'native' })();
      stops.push(() => stopMount(ttl0));
      for (const m of [ours, oursFn, ttl0]) await waitPrefetch(m.socket, 300_000);
      mounted.push({ key: 'ours', label: 'ours (native)', mnt: ours.mnt, commands: all });
      mounted.push({ key: 'oursFn', label: 'ours (fuse-native)', mnt: oursFn.mnt, commands: all });
      mounted.push({ key: 'oursTtl0', label: 'ours --grant-ttl 0', mnt: ttl0.mnt, commands: ['grep'] });
    }
    if (http) {
      const rc = await startRclone(http.url, runDir);
      stops.push(() => stopPeer(rc));
      mounted.push({ key: 'rclone', label: 'rclone', mnt: rc.mnt, commands: all, runs: opts.peerRuns });
    }
    const w = await warmRounds(mounted, battery, opts.runs, results.errors);
    if (ours) results.oursRssAfterWarmMiB = rssMiB(ours.handle.pid);
    if (HAS_STRACE) {
      // One more warm grep -r per filesystem, traced: the FUSE requests it costs.
      results.fuseOps = {};
      const traced = [['ours', ours], ['oursFn', oursFn], ...mounted.filter((m) => m.key.startsWith('ceiling')).map((m) => [m.key, m])];
      for (const [key, m] of traced) {
        if (!m?.handle?.pid) continue;
        try {
          results.fuseOps[key] = await countFuseOps(m.handle.pid, grepCommand(m.mnt), join(runDir, `strace-${key}.txt`));
          log(`FUSE requests per warm grep -r, ${key}: ${results.fuseOps[key].total} ${JSON.stringify(results.fuseOps[key].byOp)}`);
        } catch (err) { fail(`fuse ops ${key}`, err); }
      }
      // And per warm command of the battery, on ours and the two ceilings: the totals the ratios rest on.
      results.fuseOpsByCommand = {};
      for (const [key, m] of traced.filter(([k]) => k === 'ours' || k === 'ceilingC' || k === 'ceiling')) {
        if (!m?.handle?.pid) continue;
        const byCmd = (results.fuseOpsByCommand[key] = {});
        for (const c of battery(m.mnt)) {
          try {
            byCmd[c.id] = await countFuseOps(m.handle.pid, c.cmd, join(runDir, `strace-${key}-${c.id}.txt`));
          } catch (err) { fail(`fuse ops ${key} ${c.id}`, err); }
        }
        log(`FUSE requests per warm command, ${key}: ${Object.entries(byCmd).map(([id, o]) => `${id} ${o.total}`).join(', ')}`);
      }
    } else results.notes.push('strace is not installed: FUSE request counts not measured');

    if (canDrop) results.disk = { cold: { grep: c.disk?.grep }, warm: w.disk };
    else if (want('disk')) results.disk = { cold: null, warm: w.disk };
    if (want('ceiling')) {
      results.ceilingC = { ready: c.ceilingC?.ready, cold: { grep: c.ceilingC?.grep }, warm: w.ceilingC };
      results.ceiling = { ready: c.ceiling?.ready, cold: { grep: c.ceiling?.grep }, warm: w.ceiling };
      results.ceilingOurPolicy = { warm: w.ceilingOurPolicy };
    }
    if (server) {
      results.ours = {
        ready: c.oursOn?.ready, readyPrefetchOff: c.oursOff?.ready, readyBreakdown: breakdownSummary(parts),
        coldOn: { grep: c.oursOn?.grep }, coldOff: { grep: c.oursOff?.grep },
        rssNoContentMiB: c.oursOff?.rssAtReady ? summarize(c.oursOff.rssAtReady) : null,
        warm: w.ours, grantTtl0: w.oursTtl0,
      };
      results.oursFuseNative = { ready: c.oursFnOn?.ready, coldOn: { grep: c.oursFnOn?.grep }, warm: w.oursFn };
    }
    if (http) results.rclone = { ready: c.rclone?.ready, cold: { grep: c.rclone?.grep }, warm: w.rclone, version: (await run('rclone version | head -1')).stdout.trim() };
  } finally {
    for (const s of stops.reverse()) await s().catch(() => {});
  }
}

async function main() {
  await baselines().catch((err) => fail('baseline', err));

  let server = null;
  let tokenFile = null;
  if (want('ours') || want('read') || want('load')) {
    try {
      log(`control plane [${elapsed()}]`);
      server = await startServer(dataDir, join(runDir, 'cp-main'));
      tokenFile = writeToken(runDir, 'bench', (await createSession(server, { kind: 'personal', creator: 'bench' })).token);
    } catch (err) { fail('control plane', err); }
  }
  let http = null;
  if (want('rclone')) http = await startStaticServer(viewDir).catch((err) => { fail('static server', err); return null; });

  if (want('disk') || want('ceiling') || want('ours') || want('rclone')) {
    try {
      await sideBySide(want('ours') ? server : null, tokenFile, http);
    } catch (err) { fail('side by side', err); }
  }
  if (http) await stop(http.handle);

  if (server && want('read')) {
    try {
      log(`read tool [${elapsed()}]`);
      results.readTool = await readToolLatency(server, join(runDir, 'read'), {
        viewDir, team: corpus.teams[0], extraTeams: corpus.extraTeams, mountedSamples: opts.quick ? 50 : 200,
      });
    } catch (err) { fail('read', err); }
  }
  if (server && want('load')) {
    try {
      log(`control plane load, ${opts.runners} runners [${elapsed()}]`);
      results.load = await controlPlaneLoad(server, { teams: corpus.teams, runners: opts.runners, planRounds: 2, revalidateRounds: opts.quick ? 5 : 10, grantRounds: opts.quick ? 5 : 10 });
      results.load.serverRssMiB = rssMiB(server.handle.pid);
      results.load.serverIdleCpuMsPerS = round3(await idleCpuMsPerS(server.handle.pid));
      log(`control plane idle CPU: ${results.load.serverIdleCpuMsPerS.toFixed(0)} ms per second`);
    } catch (err) { fail('load', err); }
  }
  if (server) await stop(server.handle);

  if (want('scaleout')) {
    try {
      log(`scale-out: 1 and 3 replicas, ${opts.scaleOutRunners} runners [${elapsed()}]`);
      results.scaleOut = await scaleOut({ dataDir, teams: corpus.teams, runners: opts.scaleOutRunners, workDir: join(runDir, 'scale-out'), quick: opts.quick });
    } catch (err) { fail('scaleout', err); }
  }
  if (want('storm')) {
    // Cold start at fleet scale: --storm-mounts mounts (personal sessions, everything prefetched) at once, first on one
    // control plane (with the same mounts, prefetch off, as the baseline in the same run), then on 2 replicas over a bucket.
    results.storm = {};
    const stormArgs = ['--prefetch-threshold', '1GiB'];
    try {
      log(`storm: ${opts.stormMounts} mounts on one control plane, prefetch off (baseline) [${elapsed()}]`);
      const server = await startServer(dataDir, join(runDir, 'cp-storm'));
      try {
        results.storm.prefetchOff = await prefetchStorm({ servers: [server], runDir: join(runDir, 'storm-off'), mounts: opts.stormMounts, extraArgs: [...stormArgs, '--prefetch-content', 'off'] });
        log(`storm: ${opts.stormMounts} mounts on one control plane, prefetch on [${elapsed()}]`);
        results.storm.oneServer = await prefetchStorm({ servers: [server], runDir: join(runDir, 'storm-on'), mounts: opts.stormMounts, extraArgs: stormArgs });
      } finally {
        await stop(server.handle);
      }
      log(`storm: ${opts.stormMounts} mounts on 2 replicas over a bucket [${elapsed()}]`);
      results.storm.bucket = await bucketStorm({ dataDir, runDir, mounts: opts.stormMounts, replicas: 2, extraArgs: stormArgs });
    } catch (err) { fail('storm', err); }
  }
  if (want('scale')) {
    results.scale = [];
    for (const files of opts.scaleFiles) {
      log(`scale: ${files} files [${elapsed()}]`);
      try {
        results.scale.push(await measureScale(files, { runs: opts.runs, work: opts.work, runDir, main: corpus }));
      } catch (err) {
        fail(`scale ${files}`, err);
        results.scale.push({ files, error: err instanceof Error ? err.message : String(err) });
      }
    }
  }
  if (want('store')) {
    log(`object storage: publish and replicas [${elapsed()}]`);
    try {
      results.store = await measureStore({ dataDir, files: corpus.materialisedFiles, runs: Math.min(opts.runs, 3), runDir });
      for (const e of results.store.errors ?? []) results.errors.push(`store: ${e}`);
    } catch (err) {
      fail('store', err);
      results.store = { error: err instanceof Error ? err.message : String(err) };
    }
  }
}

let exitCode = 0;
try {
  await main();
} catch (err) {
  fail('bench', err);
} finally {
  await cleanup();
}
results.errors.push(...consistencyErrors(results));
const codeAtEnd = await codeVersion();
if (codeAtEnd.distBuiltAt !== results.code.distBuiltAt) results.notes.push(`dist/ was rebuilt during the run (${results.code.distBuiltAt} → ${codeAtEnd.distBuiltAt}): later mounts ran newer code`);
results.targets = checkTargets(results);
if (corpus.materialisedFiles !== 6003) results.notes.push(`the targets are set for 6 003 files; this run's corpus has ${corpus.materialisedFiles}, so its verdicts only indicate`);
results.host.loadAvgAtEnd = os.loadavg().map(round3);
results.finishedAt = new Date().toISOString();
results.durationS = round3((Date.now() - t0) / 1000);
const resultsDir = join(REPO, 'bench', 'results');
mkdirSync(resultsDir, { recursive: true });
const outFile = join(resultsDir, `${results.startedAt.replace(/[:.]/g, '-')}.json`);
writeFileSync(outFile, JSON.stringify(results, null, 2) + '\n');

const c = results.corpus;
const load = `load average ${results.host.loadAvgAtStart[0].toFixed(1)} at start, ${results.host.loadAvgAtEnd[0].toFixed(1)} at end`;
process.stdout.write(`\nknowledgefs bench at ${results.code.commit}${results.code.srcDirty ? ' (+ uncommitted src changes)' : ''} — ${c.files} files, ${(c.bytes / 1e6).toFixed(1)} MB (${(c.diskBytes / 1e6).toFixed(1)} MB on disk); median of ${opts.runs} runs${want('rclone') && opts.peerRuns !== opts.runs ? ` (rclone: ${opts.peerRuns})` : ''}; ${results.host.cpus} CPUs, ${load}; ${results.durationS.toFixed(0)} s\n\n`);
const tables = [mainTable(results), opsTable(results), sideTable(results), storeTable(results.store), stormTable(results.storm)].filter((t) => t.includes('\n'));
process.stdout.write(`${[...tables, targetsText(results.targets)].join('\n\n')}\n`);
for (const n of results.notes) process.stdout.write(`note: ${n}\n`);
if (results.errors.length) {
  process.stdout.write(`\nerrors:\n${results.errors.map((e) => `  - ${e}`).join('\n')}\n`);
  exitCode = 1;
}
process.stdout.write(`\nresults: ${outFile}\n`);
process.exit(exitCode);
