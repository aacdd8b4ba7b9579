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

import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, createSession, writeToken, startMount, stopMount, socketClient, socketJson, waitPrefetch } from './knowledgefs.mjs';
import { startPostgres } from './postgres.mjs';
import { run, log, start, stop } from './proc.mjs';
import { startS3, envFor, BUCKET, publishCmd } from './store.mjs';
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
  // Mount i lists the replicas starting from replica i mod R (it sticks to the first that answers): the fleet spreads over them.
  const serverList = (i) => servers.map((_, k) => servers[(i + k) % servers.length].url).join(',');
  const tokens = [];
  for (let i = 0; i < mounts; i++) {
    const s = await createSession(servers[0], { kind: 'personal', creator });
    tokens.push(writeToken(runDir, `storm-${i}`, s.token));
  }
  const before = bucketGets ? await bucketGets() : null;
  const t0 = performance.now();
  const started = await Promise.allSettled(tokens.map((tokenFile, i) => startMount({ url: serverList(i) }, tokenFile, runDir, { timeoutMs: 120_000, extraArgs })));
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
      // Per distinct blob the mounts read (each file of the session once), per replica that served any: the goal is 1.0.
      bucket: before && after ? bucketCount(before, after, walk?.lat.length ?? 0) : null,
    };
    log(`storm ${mounts} mounts × ${servers.length} server(s): ready p50 ${result.ready.p50.toFixed(0)} ms, p99 ${result.ready.p99.toFixed(0)} ms; ` +
      (walk ? `walk ${walk.lat.length} files in ${walk.ms.toFixed(0)} ms, open p50 ${result.walk.open.p50.toFixed(1)} / p99 ${result.walk.open.p99.toFixed(1)} / max ${result.walk.open.max.toFixed(0)} ms, EIO ${walk.eio}; ` : '') +
      `prefetch all done at ${prefetchAllMs.toFixed(0)} ms; daemon EIO ${result.daemonEio}` + (result.bucket ? `; bucket GETs per replica ${result.bucket.perReplica.join(' / ')} for ${result.bucket.blobs} blobs: ${result.bucket.getsPerBlobPerReplica} per blob per replica` : '') + (failed.length ? `; ${failed.length} failed: ${failed[0]}` : ''));
    return result;
  } finally {
    await Promise.all(started.filter((s) => s.status === 'fulfilled').map((s) => stopMount(s.value)));
  }
}

// ---- the same storm through 2 replicas on a bucket -------------------------

function bucketCount(before, after, blobs) {
  const perReplica = after.perReplica.map((n, i) => n - before.perReplica[i]);
  const serving = perReplica.filter((n) => n > 0);
  const total = perReplica.reduce((a, b) => a + b, 0);
  return { perReplica, gets: total, blobs, getsPerBlobPerReplica: round3(total / Math.max(1, blobs) / Math.max(1, serving.length)) };
}

/** GETs every replica made to object storage so far (publication polls included: --publication-poll is 1 h here). */
async function objectGets(replicas, adminToken) {
  const perReplica = [];
  for (const r of replicas) {
    const res = await fetch(`${r.url}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } });
    const text = await res.text();
    let n = 0;
    for (const m of text.matchAll(/^knowledgefs_object_store_requests_total\{[^}]*op="get"[^}]*\} (\d+(?:\.\d+)?)/gm)) n += Number(m[1]);
    perReplica.push(n);
  }
  return perReplica;
}

/**
 * `replicas` replicas of `serve --store` over one s3rver bucket (the corpus
 * published into it) and one PostgreSQL, then `prefetchStorm` across them
 * (every mount gets every replica in --server). Bucket GETs per distinct blob
 * are counted from the replicas' own metrics.
 */
export async function bucketStorm({ dataDir, runDir, mounts, replicas = 2, extraArgs = [] }) {
  const work = join(runDir, 'bucket-storm');
  mkdirSync(work, { recursive: true });
  const s3 = await startS3(join(work, 's3'));
  const pg = await startPostgres();
  const env = envFor(s3);
  const handles = [];
  try {
    const pub = await run(publishCmd(dataDir, 'storm'), { env, timeoutMs: 900_000 });
    if (pub.code !== 0) throw new Error(`publish failed: ${pub.stderr.slice(-300)}`);
    const blobs = JSON.parse(pub.stdout).uploaded.blobs;
    const adminToken = randomBytes(24).toString('hex');
    const adminFile = join(work, 'admin-token');
    writeFileSync(adminFile, adminToken, { mode: 0o600 });
    const servers = [];
    for (let i = 0; i < replicas; i++) {
      const h = start(`replica-${i}`, process.execPath, [BIN, 'serve', '--store', `s3://${BUCKET}/storm`, '--listen', '127.0.0.1:0', '--admin-token-file', adminFile,
        '--state', pg.url(), '--audit-log', join(work, `audit-${i}.log`), '--publication-poll', '1h'], { env });
      handles.push(h);
      const m = await h.waitFor(/listening on (http:\/\/[^\s]+)/, 300_000);
      servers.push({ handle: h, url: m[1].replace(/\/$/, ''), adminToken });
    }
    const result = await prefetchStorm({
      servers, runDir: join(work, 'mounts'), mounts, extraArgs,
      bucketGets: async () => ({ perReplica: await objectGets(servers, adminToken) }),
    });
    return { ...result, replicas, publishedBlobs: blobs };
  } finally {
    for (const h of handles) await stop(h);
    pg.stop();
    await stop(s3.handle);
  }
}

/** The section's table: one row per run (prefetch off baseline, one control plane, 2 replicas on a bucket). */
export function stormTable(storm) {
  if (!storm) return '';
  const rows = [['prefetch off, 1 control plane', storm.prefetchOff], ['prefetch on, 1 control plane', storm.oneServer], ['prefetch on, 2 replicas on a bucket', storm.bucket]].filter(([, r]) => r);
  if (rows.length === 0) return '';
  const ms = (x) => (x === null || x === undefined ? '—' : x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(1)} ms`);
  const lines = [`cold start at fleet scale: ${rows[0][1].mounts} mounts at once; an agent's walk over one of them meanwhile`, ''];
  lines.push(['run', 'ready p50', 'ready p99', 'open p50', 'open p99', 'open max', 'EIO (walk/daemons)', 'all prefetched', 'bucket GETs per blob'].join(' | '));
  for (const [label, r] of rows) {
    lines.push([label, ms(r.ready.p50), ms(r.ready.p99), ms(r.walk?.open.p50), ms(r.walk?.open.p99), ms(r.walk?.open.max), `${r.walk?.eio ?? '—'}/${r.daemonEio}`,
      ms(r.prefetch.allDoneMs), r.bucket ? `${r.bucket.getsPerBlobPerReplica} per replica (${r.bucket.perReplica.join(' + ')} GETs, ${r.bucket.blobs} blobs)` : '—'].join(' | ') + (r.failed.length ? ` | ${r.failed.length} mounts failed` : ''));
  }
  return lines.join('\n');
}
