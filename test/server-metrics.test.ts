// GET /metrics on a real control plane over 127.0.0.1, scraped and parsed as
// Prometheus text: access (admin token, runner 403, none 401, the token-less
// --metrics-listen), counters moving exactly as the requests did, decisions
// by outcome (a membership outage is fail_closed), long-polls open, scans and
// pack sizes, and no label carrying a user, team, session, path or token.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS, type MetricSpec } from '../src/core/metrics.js';
import type { MembershipSource } from '../src/server/access/membership.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { allLabels, scrape, value, type Scrape } from './helpers/metrics-scrape.js';
import { waitFor } from './helpers/mount.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
  users: { alice: { teams: ['payments', 'search'] }, bob: { teams: ['storage'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/runbooks/db-failover.md': 'failover steps\n',
    'teams/search/DUTY.md': '# Search\n',
    'teams/storage/DUTY.md': '# Storage\n',
    'teams/storage/postmortems/disk-full.md': 'storage outage\n',
  },
};

const M = CONTROL_PLANE_METRICS;
let dir: string;
let cp: TestControlPlane;
let membershipDown = false;

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const metricsOf = () => scrape(`${cp.url}/metrics`, cp.adminToken);

/** `after - before` of one metric, summed over the given labels. */
function delta(before: Scrape, after: Scrape, metric: MetricSpec, labels: Record<string, string> = {}): number {
  return value(after, metric.name, labels) - value(before, metric.name, labels);
}

beforeAll(async () => {
  dir = await makeDataDir(spec);
  cp = await startControlPlane({
    dataDir: dir,
    metricsListen: { host: '127.0.0.1', port: 0 },
    deps: {
      wrapMembership: (source: MembershipSource): MembershipSource => ({
        teamsOf: (user) => (membershipDown ? Promise.resolve({ status: 'error', error: 'membership service unreachable' }) : source.teamsOf(user)),
      }),
    },
  });
});

afterAll(async () => {
  await cp?.close();
  if (dir) await removeDataDir(dir);
});

describe('GET /metrics access', () => {
  it('answers the admin token with the Prometheus text format', async () => {
    const s = await metricsOf();
    for (const m of Object.values(M)) expect(s[m.name]?.type, m.name).toBe(m.type);
    // Node's process metrics come along.
    expect(value(s, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(value(s, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
  });

  it('refuses a runner token (403) and no token (401)', async () => {
    const session = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const asRunner = await fetch(`${cp.url}/metrics`, { headers: auth(session.token) });
    expect(asRunner.status).toBe(403);
    expect(((await asRunner.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    expect((await fetch(`${cp.url}/metrics`)).status).toBe(401);
  });

  it('serves the same metrics without a token on --metrics-listen, and nothing else there', async () => {
    const url = cp.cp.metricsUrl as string;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(url).not.toBe(`${cp.url}/metrics`);
    const s = await scrape(url);
    expect(s[M.httpRequests.name]?.type).toBe('counter');
    const other = await fetch(url.replace(/\/metrics$/, '/v1/session'));
    expect(other.status).toBe(404);
    expect((await fetch(url.replace(/\/metrics$/, '/healthz'))).status).toBe(404);
  });
});

describe('counters follow the requests', () => {
  it('counts requests by route and status class, decisions by outcome, membership lookups', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const team = await cp.createSession({ kind: 'team', creator: 'bob', team: 'storage' });
    const before = await metricsOf();

    // personal session: plan (4 candidate scopes, decided quietly then audited on 200), two allowed opens, one hidden denial
    expect((await fetch(`${cp.url}/v1/plan`, { headers: auth(alice.token) })).status).toBe(200);
    expect((await fetch(`${cp.url}/v1/files/team_payments/runbooks/db-failover.md`, { headers: auth(alice.token) })).status).toBe(200);
    expect((await fetch(`${cp.url}/v1/files/account/DUTY.md`, { headers: auth(alice.token) })).status).toBe(200);
    expect((await fetch(`${cp.url}/v1/files/team_storage/postmortems/disk-full.md`, { headers: auth(alice.token) })).status).toBe(404);
    // team session asking for another team: 403
    expect((await fetch(`${cp.url}/v1/grants/team_payments`, { headers: auth(team.token) })).status).toBe(403);
    // no token: 401, unknown route: other
    expect((await fetch(`${cp.url}/v1/session`)).status).toBe(401);
    expect((await fetch(`${cp.url}/nowhere/at/all`)).status).toBe(404);

    const after = await metricsOf();
    expect(delta(before, after, M.httpRequests, { route: 'plan', status_class: '2xx' })).toBe(1);
    expect(delta(before, after, M.httpRequests, { route: 'files', status_class: '2xx' })).toBe(2);
    expect(delta(before, after, M.httpRequests, { route: 'files', status_class: '4xx' })).toBe(1);
    expect(delta(before, after, M.httpRequests, { route: 'grants', status_class: '4xx' })).toBe(1);
    expect(delta(before, after, M.httpRequests, { route: 'session', status_class: '4xx' })).toBe(1);
    expect(delta(before, after, M.httpRequests, { route: 'other', status_class: '4xx' })).toBe(1);
    // The scrape between `before` and `after` is itself one metrics request.
    expect(delta(before, after, M.httpRequests, { route: 'metrics', status_class: '2xx' })).toBe(1);
    expect(delta(before, after, M.httpRequests)).toBe(8);
    expect(delta(before, after, M.httpDuration, { route: 'files' })).toBe(3);

    // Plan: account, payments, search allowed; storage denied. Opens: 2 allowed, 1 denied (personal); grant: 1 denied (team).
    expect(delta(before, after, M.decisions, { action: 'plan', session_kind: 'personal', outcome: 'allow' })).toBe(3);
    expect(delta(before, after, M.decisions, { action: 'plan', session_kind: 'personal', outcome: 'deny' })).toBe(1);
    expect(delta(before, after, M.decisions, { action: 'open', session_kind: 'personal', outcome: 'allow' })).toBe(2);
    expect(delta(before, after, M.decisions, { action: 'open', session_kind: 'personal', outcome: 'deny' })).toBe(1);
    expect(delta(before, after, M.decisions, { action: 'open', session_kind: 'team', outcome: 'deny' })).toBe(1);
    expect(delta(before, after, M.decisions, { outcome: 'fail_closed' })).toBe(0);
    // One lookup per request that needed one: the plan and the storage open (account and payments' open: the plan's own lookup is per request).
    expect(delta(before, after, M.membershipLookups, { source: 'directory', result: 'ok' })).toBe(3);
    expect(delta(before, after, M.membershipDuration, { source: 'directory' })).toBe(3);
  });

  it('counts a membership outage as fail_closed decisions and failed lookups', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const before = await metricsOf();
    membershipDown = true;
    try {
      const res = await fetch(`${cp.url}/v1/files/team_payments/DUTY.md`, { headers: auth(alice.token) });
      expect(res.status).toBe(503);
      // account needs no membership: still allowed during the outage
      expect((await fetch(`${cp.url}/v1/files/account/DUTY.md`, { headers: auth(alice.token) })).status).toBe(200);
    } finally {
      membershipDown = false;
    }
    const after = await metricsOf();
    expect(delta(before, after, M.decisions, { action: 'open', outcome: 'fail_closed' })).toBe(1);
    expect(delta(before, after, M.decisions, { action: 'open', outcome: 'allow' })).toBe(1);
    expect(delta(before, after, M.membershipLookups, { result: 'error' })).toBe(1);
    expect(delta(before, after, M.httpRequests, { route: 'files', status_class: '5xx' })).toBe(1);
  });

  it('shows an open long-poll while it waits, and none after', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const first = await fetch(`${cp.url}/v1/plan`, { headers: auth(alice.token) });
    const etag = first.headers.get('etag') as string;
    await first.text();
    const controller = new AbortController();
    const poll = fetch(`${cp.url}/v1/plan?wait=20`, { headers: { ...auth(alice.token), 'if-none-match': etag }, signal: controller.signal }).catch(() => null);
    const open = await waitFor(async () => value(await metricsOf(), M.planLongPolls.name), 5_000, 20);
    expect(open).toBe(1);
    expect(value(await metricsOf(), M.httpInFlight.name)).toBeGreaterThanOrEqual(2); // the poll and this scrape
    controller.abort();
    await poll;
    await waitFor(async () => value(await metricsOf(), M.planLongPolls.name) === 0, 5_000, 20);
    expect(value(await metricsOf(), M.planLongPolls.name)).toBe(0);
  });

  it('reports sessions, mounted teams, scans and pack sizes', async () => {
    const before = await metricsOf();
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: { ...auth(alice.token), 'content-type': 'application/json' }, body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }) });
    expect(read.status).toBe(200);
    await writeDataFile(dir, 'teams/search/notes/new.md', 'twelve bytes');
    await cp.rescan();
    const after = await metricsOf();
    expect(delta(before, after, M.sessions, { kind: 'personal' })).toBe(1);
    expect(delta(before, after, M.mountedTeams)).toBe(1);
    expect(delta(before, after, M.packScans, { result: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(delta(before, after, M.packScans, { result: 'error' })).toBe(0);
    expect(delta(before, after, M.packFiles)).toBe(1);
    expect(delta(before, after, M.packBytes)).toBe(12);
    const scopes = cp.cp.store.scopes();
    expect(value(after, M.scopes.name)).toBe(scopes.length);
    expect(value(after, M.packFiles.name)).toBe(scopes.reduce((n, s) => n + s.files.length, 0));
    expect(delta(before, after, M.decisions, { action: 'mount', outcome: 'allow' })).toBe(1);
  });
});

describe('labels leak nothing', () => {
  it('carries no user, team, session, path or token, and only the values core/metrics.ts lists', async () => {
    const alice = await cp.createSession({ kind: 'personal', creator: 'alice' });
    await fetch(`${cp.url}/v1/files/team_search/DUTY.md`, { headers: auth(alice.token) });
    await fetch(`${cp.url}/v1/files/team_storage/postmortems/disk-full.md`, { headers: auth(alice.token) });
    await fetch(`${cp.url}/v1/admin/sessions/${alice.sessionId}`, { method: 'DELETE', headers: auth(cp.adminToken) });
    const s = await metricsOf();
    const secrets = ['alice', 'bob', 'payments', 'search', 'storage', 'DUTY', 'disk-full', 'postmortems', alice.sessionId, alice.token, cp.adminToken, dir];
    const labels = allLabels(s);
    expect(labels.length).toBeGreaterThan(50);
    for (const { metric, label, value: v } of labels) {
      for (const secret of secrets) expect(v.includes(secret), `${metric}{${label}="${v}"}`).toBe(false);
      const ours = Object.values(M).find((m) => m.name === metric);
      if (ours !== undefined) expect((ours.labels as Record<string, readonly string[]>)[label], `${metric}{${label}}`).toContain(v);
    }
  });
});
