// Read-tool latency, measured where the agent harness calls it: a POST /read
// on the daemon's control socket (the `knowledgefs read` CLI adds a Node
// start on top; a few CLI runs are timed separately for reference).
//
// The session is `reader`'s personal session bound to the first main team
// with a 1-byte threshold, so only account + that team are materialised:
//   mounted   — files of the bound team (in the tree; each read still asks
//               the control plane for a fresh decision), measured twice:
//               first reads (a path not yet in the session's read set) and
//               re-reads (same path, same sha256), interleaved one of each so
//               load on the machine hits both alike;
//   unmounted — each extra team's DUTY.md, once per team (not in the tree:
//               the control plane decides, serves, records the mount, and the
//               daemon adds the team). One sample per team, so p99 over 100
//               samples is close to the worst one.

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createSession, writeToken, startMount, stopMount, socketClient, socketJson, waitPrefetch, BIN } from './knowledgefs.mjs';
import { latencySummary, summarize } from './stats.mjs';
import { log, run } from './proc.mjs';

function listFiles(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath ?? e.path, e.name));
  }
  return out.sort();
}

async function timedRead(client, body) {
  const t0 = process.hrtime.bigint();
  const { status, json } = await socketJson(client, 'POST', '/read', body);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (status !== 200 || json?.ok !== true) throw new Error(`read ${body.path} → ${status} ${JSON.stringify(json).slice(0, 200)}`);
  return { ms, json };
}

export async function readToolLatency(server, workDir, { viewDir, team, extraTeams, mountedSamples = 200, cliRuns = 5 }) {
  const session = await createSession(server, { kind: 'personal', creator: 'reader', team });
  const tokenFile = writeToken(workDir, 'reader', session.token);
  const mount = await startMount(server, tokenFile, workDir, { threshold: '1', prefetch: 'on' });
  const client = socketClient(mount.socket);
  try {
    await waitPrefetch(mount.socket, 120_000);
    const teamDir = join(viewDir, `team_${team}`);
    const WARMUP = 10;
    const files = listFiles(teamDir).slice(0, WARMUP + mountedSamples);
    if (files.length < WARMUP + 2) throw new Error(`team_${team} has ${files.length} files; the read bench needs at least ${WARMUP + 2}`);
    const paths = files.map((f) => `knowledge/team_${team}/${relative(teamDir, f)}`);
    const read = (i) => timedRead(client, { path: paths[i], cwd: mount.base });

    // Correctness first: the bytes the tool returns are the file's.
    const first = await read(0);
    if (first.json.content !== readFileSync(files[0], 'utf8')) throw new Error(`read tool returned other bytes for ${paths[0]}`);
    for (let i = 0; i < WARMUP; i++) await read(i);
    for (let i = 0; i < WARMUP; i++) await read(i);

    // Path i is read for the first time, then an earlier path is read again.
    const firstReads = [];
    const rereads = [];
    for (let i = WARMUP; i < files.length; i++) {
      firstReads.push((await read(i)).ms);
      rereads.push((await read(i - 1 - ((i * 7) % WARMUP))).ms);
    }

    const unmounted = [];
    for (const x of extraTeams) {
      const r = await timedRead(client, { path: `knowledge/team_${x}/DUTY.md`, cwd: mount.base });
      unmounted.push(r.ms);
    }

    const cli = [];
    for (let i = 0; i < cliRuns; i++) {
      const r = await run(`${process.execPath} ${BIN} read ${paths[i % paths.length]} --socket '${mount.socket}' > /dev/null`, { cwd: mount.base });
      if (r.code !== 0) throw new Error(`knowledgefs read exited ${r.code}: ${r.stderr.slice(0, 200)}`);
      cli.push(r.ms);
    }

    const result = {
      mountedFirstRead: latencySummary(firstReads),
      mountedReread: latencySummary(rereads),
      unmounted: latencySummary(unmounted),
      cliEndToEndMs: summarize(cli),
    };
    const pair = (s) => `p50 ${s.p50} ms p99 ${s.p99} ms`;
    log(`read tool: mounted first read ${pair(result.mountedFirstRead)}; re-read ${pair(result.mountedReread)}; unmounted ${pair(result.unmounted)}; CLI median ${result.cliEndToEndMs.median?.toFixed(1)} ms`);
    return result;
  } finally {
    await client.close().catch(() => {});
    await stopMount(mount);
  }
}
