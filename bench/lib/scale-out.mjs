// Scale-out: the control plane as 1 and as 3 replicas sharing session state
// in a real PostgreSQL (durable settings), N simulated runners (each its own
// team session and keep-alive connection, spread over the replicas), every
// runner going at once in each phase:
//   plan-304  — GET /v1/plan with If-None-Match (the steady-state sync check)
//   grant     — GET /v1/grants/<scope> (an open once the grant cache expired)
//   file      — GET /v1/files/<scope>/<path> (an open's bytes)
//   read      — POST /v1/read of a file not read before (the read tool: a write)
// Per phase: throughput, p50/p99, CPU per request of the replicas and of
// PostgreSQL (/proc), and PostgreSQL round trips per request (the replicas'
// knowledgefs_state_round_trips_total, scraped before and after).
// Then, with 3 replicas, a replica's death: every runner asks for grants
// through the daemon's own client given all three URLs (its replica first)
// while one replica is killed with SIGKILL; failed operations and latency
// against the same phase without a death.

import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from 'undici';
import pg from 'pg';
import { BIN, cpuMs } from './knowledgefs.mjs';
import { startPostgres, clusterCpuMs } from './postgres.mjs';
import { phase as loadPhase } from './load.mjs';
import { round3 } from './stats.mjs';
import { log, start, stop } from './proc.mjs';

const { HttpControlClient } = await import('../../dist/daemon/control-plane/control-client.js');

function teamFiles(dataDir, team, max) {
  const root = join(dataDir, 'teams', team);
  const out = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      if (out.length >= max) return;
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(root, p));
    }
  };
  walk(root);
  return out;
}

async function startReplica(i, dataDir, workDir, adminFile, stateUrl) {
  const handle = start(`replica-${i}`, process.execPath, [BIN, 'serve', '--data', dataDir, '--listen', '127.0.0.1:0', '--admin-token-file', adminFile,
    '--state', stateUrl, '--audit-log', join(workDir, `audit-${i}.log`), '--watch', 'off', '--scan-interval', '30s']);
  const m = await handle.waitFor(/listening on (http:\/\/[^\s]+)/, 120_000);
  return { handle, url: m[1].replace(/\/$/, '') };
}

