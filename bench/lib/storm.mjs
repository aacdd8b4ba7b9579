// Cold start at fleet scale: N mounts (personal sessions, everything
// materialised, content prefetch on) started at once against the same
// control plane(s), then an agent's first command on one of them while the N
// prefetches still run.
//
// Reported: ready time of the N mounts (p50, p99, max), the latency of every
// open+read of the agent's walk over its mount during the storm (p50, p99,
// max), the EIO count of that walk (and of every daemon's `status`), how
// long the prefetches took, and, with a bucket, how many GETs the bucket saw
// per distinct blob (the goal: one per replica).
//
// The walk is a child node process reading every file of the mount, one
// after another, like `grep -r`; each file is opened, read whole and closed,
// and timed. EIO is counted, not fatal.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSession, writeToken, startMount, stopMount, socketClient, socketJson, waitPrefetch } from './knowledgefs.mjs';
import { run, log } from './proc.mjs';
import { latencySummary, percentile, round3 } from './stats.mjs';

/** The agent's first command: every file read once, each open+read timed (ms); EIO counted. */
const WALK = `
const { readdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const lat = []; let eio = 0; const eioPaths = [];
const walk = (dir) => {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) { walk(p); continue; }
    const t = process.hrtime.bigint();
    try { readFileSync(p); } catch (err) { if (err.code === 'EIO') { eio++; eioPaths.push(p); } else throw err; }
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
};
const t0 = process.hrtime.bigint();
walk(process.argv[1]);
process.stdout.write(JSON.stringify({ lat, eio, eioPaths: eioPaths.slice(0, 10), ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
`;

export async function walkMount(mnt) {
  const r = await run(`node -e '${WALK.replace(/'/g, "'\\''")}' '${mnt}'`, { timeoutMs: 600_000 });
  if (r.code !== 0) throw new Error(`walk failed (${r.code}): ${r.stderr.slice(0, 300)}`);
  return JSON.parse(r.stdout);
}

async function daemonEio(socket) {
  const client = socketClient(socket);
  try {
    const { json } = await socketJson(client, 'GET', '/status');
    return { eio: json?.activity?.eio ?? null, fetches: json?.activity?.fetches ?? null };
  } finally {
    await client.close();
  }
}

/**
 * `servers`: [{url, adminToken}] (replicas of one deployment; sessions are
 * made on the first). `bucketGets`: optional () => Promise<{gets, blobs}>.
 */
export async function prefetchStorm({ servers, runDir, mounts = 20, creator = 'bench', extraArgs = [], bucketGets }) {
  mkdirSync(runDir, { recursive: true });
  const serverUrl = servers.map((s) => s.url).join(',');
  const tokens = [];
  for (let i = 0; i < mounts; i++) {
    const s = await createSession(servers[0], { kind: 'personal', creator });
    tokens.push(writeToken(runDir, `storm-${i}`, s.token));
  }
  const before = bucketGets ? await bucketGets() : null;
  const t0 = performance.now();
  const started = await Promise.allSettled(tokens.map((tokenFile) => startMount({ url: serverUrl }, tokenFile, runDir, { timeoutMs: 120_000, extraArgs })));
  const ms = [];
  try {
    const up = started.filter((s) => s.status === 'fulfilled').map((s) => s.value);
    const failed = started.filter((s) => s.status === 'rejected').map((s) => String(s.reason?.message ?? s.reason).slice(0, 200));
    for (const m of up) ms.push(m.readyMs);
    const readyAll = performance.now() - t0;
    // The agent's first command, on the mount that was ready last, while the prefetches run.
    const agent = up.reduce((a, b) => (b.readyMs > a.readyMs ? b : a), up[0]);
    const walk = agent === undefined ? null : await walkMount(agent.mnt);
    const walkDoneMs = performance.now() - t0;
    const prefetched = await Promise.all(up.map((m) => waitPrefetch(m.socket, 300_000)));
    const prefetchAllMs = performance.now() - t0;
    const statuses = await Promise.all(up.map((m) => daemonEio(m.socket)));
    const after = bucketGets ? await bucketGets() : null;
    const result = {
      mounts, servers: servers.length, failed,
      ready: { p50: round3(percentile(ms, 50)), p99: round3(percentile(ms, 99)), max: round3(Math.max(...ms)), allMs: round3(readyAll) },
      walk: walk === null ? null : { files: walk.lat.length, ms: round3(walk.ms), open: latencySummary(walk.lat), eio: walk.eio, eioPaths: walk.eioPaths, doneAtMs: round3(walkDoneMs) },
      prefetch: { allDoneMs: round3(prefetchAllMs), incomplete: prefetched.filter((p) => p === null || p.done < p.total).length },
      daemonEio: statuses.reduce((n, s) => n + (s.eio ?? 0), 0),
      fileFetches: statuses.reduce((n, s) => n + (s.fetches?.files ?? 0), 0),
      bucket: before && after ? { gets: after.gets - before.gets, blobs: after.blobs, getsPerBlob: round3((after.gets - before.gets) / Math.max(1, after.blobs)) } : null,
    };
    log(`storm ${mounts} mounts × ${servers.length} server(s): ready p50 ${result.ready.p50.toFixed(0)} ms, p99 ${result.ready.p99.toFixed(0)} ms; ` +
      (walk ? `walk ${walk.lat.length} files in ${walk.ms.toFixed(0)} ms, open p50 ${result.walk.open.p50.toFixed(1)} / p99 ${result.walk.open.p99.toFixed(1)} / max ${result.walk.open.max.toFixed(0)} ms, EIO ${walk.eio}; ` : '') +
      `prefetch all done at ${prefetchAllMs.toFixed(0)} ms; daemon EIO ${result.daemonEio}` + (result.bucket ? `; bucket GETs ${result.bucket.gets} for ${result.bucket.blobs} blobs` : '') + (failed.length ? `; ${failed.length} failed: ${failed[0]}` : ''));
    return result;
  } finally {
    await Promise.all(started.filter((s) => s.status === 'fulfilled').map((s) => stopMount(s.value)));
  }
}

export function writeStormJson(file, result) {
  writeFileSync(file, JSON.stringify(result, null, 2));
}
