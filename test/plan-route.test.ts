// GET /v1/plan's query and headers on an in-process control plane: the
// default threshold, each malformed `threshold`, `wait`, `known` and `form`
// named word for word, ETag matching (lists, weak tags, `*`), the headers of
// 200 and 304, `known` stubs, the columnar form (the same plan as the rows),
// the packed form by Accept (the same plan again, whatever `form` says),
// bound and mounted teams that have no pack yet, the per-session long-poll
// cap (which only a request that may wait takes), the open long-polls gauge,
// and a creator removed from a team reaching a waiting long-poll at once.
// Long-poll wake-ups across replicas are in server-long-poll.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS as M } from '../src/core/metrics.js';
import { DEFAULT_PLAN_THRESHOLD } from '../src/server/http/plan-route.js';
import { checkPlan, checkPlanChanges } from '../src/daemon/control-plane/wire-check.js';
import { unpackPlan } from '../src/daemon/control-plane/packed-plan.js';
import { PACKED_PLAN_TYPE } from '../src/core/session/plan-packed.js';
import { acceptsPackedPlan } from '../src/server/http/plan-route.js';
import { longPollsWaiting, startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';

const spec: DataDirSpec = {
  teams: { search: 'Search', ops: 'Ops', ghost: 'Ghost' },
  users: { alice: { teams: ['search', 'ops', 'ghost'] } },
  files: { 'account/DUTY.md': '# Account\n', 'teams/search/DUTY.md': '# Search\n', 'teams/ops/DUTY.md': '# Ops\n' },
};

let data = '';
let cp: TestControlPlane;

interface PlanBody {
  threshold: number;
  mounted: string[];
  scopes: { scope: string; version: string; files?: unknown[]; unchanged?: boolean; totalBytes: number }[];
}

const plan = (token: string, query = '', headers: Record<string, string> = {}) => fetch(`${cp.url}/v1/plan${query}`, { headers: { authorization: `Bearer ${token}`, ...headers } });

async function refusal(token: string, query: string): Promise<{ status: number; body: unknown }> {
  const res = await plan(token, query);
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  data = await makeDataDir(spec);
  cp = await startControlPlane({ dataDir: data, membershipRecheckMs: 60_000, maxLongPollsPerSession: 1 });
});
afterAll(async () => {
  await cp?.close();
  if (data) await removeDataDir(data);
});

describe('the query', () => {
  it('defaults the threshold to 256 MiB, and takes up to 16 digits', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    expect(DEFAULT_PLAN_THRESHOLD).toBe(268_435_456);
    expect(((await (await plan(token)).json()) as PlanBody).threshold).toBe(268_435_456);
    expect(((await (await plan(token, '?threshold=9999999999999999')).json()) as PlanBody).threshold).toBe(9_999_999_999_999_999);
  });

  it('names a malformed threshold, wait or known, word for word', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const bad = (code: string, message: string) => ({ status: 400, body: { error: { code, message } } });
    for (const t of ['abc', '12a', 'a12', '12345678901234567', '-1']) {
      expect(await refusal(token, `?threshold=${t}`)).toEqual(bad('invalid_argument', `threshold must be a number of bytes, got "${t}"`));
    }
    for (const w of ['x', '1.', '1.5x', 'x1', '-2']) {
      expect(await refusal(token, `?wait=${encodeURIComponent(w)}`)).toEqual(bad('invalid_argument', `wait must be a number of seconds, got "${w}"`));
    }
    expect((await plan(token, '?wait=0.25')).status).toBe(200);
    const example = `"account:${'0'.repeat(16)}" (at least 16 hex digits)`;
    expect(await refusal(token, '?known=account:abc')).toEqual(bad('invalid_argument', `known must list scope:version pairs like ${example}, got "account:abc"`));
    expect(await refusal(token, `?known=teams:${'a'.repeat(16)}`)).toEqual(bad('invalid_argument', `known must list scope:version pairs like ${example}, got "teams:${'a'.repeat(16)}"`));
    const long = `account:${'g'.repeat(200)}`;
    expect(await refusal(token, `?known=${long}`)).toEqual(bad('invalid_argument', `known must list scope:version pairs like ${example}, got "${long.slice(0, 100)}"`));
    expect((await plan(token, '?known=')).status).toBe(200);
    for (const f of ['ROWS', 'column', '']) {
      expect(await refusal(token, `?form=${f}`)).toEqual(bad('invalid_argument', `form must be "rows" or "columns", got "${f}"`));
    }
    expect(await refusal(token, `?form=${'x'.repeat(300)}`)).toEqual(bad('invalid_argument', `form must be "rows" or "columns", got "${'x'.repeat(100)}"`));
  });

  it('sends a scope the daemon names at its version as a stub, and the rest whole', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const whole = (await (await plan(token)).json()) as PlanBody;
    const account = whole.scopes.find((s) => s.scope === 'account');
    const search = whole.scopes.find((s) => s.scope === 'team_search');
    const known = `account:${account?.version.slice(0, 16)},team_search:${'0'.repeat(16)}`;
    const partial = (await (await plan(token, `?known=${known}`)).json()) as PlanBody;
    expect(partial.scopes.find((s) => s.scope === 'account')).toEqual({ scope: 'account', version: account?.version, totalBytes: account?.totalBytes, unchanged: true });
    expect(partial.scopes.find((s) => s.scope === 'team_search')).toEqual(search);
  });
});

