// Control-plane load: N simulated runners, each its own session and its own
// keep-alive connection (one undici Client each), all at once. Three phases,
// each with every runner going concurrently, so each has its own throughput
// and latency distribution:
//   plan      — GET /v1/plan (full body: what a runner pays at mount and sync)
//   plan-304  — GET /v1/plan with If-None-Match (the steady-state sync check)
//   grant     — GET /v1/grants/<scope>, alternating account and the team
//               (the open-time check when the grant cache has expired)
// Sessions are created up front through the admin API and not timed.

import { Client } from 'undici';
import { createSession } from './knowledgefs.mjs';
import { latencySummary, round3 } from './stats.mjs';
import { log } from './proc.mjs';

async function createSessions(server, teams, count) {
  const sessions = [];
  for (let i = 0; i < count; i += 20) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + 20); j++) {
      const team = teams[j % teams.length];
      batch.push(createSession(server, { kind: 'team', creator: 'bench', team }).then((s) => ({ ...s, team })));
    }
    sessions.push(...(await Promise.all(batch)));
  }
  return sessions;
}

/** Every runner makes `rounds` requests, all runners at once: throughput and latency of the lot. */
export async function phase(name, runners, rounds, request) {
  const latencies = [];
  let errors = 0;
  let firstError = null;
  const t0 = process.hrtime.bigint();
  await Promise.all(runners.map(async (r) => {
    for (let i = 0; i < rounds; i++) {
      const s = process.hrtime.bigint();
      try {
        await request(r, i);
        latencies.push(Number(process.hrtime.bigint() - s) / 1e6);
      } catch (err) {
        errors++;
        firstError ??= err instanceof Error ? err.message : String(err);
      }
    }
  }));
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const result = { requests: latencies.length, errors, firstError, wallMs: round3(wallMs), throughputPerS: round3((latencies.length / wallMs) * 1000), latencyMs: latencySummary(latencies) };
  log(`load ${name}: ${result.requests} ok, ${errors} errors, ${result.throughputPerS.toFixed(0)} req/s, p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms`);
  return result;
}

async function get(client, path, token, headers = {}) {
  const res = await client.request({ method: 'GET', path, headers: { authorization: `Bearer ${token}`, ...headers } });
  const body = await res.body.arrayBuffer();
  return { status: res.statusCode, headers: res.headers, bytes: body.byteLength };
}

export async function controlPlaneLoad(server, { teams, runners = 200, planRounds = 2, revalidateRounds = 10, grantRounds = 10, threshold = 1 << 30 }) {
  const sessions = await createSessions(server, teams, runners);
  const clients = sessions.map((s) => ({ ...s, client: new Client(server.url, { pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 }), etag: null }));
  const planPath = `/v1/plan?threshold=${threshold}`;
  let planBytes = 0;
  try {
    const plan = await phase('plan', clients, planRounds, async (r) => {
      const res = await get(r.client, planPath, r.token);
      if (res.status !== 200) throw new Error(`plan → ${res.status}`);
      r.etag = res.headers.etag;
      planBytes = res.bytes;
    });
    const revalidate = await phase('plan-304', clients, revalidateRounds, async (r) => {
      const res = await get(r.client, planPath, r.token, r.etag ? { 'if-none-match': r.etag } : {});
      if (res.status !== 304) throw new Error(`plan with If-None-Match → ${res.status} (expected 304)`);
    });
    const grant = await phase('grant', clients, grantRounds, async (r, i) => {
      const scope = i % 2 === 0 ? 'account' : `team_${r.team}`;
      const res = await get(r.client, `/v1/grants/${scope}`, r.token);
      if (res.status !== 200) throw new Error(`grant ${scope} → ${res.status}`);
    });
    return { runners, planBytes, plan, revalidate, grant };
  } finally {
    await Promise.all(clients.map((c) => c.client.close().catch(() => {})));
  }
}