async function roundTrips(replicas, adminToken) {
  let total = 0;
  for (const r of replicas) {
    if (!r.handle.alive) continue;
    const res = await fetch(`${r.url}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } });
    const m = /^knowledgefs_state_round_trips_total (\d+(?:\.\d+)?)/m.exec(await res.text());
    total += Number(m?.[1] ?? 0);
  }
  return total;
}

/** load.mjs's phase, with the CPU of the replicas and of PostgreSQL and the round trips it cost. */
async function phase(name, runners, rounds, request, ctx) {
  const rt0 = await roundTrips(ctx.replicas, ctx.adminToken);
  const cpu0 = ctx.replicas.reduce((n, r) => n + (r.handle.alive ? cpuMs(r.handle.pid) : 0), 0);
  const pg0 = clusterCpuMs(ctx.postmasterPid);
  const result = await loadPhase(`scale-out ${ctx.label}×${name}`, runners, rounds, request);
  const cpu = ctx.replicas.reduce((n, r) => n + (r.handle.alive ? cpuMs(r.handle.pid) : 0), 0) - cpu0;
  const pgCpu = clusterCpuMs(ctx.postmasterPid) - pg0;
  const trips = (await roundTrips(ctx.replicas, ctx.adminToken)) - rt0;
  const n = result.requests;
  const costs = {
    replicaCpuMsPerRequest: n ? round3(cpu / n) : null,
    postgresCpuMsPerRequest: n ? round3(Math.max(0, pgCpu) / n) : null, // a backend that ended meanwhile takes its CPU with it
    postgresRoundTripsPerRequest: n ? round3(trips / n) : null,
  };
  log(`scale-out ${ctx.label}×${name}: CPU ${costs.replicaCpuMsPerRequest} ms (+ PostgreSQL ${costs.postgresCpuMsPerRequest} ms), ${costs.postgresRoundTripsPerRequest} round trips per request`);
  return { ...result, ...costs };
}

async function get(client, path, token, headers = {}) {
  const res = await client.request({ method: 'GET', path, headers: { authorization: `Bearer ${token}`, ...headers } });
  await res.body.arrayBuffer();
  return { status: res.statusCode, etag: res.headers.etag };
}

async function post(client, path, token, body) {
  const res = await client.request({ method: 'POST', path, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await res.body.arrayBuffer();
  return { status: res.statusCode };
}

async function deployment(n, { dataDir, teams, runners, workDir, pgc, rounds }) {
  const db = `bench_${n}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: pgc.url() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${db}`);
  await admin.end();
  const adminToken = randomBytes(24).toString('hex');
  const adminFile = join(workDir, `admin-${n}`);
  writeFileSync(adminFile, adminToken, { mode: 0o600 });
  const replicas = [];
  for (let i = 0; i < n; i++) replicas.push(await startReplica(i, dataDir, workDir, adminFile, pgc.url(db)));
  const ctx = { replicas, adminToken, postmasterPid: pgc.postmasterPid, label: n };
  const files = new Map(teams.map((t) => [t, teamFiles(dataDir, t, rounds.read + 1)]));
  const clients = [];
  try {
    log(`scale-out ${n} replica(s): creating ${runners} sessions`);
    for (let i = 0; i < runners; i += 25) {
      const batch = [];
      for (let j = i; j < Math.min(runners, i + 25); j++) {
        const team = teams[j % teams.length];
        const replica = replicas[j % n];
        batch.push(fetch(`${replica.url}/v1/admin/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'team', creator: 'bench', team }),
        }).then(async (res) => {
          if (res.status !== 201) throw new Error(`session create → ${res.status}: ${await res.text()}`);
          const s = await res.json();
          return { token: s.token, team, replica: j % n, client: new Client(replica.url, { pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 }), etag: null };
        }));
      }
      clients.push(...(await Promise.all(batch)));
    }
    // Every runner's first plan (its ETag), not measured: a full plan is the mount's, not the steady state's.
    const planPath = '/v1/plan?threshold=1';
    await Promise.all(clients.map(async (r) => {
      const res = await get(r.client, planPath, r.token);
      if (res.status !== 200 || typeof res.etag !== 'string') throw new Error(`first plan → ${res.status}, etag ${res.etag}`);
      r.etag = res.etag;
    }));
    const out = { replicas: n };
    out.plan304 = await phase('plan-304', clients, rounds.plan, async (r) => {
      const res = await get(r.client, planPath, r.token, { 'if-none-match': r.etag });
      if (res.status !== 304) throw new Error(`plan with If-None-Match ${r.etag} → ${res.status}, etag ${res.etag}`);
    }, ctx);
    out.grant = await phase('grant', clients, rounds.grant, async (r, i) => {
      const scope = i % 2 === 0 ? 'account' : `team_${r.team}`;
      const res = await get(r.client, `/v1/grants/${scope}`, r.token);
      if (res.status !== 200) throw new Error(`grant ${scope} → ${res.status}`);
    }, ctx);
    out.file = await phase('file', clients, rounds.file, async (r, i) => {
      const list = files.get(r.team);
      const path = list[i % list.length];
      const res = await get(r.client, `/v1/files/team_${r.team}/${path.split('/').map(encodeURIComponent).join('/')}`, r.token);
      if (res.status !== 200) throw new Error(`file ${path} → ${res.status}`);
    }, ctx);
    out.read = await phase('read', clients, rounds.read, async (r, i) => {
      const list = files.get(r.team);
      const res = await post(r.client, '/v1/read', r.token, { path: `team_${r.team}/${list[i % list.length]}`, mount: false });
      if (res.status !== 200) throw new Error(`read → ${res.status}`);
    }, ctx);
    if (n > 1) out.death = await replicaDeath(clients, ctx, rounds.grant * 2, out.grant);
    return out;
  } finally {
    await Promise.all(clients.map((c) => c.client.close().catch(() => {})));
    for (const r of replicas) await stop(r.handle);
  }
}

/** Grants through the daemon's client (all replicas, its own first) while replica 0 is SIGKILLed a third of the way in. */
async function replicaDeath(runners, ctx, rounds, baseline) {
  const urls = ctx.replicas.map((r) => r.url);
  const daemons = runners.map((r) => ({
    ...r,
    cc: new HttpControlClient({ serverUrl: [...urls.slice(r.replica), ...urls.slice(0, r.replica)].join(','), token: r.token, requestTimeoutMs: 5000 }),
  }));
  const total = daemons.length * rounds;
  let done = 0;
  let killedAt = null;
  const victim = ctx.replicas[0];
  const onVictim = daemons.filter((d) => d.replica === 0).length;
  try {
    const result = await phase('grant-during-death', daemons, rounds, async (d, i) => {
      if (killedAt === null && ++done > total / 3) {
        killedAt = Date.now();
        victim.handle.child.kill('SIGKILL');
      }
      await d.cc.grant(i % 2 === 0 ? 'account' : `team_${d.team}`);
    }, { ...ctx, replicas: ctx.replicas.slice(1) });
    return { ...result, runnersOnDeadReplica: onVictim, addedP50Ms: round3(result.latencyMs.p50 - baseline.latencyMs.p50), addedP99Ms: round3(result.latencyMs.p99 - baseline.latencyMs.p99) };
  } finally {
    await Promise.all(daemons.map((d) => d.cc.close()));
  }
}

export async function scaleOut({ dataDir, teams, runners = 1000, workDir, quick = false }) {
  mkdirSync(workDir, { recursive: true });
  const pgc = await startPostgres();
  const rounds = quick ? { plan: 3, grant: 3, file: 2, read: 2 } : { plan: 5, grant: 5, file: 3, read: 3 };
  const results = { runners, rounds, deployments: [] };
  try {
    for (const n of [1, 3]) results.deployments.push(await deployment(n, { dataDir, teams, runners, workDir, pgc, rounds }));
  } finally {
    pgc.stop();
  }
  return results;
}
