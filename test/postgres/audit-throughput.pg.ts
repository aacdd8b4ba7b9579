// Measurements for docs/PERFORMANCE.md, one run, no timed asserts: how many
// decisions per second one replica writes to PostgreSQL (--audit-log
// postgres), and what the sink costs a grant, as a ratio of grant latency
// with the postgres sink to the same control plane with a file.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/server/access/audit-log.js';
import { PgAuditSink } from '../../src/server/access/pg-audit-sink.js';
import { startControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';
import { startPostgres, type PgCluster } from '../helpers/postgres.js';

let pgc: PgCluster;
let dir: string;
let tmp: string;

beforeAll(async () => {
  pgc = await startPostgres();
  dir = await makeDataDir({ teams: { search: 'Search' }, users: { alice: { teams: ['search'] } }, files: { 'account/DUTY.md': '# A\n', 'teams/search/DUTY.md': '# S\n' } });
  tmp = await mkdtemp(join(tmpdir(), 'kfs-audit-perf-'));
});

afterAll(async () => {
  await pgc?.destroy();
  if (dir !== undefined) await removeDataDir(dir);
  if (tmp !== undefined) await rm(tmp, { recursive: true, force: true });
});

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? 0;

async function grantLatencies(auditLog: string, stateUrl: string, n: number): Promise<number[]> {
  const cp = await startControlPlane({ dataDir: dir, stateUrl, auditLog, replicaId: 'perf' });
  try {
    const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      const res = await fetch(`${cp.url}/v1/grants/team_search`, { headers: { authorization: `Bearer ${s.token}` } });
      await res.arrayBuffer();
      times.push(performance.now() - started);
      expect(res.status).toBe(200);
    }
    await cp.cp.audit.flush();
    return times;
  } finally {
    await cp.close();
  }
}

it('audit write throughput to PostgreSQL, and grant latency with and without the postgres sink', async () => {
  const url = await pgc.createDatabase('perf');
  const N = 2_000;
  // Warm-up, then interleaved rounds so load on the machine hits both alike.
  await grantLatencies(join(tmp, 'warm.log'), url, 200);
  const file: number[] = [];
  const postgres: number[] = [];
  for (let round = 0; round < 2; round++) {
    file.push(...(await grantLatencies(join(tmp, `file-${round}.log`), url, N / 2)));
    postgres.push(...(await grantLatencies('postgres', url, N / 2)));
  }

  // Throughput: decisions appended as fast as possible, written in batches of 500.
  const sink = await PgAuditSink.open({ url, log: () => undefined, retentionMs: 30 * 24 * 3600 * 1000, bufferRecords: 200_000, onDrop: () => undefined });
  const M = 100_000;
  const record = (i: number): AuditRecord => ({
    time: new Date().toISOString(),
    replica: 'perf',
    session: `ses_${i % 1000}`,
    kind: 'personal',
    creator: 'alice',
    team: null,
    scope: 'team_search',
    action: 'open',
    rule: 'creator-member',
    membership: { status: 'ok', teams: ['search'] },
    result: 'allow',
    requestId: `kfs-${i.toString(16).padStart(16, '0')}`,
  });
  const started = performance.now();
  for (let i = 0; i < M; i++) sink.append(record(i));
  await sink.flush();
  const seconds = (performance.now() - started) / 1000;
  await sink.close();
  const rows = (await pgc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM knowledgefs_audit WHERE replica = 'perf'`, [], 'perf'))[0]?.n ?? 0;
  // The postgres rounds' grants (N in all) and the appended decisions; the warm-up wrote to a file.
  expect(rows).toBe(M + N);

  const line = [
    `audit throughput: ${M} decisions in ${seconds.toFixed(2)} s = ${Math.round(M / seconds)} decisions/s (batches of 500, one INSERT each)`,
    `grant latency, ${N} sequential grants each: file sink median ${median(file).toFixed(3)} ms p99 ${p99(file).toFixed(3)} ms; postgres sink median ${median(postgres).toFixed(3)} ms p99 ${p99(postgres).toFixed(3)} ms; ratio of medians ${(median(postgres) / median(file)).toFixed(2)}`,
  ].join('\n');
  process.stdout.write(`\n${line}\n`);
});