describe('the columnar form', () => {
  interface ColumnarBody extends Omit<PlanBody, 'scopes'> {
    version: string;
    scopes: (Omit<PlanBody['scopes'][number], 'files'> & { columns?: { paths: string[]; sizes: number[]; mtimesMs: number[]; sha256s: string[] } })[];
  }

  it('form=columns is the same plan, version and tag as the rows (the default, and form=rows)', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const rowsRes = await plan(token);
    const rows = (await rowsRes.json()) as PlanBody & { version: string };
    expect(await (await plan(token, '?form=rows')).json()).toEqual(rows);
    const colsRes = await plan(token, '?form=columns');
    expect(colsRes.headers.get('etag')).toBe(rowsRes.headers.get('etag'));
    const cols = (await colsRes.json()) as ColumnarBody;
    expect(cols.version).toBe(rows.version);
    expect(cols.scopes.every((s) => s.columns !== undefined && !('files' in s))).toBe(true);
    const asRows = cols.scopes.map(({ columns, ...s }) => ({
      ...s,
      files: (columns?.paths ?? []).map((path, i) => ({ path, size: columns?.sizes[i], mtimeMs: columns?.mtimesMs[i], sha256: columns?.sha256s[i] })),
    }));
    expect(asRows).toEqual(rows.scopes);
    expect(checkPlan(cols).scopes.map((s) => s.files)).toEqual(checkPlan(rows).scopes.map((s) => s.files));
  });

  it('stubs stay stubs: only scopes sent whole come as columns', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const whole = (await (await plan(token)).json()) as PlanBody;
    const account = whole.scopes.find((s) => s.scope === 'account');
    const partial = (await (await plan(token, `?form=columns&known=account:${account?.version.slice(0, 16)}`)).json()) as ColumnarBody;
    expect(partial.scopes.find((s) => s.scope === 'account')).toEqual({ scope: 'account', version: account?.version, totalBytes: account?.totalBytes, unchanged: true });
    expect(partial.scopes.find((s) => s.scope === 'team_search')?.columns?.paths).toEqual(['DUTY.md']);
  });
});

describe('the packed form', () => {
  const packed = { accept: PACKED_PLAN_TYPE };
  const rowsOf = (p: ReturnType<typeof checkPlan>) => p.scopes.map((s) => [s.scope, s.version, s.totalBytes, s.files]);

  it('is answered to an Accept that names it, whatever `form` says: the same plan, version and tag as the rows', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const rowsRes = await plan(token);
    const rows = checkPlan(await rowsRes.json());
    for (const query of ['', '?form=columns', '?form=rows']) {
      const res = await plan(token, query, { accept: `application/json;q=0.5, ${PACKED_PLAN_TYPE}` });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(PACKED_PLAN_TYPE);
      expect(res.headers.get('etag')).toBe(rowsRes.headers.get('etag'));
      expect(res.headers.get('vary')).toBe('accept');
      const fromPacked = checkPlan(unpackPlan(Buffer.from(await res.arrayBuffer())));
      expect(fromPacked.version).toBe(rows.version);
      expect(rowsOf(fromPacked)).toEqual(rowsOf(rows));
    }
    expect(rowsRes.headers.get('vary')).toBe('accept');
  });

  it('stubs stay stubs in the header; a 304 is the same for every form', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const whole = (await (await plan(token)).json()) as PlanBody;
    const account = whole.scopes.find((s) => s.scope === 'account');
    const res = await plan(token, `?known=account:${account?.version.slice(0, 16)}`, packed);
    const changes = checkPlanChanges(unpackPlan(Buffer.from(await res.arrayBuffer())));
    expect(changes.scopes.find((s) => s.scope === 'account')).toEqual({ scope: 'account', version: account?.version, totalBytes: account?.totalBytes, unchanged: true });
    expect(changes.scopes.find((s) => s.scope === 'team_search')?.version).toBe(whole.scopes.find((s) => s.scope === 'team_search')?.version);
    const etag = res.headers.get('etag') as string;
    const again = await plan(token, '', { ...packed, 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.headers.get('vary')).toBe('accept');
  });

  it('an Accept that does not name it, or refuses it with q=0, gets JSON', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    for (const accept of ['application/json', '*/*', `${PACKED_PLAN_TYPE};q=0`, `${PACKED_PLAN_TYPE}x`, 'application/vnd.knowledgefs']) {
      const res = await plan(token, '', { accept });
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      await res.arrayBuffer();
    }
    expect(acceptsPackedPlan(undefined)).toBe(false);
    expect(acceptsPackedPlan(` ${PACKED_PLAN_TYPE.toUpperCase()} ; q=0.1`)).toBe(true);
    expect(acceptsPackedPlan(`text/html, ${PACKED_PLAN_TYPE};level=1`)).toBe(true);
    expect(acceptsPackedPlan(`${PACKED_PLAN_TYPE};q=0.000`)).toBe(false);
  });
});

