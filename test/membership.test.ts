// Where a creator's teams come from, in this process: directory.json, and an
// HTTP service answering each way a real one can (against a real server):
// what each answer becomes, what is asked, and how answers are kept and
// counted.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MembershipAnswer } from '../src/core/session/policy.js';
import { CONTROL_PLANE_METRICS, NO_METRICS, type MetricsRecorder } from '../src/core/metrics.js';
import { directoryMembership, httpMembership, meteredMembership, recheckedMembership, type MembershipSource } from '../src/server/access/membership.js';
import type { DirectoryView } from '../src/server/packs/pack-source.js';
import { GARBAGE_BODIES, startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';

describe('directoryMembership', () => {
  it("a listed user's teams, unknown-user for anyone else; the directory is read at each lookup", async () => {
    const view = { directory: { teams: new Map(), users: new Map([['alice', { teams: ['payments'], role: 'member' as const }]]) } };
    const source = directoryMembership(view as unknown as DirectoryView);
    expect(await source.teamsOf('alice')).toEqual({ status: 'ok', teams: ['payments'] });
    expect(await source.teamsOf('bob')).toEqual({ status: 'unknown-user' });
    view.directory = { teams: new Map(), users: new Map([['bob', { teams: [], role: 'member' as const }]]) };
    expect(await source.teamsOf('bob')).toEqual({ status: 'ok', teams: [] });
    expect(await source.teamsOf('alice')).toEqual({ status: 'unknown-user' });
  });
});

describe('httpMembership', () => {
  let service: FaultMembership;
  beforeAll(async () => {
    service = await startFaultMembership({ alice: ['payments', 'search'], 'ü ser@x': ['ops'], nobody: [] });
  });
  beforeEach(async () => {
    await service.setMode({ kind: 'ok' });
    service.resetCalls();
  });
  afterAll(async () => {
    await service?.close();
  });

  const ask = (user: string, timeoutMs = 2000) => httpMembership(service.url, timeoutMs).teamsOf(user);

  it('a 200 with a teams array is the answer; the name is one encoded path segment; JSON is asked for', async () => {
    expect(await ask('alice')).toEqual({ status: 'ok', teams: ['payments', 'search'] });
    expect(await ask('ü ser@x')).toEqual({ status: 'ok', teams: ['ops'] });
    expect(await ask('nobody')).toEqual({ status: 'ok', teams: [] });
    expect(service.paths()).toEqual(['/users/alice/teams', '/users/%C3%BC%20ser%40x/teams', '/users/nobody/teams']);
  });

  it('404 is an unknown user; any other status is an error naming it', async () => {
    expect(await ask('carol')).toEqual({ status: 'unknown-user' });
    for (const status of [500, 503, 403, 401, 201, 204, 302]) {
      await service.setMode({ kind: 'status', status });
      expect(await ask('alice'), `HTTP ${status}`).toEqual({ status: 'error', error: `membership service answered HTTP ${status}` });
    }
  });

  it('a body that is not JSON, or JSON without a teams array of team ids, is an error', async () => {
    const notJson: MembershipAnswer = { status: 'error', error: 'membership service answered a body that is not JSON' };
    const noTeams: MembershipAnswer = { status: 'error', error: 'membership service answered without a "teams" array of team ids' };
    const expected: Record<string, MembershipAnswer> = {
      '<html>oops</html>': notJson,
      '': notJson,
      '{"teams": ["payments"': notJson,
      '{"teams": "payments"}': noTeams,
      '{"teams": [1, 2]}': noTeams,
      '{"team": ["payments"]}': noTeams,
      '[]': noTeams,
      null: noTeams,
      '{"teams": ["payments", "Not An Id"]}': noTeams,
      '{"teams": ["payments", null]}': noTeams,
    };
    for (const body of GARBAGE_BODIES) expect(Object.keys(expected)).toContain(body);
    for (const [body, answer] of Object.entries(expected)) {
      await service.setMode({ kind: 'garbage', body });
      expect(await ask('alice'), body).toEqual(answer);
    }
  });

  it('no answer within the timeout, a slow one, a refused connection', async () => {
    await service.setMode({ kind: 'hang' });
    const started = Date.now();
    expect(await ask('alice', 150)).toEqual({ status: 'error', error: 'membership service did not answer within 150 ms' });
    expect(Date.now() - started).toBeLessThan(2000);
    await service.setMode({ kind: 'slow', ms: 50 });
    expect(await ask('alice', 2000)).toEqual({ status: 'ok', teams: ['payments', 'search'] });
    const closed = httpMembership('http://127.0.0.1:1', 2000);
    const answer = await closed.teamsOf('alice');
    expect(answer.status).toBe('error');
    expect((answer as { error: string }).error).toMatch(/^membership service unreachable: .*ECONNREFUSED/);
  });

  it('a name that would rewrite the path is refused without a request', async () => {
    for (const name of ['..', '.', '', 'a/b', 'a\\b', '%2e%2e', 'a\nb']) {
      const answer = await ask(name);
      expect(answer.status, name).toBe('error');
      const error = (answer as { error: string }).error;
      expect(error.startsWith(`user name ${JSON.stringify(name)} `), error).toBe(true);
      expect(error.endsWith(': not asked of the membership service'), error).toBe(true);
    }
    expect(service.paths()).toEqual([]);
  });
});

describe('recheckedMembership', () => {
  it('one request per user while the answer is younger than the age; then asked again', async () => {
    let clock = 1000;
    const asked: string[] = [];
    const source: MembershipSource = { teamsOf: async (user) => (asked.push(user), { status: 'ok', teams: [`t${asked.length}`] }) };
    const rechecked = recheckedMembership(source, 500, () => clock);
    expect(await rechecked.teamsOf('alice')).toEqual({ status: 'ok', teams: ['t1'] });
    clock += 499;
    expect(await rechecked.teamsOf('alice')).toEqual({ status: 'ok', teams: ['t1'] });
    expect(await rechecked.teamsOf('bob')).toEqual({ status: 'ok', teams: ['t2'] });
    clock += 1; // alice's answer is 500 ms old
    expect(await rechecked.teamsOf('alice')).toEqual({ status: 'ok', teams: ['t3'] });
    expect(asked).toEqual(['alice', 'bob', 'alice']);
    // The same promise while it is kept: concurrent lookups share one request.
    expect(rechecked.teamsOf('alice')).toBe(rechecked.teamsOf('alice'));
  });

  it('an age of 0 asks every time', async () => {
    let n = 0;
    const rechecked = recheckedMembership({ teamsOf: async () => ({ status: 'ok', teams: [String(++n)] }) }, 0, () => 5);
    await rechecked.teamsOf('a');
    await rechecked.teamsOf('a');
    expect(n).toBe(2);
  });
});

describe('meteredMembership', () => {
  function recorder(): { metrics: MetricsRecorder; seen: string[] } {
    const seen: string[] = [];
    const metrics: MetricsRecorder = {
      ...NO_METRICS,
      inc: (spec, labels, by) => seen.push(`inc ${spec.name} ${JSON.stringify(labels)} ${by ?? ''}`),
      observe: (spec, labels, value) => {
        expect(value).toBeGreaterThanOrEqual(0);
        expect(value).toBeLessThan(5); // seconds, not milliseconds
        seen.push(`observe ${spec.name} ${JSON.stringify(labels)}`);
      },
    };
    return { metrics, seen };
  }

  it('each lookup is timed and counted by source and result, and its answer passed on', async () => {
    const answers: MembershipAnswer[] = [{ status: 'ok', teams: ['a'] }, { status: 'unknown-user' }, { status: 'error', error: 'down' }];
    const { metrics, seen } = recorder();
    const metered = meteredMembership({ teamsOf: async () => answers.shift() as MembershipAnswer }, 'http', metrics);
    expect(await metered.teamsOf('u')).toEqual({ status: 'ok', teams: ['a'] });
    expect(await metered.teamsOf('u')).toEqual({ status: 'unknown-user' });
    expect(await metered.teamsOf('u')).toEqual({ status: 'error', error: 'down' });
    const duration = CONTROL_PLANE_METRICS.membershipDuration.name;
    const lookups = CONTROL_PLANE_METRICS.membershipLookups.name;
    expect(seen).toEqual([
      `observe ${duration} {"source":"http"}`,
      `inc ${lookups} {"source":"http","result":"ok"} `,
      `observe ${duration} {"source":"http"}`,
      `inc ${lookups} {"source":"http","result":"unknown_user"} `,
      `observe ${duration} {"source":"http"}`,
      `inc ${lookups} {"source":"http","result":"error"} `,
    ]);
  });

  it('a lookup that throws counts as an error and is passed on', async () => {
    const { metrics, seen } = recorder();
    const metered = meteredMembership({ teamsOf: async () => Promise.reject(new Error('bug')) }, 'directory', metrics);
    await expect(metered.teamsOf('u')).rejects.toThrow('bug');
    expect(seen).toEqual([
      `observe ${CONTROL_PLANE_METRICS.membershipDuration.name} {"source":"directory"}`,
      `inc ${CONTROL_PLANE_METRICS.membershipLookups.name} {"source":"directory","result":"error"} `,
    ]);
  });

  it('the time is that of the lookup', async () => {
    let value = -1;
    const metrics: MetricsRecorder = { ...NO_METRICS, observe: (_spec, _labels, v) => { value = v; } };
    const metered = meteredMembership({ teamsOf: () => new Promise((r) => setTimeout(() => r({ status: 'unknown-user' }), 120)) }, 'http', metrics);
    const started = performance.now();
    await metered.teamsOf('u');
    expect(value).toBeGreaterThanOrEqual(0.1);
    expect(value).toBeLessThanOrEqual((performance.now() - started) / 1000);
  });
});
