#!/usr/bin/env node
// `npm run bench`: our mount side by side with local disk (the limit), an
// in-memory fuse-native filesystem (the binding's ceiling) and rclone over
// HTTP (the peer), on the same generated corpus, in one run. Prints one table
// of medians with ratios, checks the targets of docs/PERFORMANCE.md, writes
// everything (every sample) to bench/results/<timestamp>.json.
//
//   node bench/run.mjs [--quick] [--files N] [--runs N] [--only a,b,…]
//                      [--scale-files N,M] [--work DIR] [--no-drop-caches] [--verbose]
// Sections (--only): disk ceiling ours read load rclone scale.
//
// Cold runs: a fresh mount per run (FUSE page cache and our content caches
// start empty; the control plane and static server stay up, as they would).
// Local disk cold runs drop the page cache (`/proc/sys/vm/drop_caches`,
// root only; skipped with a note otherwise).
//
// Progress goes to stderr; every child process and mount is cleaned up on
// success, failure and Ctrl-C (bench/lib/proc.mjs).

import { mkdirSync, writeFileSync, cpSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import os from 'node:os';
import { generateCorpus, DEFAULTS } from './corpus.mjs';
import { log, setVerbose, installCleanupHandlers, cleanup, run, stop } from './lib/proc.mjs';
import { summarize, round3 } from './lib/stats.mjs';
import { measureWarm, timed, grepCommand } from './lib/commands.mjs';
import { startCeiling, startRclone, startStaticServer, stopPeer } from './lib/peers.mjs';
import { REPO, BIN, startServer, createSession, writeToken, startMount, stopMount, rssMiB, waitPrefetch, idleCpuMsPerS } from './lib/knowledgefs.mjs';
import { readToolLatency } from './lib/read-tool.mjs';
import { controlPlaneLoad } from './lib/load.mjs';
import { mainTable, sideTable, checkTargets, targetsText, consistencyErrors } from './lib/report.mjs';

const SECTIONS = ['disk', 'ceiling', 'ours', 'read', 'load', 'rclone', 'scale'];

function parseArgs(argv) {
  const o = { quick: false, files: DEFAULTS.files, runs: 5, only: SECTIONS, work: join(os.tmpdir(), 'knowledgefs-bench'), dropCaches: true, verbose: false, scaleFiles: null, runners: 200 };
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
    else if (a === '--only') o.only = val().split(',');
    else if (a === '--scale-files') o.scaleFiles = val().split(',').map(Number);
    else if (a === '--runners') o.runners = Number(val());
    else if (a === '--work') o.work = val();
    else if (a === '--no-drop-caches') o.dropCaches = false;
    else if (a === '--verbose') o.verbose = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(readFileSync(new URL(import.meta.url), 'utf8').split('\n').filter((l) => l.startsWith('//')).map((l) => l.slice(3)).join('\n') + '\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a} (see --help)`);
  }
  for (const s of o.only) if (!SECTIONS.includes(s)) throw new Error(`unknown section ${s} (sections: ${SECTIONS.join(' ')})`);
  if (o.quick) {
    if (!argv.includes('--files')) o.files = 603;
    if (!argv.includes('--runs')) o.runs = 3;
    if (!argv.includes('--runners')) o.runners = 50;
  }
  o.scaleFiles ??= o.quick ? [o.files, 10_003] : [6003, 100_000];
  if (!Number.isInteger(o.files) || o.files < 10) throw new Error('--files must be an integer ≥ 10');
  if (!Number.isInteger(o.runs) || o.runs < 1) throw new Error('--runs must be an integer ≥ 1');
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
};
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
const corpus = generateCorpus(dataDir, { files: opts.files, extraTeams });
results.corpus = { files: corpus.materialisedFiles, bytes: corpus.bytes, diskBytes: corpus.diskBytes, teams: corpus.teams, dataDir };
const viewDir = join(opts.work, `view-${corpus.key}`);
const viewDone = `${viewDir}.done`;
if (!existsSync(viewDone)) {
  rmSync(viewDir, { recursive: true, force: true });
  cpSync(join(dataDir, 'account'), join(viewDir, 'account'), { recursive: true, preserveTimestamps: true });
  for (const t of corpus.teams) cpSync(join(dataDir, 'teams', t), join(viewDir, `team_${t}`), { recursive: true, preserveTimestamps: true });
  writeFileSync(viewDone, '');
}
const runDir = join(opts.work, `run-${process.pid}`);
mkdirSync(runDir, { recursive: true });
log(`corpus ready: ${corpus.materialisedFiles} files, ${(corpus.bytes / 1e6).toFixed(1)} MB (${(corpus.diskBytes / 1e6).toFixed(1)} MB on disk) [${elapsed()}]`);

/** A fresh filesystem per run: ready time, then the first grep -r. Returns the last one still mounted. */
async function coldGrep(label, startFs, stopFs, onMounted) {
  const ready = [];
  const grep = [];
  let output = null;
  let fs = null;
  for (let i = 0; i < opts.runs; i++) {
    if (fs) await stopFs(fs);
    fs = await startFs();
    try {
      ready.push(fs.readyMs);
      if (onMounted) await onMounted(fs, i);
      const r = await timed(grepCommand(fs.mnt));
      if (output !== null && r.output !== output) throw new Error(`${label}: cold grep output changed (${output} → ${r.output})`);
      output = r.output;
      grep.push(r.ms);
      log(`${label} cold run ${i + 1}/${opts.runs}: ready ${(fs.readyMs / 1000).toFixed(3)} s, first grep -r ${(r.ms / 1000).toFixed(3)} s`);
    } catch (err) {
      await stopFs(fs);
      throw err;
    }
  }
  return { ready: summarize(ready), grep: { output, ...summarize(grep) }, last: fs };
}

async function main() {
  // ---- baselines: what any Node process pays before our code runs ---------
  try {
    const node = [];
    const cli = [];
    for (let i = 0; i < opts.runs; i++) {
      node.push((await timed(`${process.execPath} -e 0`)).ms);
      cli.push((await timed(`${process.execPath} ${BIN} --version`)).ms);
    }
    results.baseline = { nodeStartMs: summarize(node), cliStartMs: summarize(cli) };
    log(`baseline: node -e 0 ${results.baseline.nodeStartMs.median.toFixed(0)} ms, knowledgefs --version ${results.baseline.cliStartMs.median.toFixed(0)} ms`);
  } catch (err) { fail('baseline', err); }

  // ---- local disk: the limit --------------------------------------------
  if (want('disk')) {
    try {
      log(`disk [${elapsed()}]`);
      const warm = await measureWarm('disk', viewDir, opts.runs);
      let cold = null;
      const canDrop = opts.dropCaches && (await run('echo 3 > /proc/sys/vm/drop_caches')).code === 0;
      if (canDrop) {
        const samples = [];
        for (let i = 0; i < opts.runs; i++) {
          await run('sync; echo 3 > /proc/sys/vm/drop_caches');
          samples.push((await timed(grepCommand(viewDir))).ms);
        }
        cold = { grep: summarize(samples) };
      } else {
        results.notes = [...(results.notes ?? []), 'disk cold runs skipped: cannot write /proc/sys/vm/drop_caches'];
      }
      results.disk = { warm, cold };
    } catch (err) { fail('disk', err); }
  }

  // ---- in-memory fuse-native: the ceiling -------------------------------
  if (want('ceiling')) {
    log(`ceiling [${elapsed()}]`);
    let last = null;
    try {
      const cold = await coldGrep('ceiling', () => startCeiling(viewDir, runDir), stopPeer);
      last = cold.last;
      const warm = await measureWarm('ceiling', last.mnt, opts.runs, undefined, ['grep', 'rg']);
      results.ceiling = { ready: cold.ready, cold: { grep: cold.grep }, warm };
      await stopPeer(last);
      last = null;
      // Diagnostic: the same in-memory filesystem under our kernel cache policy.
      last = await startCeiling(viewDir, runDir, 'ours');
      results.ceilingOurPolicy = { warm: await measureWarm('ceiling (our cache policy)', last.mnt, opts.runs, [{ id: 'grep', label: 'grep -r (warm)', cmd: grepCommand(last.mnt) }]) };
    } catch (err) { fail('ceiling', err); } finally { if (last) await stopPeer(last); }
  }

  // ---- ours -------------------------------------------------------------
  let server = null;
  if (want('ours') || want('read') || want('load')) {
    try {
      log(`control plane [${elapsed()}]`);
      server = await startServer(dataDir, join(runDir, 'cp-main'));
    } catch (err) { fail('ours (control plane did not start)', err); }
  }
  if (server && want('ours')) {
    const session = await createSession(server, { kind: 'personal', creator: 'bench' }).catch((err) => { fail('ours (session)', err); return null; });
    if (session) {
      const tokenFile = writeToken(runDir, 'bench', session.token);
      const mountWith = (o) => () => startMount(server, tokenFile, runDir, o);
      const ours = {};
      results.ours = ours;
      let last = null;
      try {
        log(`ours, prefetch off [${elapsed()}]`);
        const rss = [];
        const off = await coldGrep('ours (prefetch off)', mountWith({ prefetch: 'off' }), stopMount, (m) => {
          if (m.files !== corpus.materialisedFiles) throw new Error(`mount shows ${m.files} files, corpus has ${corpus.materialisedFiles}`);
          rss.push(rssMiB(m.handle.pid).rss);
        });
        await stopMount(off.last);
        ours.readyPrefetchOff = off.ready;
        ours.coldOff = { grep: off.grep };
        ours.rssNoContentMiB = summarize(rss);

        log(`ours, prefetch on [${elapsed()}]`);
        const on = await coldGrep('ours (prefetch on)', mountWith({ prefetch: 'on' }), stopMount);
        last = on.last;
        ours.ready = on.ready;
        ours.coldOn = { grep: on.grep };
        const prefetch = await waitPrefetch(last.socket, 120_000);
        ours.warm = await measureWarm('ours', last.mnt, opts.runs);
        ours.rssAfterWarmMiB = rssMiB(last.handle.pid);
        ours.prefetchAtWarm = prefetch;
        await stopMount(last);
        last = null;

        log(`ours, --grant-ttl 0 [${elapsed()}]`);
        last = await mountWith({ prefetch: 'on', grantTtl: '0' })();
        await waitPrefetch(last.socket, 120_000);
        const ttl0 = await measureWarm('ours --grant-ttl 0', last.mnt, opts.runs, [{ id: 'grep', label: 'grep -r (warm, --grant-ttl 0)', cmd: grepCommand(last.mnt) }]);
        ours.grantTtl0 = ttl0;
      } catch (err) { fail('ours', err); } finally { if (last) await stopMount(last); }
    }
  }
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

  // ---- rclone: the peer -------------------------------------------------
  if (want('rclone')) {
    log(`rclone [${elapsed()}]`);
    let http = null;
    let last = null;
    try {
      http = await startStaticServer(viewDir);
      const cold = await coldGrep('rclone', () => startRclone(http.url, runDir), stopPeer);
      last = cold.last;
      const warm = await measureWarm('rclone', last.mnt, opts.runs, undefined, ['grep', 'rg']);
      results.rclone = { ready: cold.ready, cold: { grep: cold.grep }, warm, version: (await run('rclone version | head -1')).stdout.trim() };
    } catch (err) { fail('rclone', err); } finally {
      if (last) await stopPeer(last);
      if (http) await stop(http.handle);
    }
  }

  // ---- daemon at scale: ready time and RSS without content ---------------
  if (want('scale')) {
    results.scale = [];
    for (const files of opts.scaleFiles) {
      log(`scale: ${files} files [${elapsed()}]`);
      let srv = null;
      try {
        // Metadata is all that matters here (no content is fetched), so
        // files other than the main corpus are small to keep generation and
        // the control plane's start-up scan short.
        const sameAsMain = files === opts.files;
        const dir = sameAsMain ? dataDir : join(opts.work, `data-scale-${files}`);
        const c = sameAsMain ? corpus : generateCorpus(dir, { files, extraTeams: 0, minSize: 200, maxSize: 1000 });
        srv = await startServer(dir, join(runDir, `cp-scale-${files}`), { timeoutMs: 600_000 });
        const s = await createSession(srv, { kind: 'personal', creator: 'bench' });
        const tokenFile = writeToken(runDir, `scale-${files}`, s.token);
        const serverIdleCpuMsPerS = round3(await idleCpuMsPerS(srv.handle.pid));
        const ready = [];
        const rss = [];
        const settled = [];
        const hwm = [];
        for (let i = 0; i < opts.runs; i++) {
          const m = await startMount(srv, tokenFile, runDir, { prefetch: 'off', timeoutMs: 600_000 });
          try {
            if (m.files !== c.materialisedFiles) throw new Error(`mount shows ${m.files} files, corpus has ${c.materialisedFiles}`);
            ready.push(m.readyMs);
            rss.push(rssMiB(m.handle.pid).rss);
            // The same process a few seconds later, once start-up garbage is collected.
            await new Promise((r) => setTimeout(r, 3000));
            const after = rssMiB(m.handle.pid);
            settled.push(after.rss);
            hwm.push(after.hwm);
          } finally { await stopMount(m); }
        }
        const entry = { files: c.materialisedFiles, bytes: c.bytes, ready: summarize(ready), rss: summarize(rss), rssSettled: summarize(settled), rssPeak: summarize(hwm), serverIdleCpuMsPerS };
        results.scale.push(entry);
        log(`scale ${entry.files}: ready ${(entry.ready.median / 1000).toFixed(3)} s, VmRSS ${entry.rss.median.toFixed(1)} MiB at ready, ${entry.rssSettled.median.toFixed(1)} MiB 3 s later (peak ${entry.rssPeak.median.toFixed(1)}); control plane idle CPU ${serverIdleCpuMsPerS.toFixed(0)} ms/s`);
      } catch (err) {
        fail(`scale ${files}`, err);
        results.scale.push({ files, error: err instanceof Error ? err.message : String(err) });
      } finally { if (srv) await stop(srv.handle); }
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
  rmSync(runDir, { recursive: true, force: true });
}
results.errors.push(...consistencyErrors(results));
results.targets = checkTargets(results);
results.finishedAt = new Date().toISOString();
results.durationS = round3((Date.now() - t0) / 1000);
const resultsDir = join(REPO, 'bench', 'results');
mkdirSync(resultsDir, { recursive: true });
const outFile = join(resultsDir, `${results.startedAt.replace(/[:.]/g, '-')}.json`);
writeFileSync(outFile, JSON.stringify(results, null, 2) + '\n');

const c = results.corpus;
process.stdout.write(`\nknowledgefs bench — ${c.files} files, ${(c.bytes / 1e6).toFixed(1)} MB (${(c.diskBytes / 1e6).toFixed(1)} MB on disk); median of ${opts.runs} runs; ${results.host.cpus} CPUs; ${results.durationS.toFixed(0)} s\n\n`);
const tables = [mainTable(results), sideTable(results)].filter((t) => t.includes('\n'));
process.stdout.write(`${[...tables, targetsText(results.targets)].join('\n\n')}\n`);
if (results.errors.length) {
  process.stdout.write(`\nerrors:\n${results.errors.map((e) => `  - ${e}`).join('\n')}\n`);
  exitCode = 1;
}
process.stdout.write(`\nresults: ${outFile}\n`);
process.exit(exitCode);