describe('ETags', () => {
  it('answers 304 to a matching tag in a list, weak or not, and to *; 200 with the tag otherwise', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const first = await plan(token);
    await first.arrayBuffer();
    const etag = first.headers.get('etag') as string;
    expect(etag).toMatch(/^"\S+"$/);
    expect(first.headers.get('cache-control')).toBe('no-cache');
    for (const header of [etag, `"other", ${etag}`, `W/${etag}`, ` W/${etag} `, '*']) {
      const res = await plan(token, '', { 'if-none-match': header });
      expect(res.status, header).toBe(304);
      expect(res.headers.get('etag')).toBe(etag);
      expect(res.headers.get('cache-control')).toBe('no-cache');
    }
    for (const header of ['"other"', `X/${etag}`, etag.slice(1)]) {
      const res = await plan(token, '', { 'if-none-match': header });
      await res.arrayBuffer();
      expect(res.status, header).toBe(200);
    }
  });
});

describe('teams without a pack yet', () => {
  it('are in the plan, empty, when bound or mounted', async () => {
    const team = await cp.createSession({ kind: 'team', creator: 'alice', team: 'ghost' });
    const bound = (await (await plan(team.token)).json()) as PlanBody;
    expect(bound.scopes.map((s) => [s.scope, s.files?.length])).toEqual([
      ['account', 1],
      ['team_ghost', 0],
    ]);
    const personal = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const record = cp.cp.sessions.cached(personal.sessionId);
    if (record === undefined) throw new Error('no record');
    await cp.cp.sessions.recordRead(record, { path: 'team_ghost/DUTY.md', sha256: 'a'.repeat(64) }, 'ghost');
    const mounted = (await (await plan(personal.token, '?threshold=0')).json()) as PlanBody;
    expect(mounted.mounted).toEqual(['ghost']);
    expect(mounted.scopes.find((s) => s.scope === 'team_ghost')?.files).toEqual([]);
  });
});

describe('long-polls', () => {
  it('a request that may wait takes the one long-poll this session may hold; others are answered all the same', async () => {
    const { sessionId, token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const first = await plan(token);
    await first.arrayBuffer();
    const etag = first.headers.get('etag') as string;
    const before = (await cp.cp.metrics.samples(M.planLongPolls))[0]?.value ?? 0;
    const waiting = plan(token, '?wait=20', { 'if-none-match': etag });
    await longPollsWaiting(cp, before + 1);
    const second = await plan(token, '?wait=20', { 'if-none-match': etag });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBe('1');
    expect(await second.json()).toEqual({ error: { code: 'unavailable', message: 'this session already holds 1 plan long-polls (--max-long-polls); wait for one to end' } });
    // Without If-None-Match, or without wait, nothing waits and nothing is refused.
    const plain = await plan(token, '?wait=20');
    await plain.arrayBuffer();
    expect(plain.status).toBe(200);
    expect((await plan(token, '', { 'if-none-match': etag })).status).toBe(304);
    expect((await plan(token, '?wait=0', { 'if-none-match': etag })).status).toBe(304);
    // Revoked while it waits: 401 at once, with the message of a bad token.
    await cp.cp.sessions.revoke(sessionId);
    const answer = await waiting;
    expect(answer.status).toBe(401);
    expect(((await answer.json()) as { error: { message: string } }).error.message).toMatch(/^missing, invalid or revoked session token/);
    expect((await cp.cp.metrics.samples(M.planLongPolls))[0]?.value ?? 0).toBe(before);
  });

  it('a creator removed from a team reaches a waiting long-poll at once, despite a long re-check interval', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    const first = await plan(token);
    const etag = first.headers.get('etag') as string;
    expect(((await first.json()) as PlanBody).scopes.map((s) => s.scope)).toContain('team_ops');
    const before = (await cp.cp.metrics.samples(M.planLongPolls))[0]?.value ?? 0;
    const waiting = plan(token, '?wait=20', { 'if-none-match': etag });
    await longPollsWaiting(cp, before + 1);
    const started = Date.now();
    try {
      await writeDirectory(data, { ...spec, users: { alice: { teams: ['search', 'ghost'] } } });
      await cp.rescan();
      const answer = await waiting;
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as PlanBody).scopes.map((s) => s.scope)).not.toContain('team_ops');
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      await writeDirectory(data, spec);
      await cp.rescan();
    }
  });
});
