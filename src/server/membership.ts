// Where a personal session's creator's teams come from: directory.json
// (embedded default) or an external HTTP service (`--membership-url`).
//
// HTTP contract: GET <url>/users/<user>/teams → 200 {"teams": ["<id>", ...]};
// 404 = unknown user; any other status, a bad body or a timeout = error, which
// CanLoadScope turns into a deny for other teams (fail closed). Never cached
// here: the control plane asks once per request (see createScopeEvaluator).

import { request } from 'undici';
import { performance } from 'node:perf_hooks';
import { CONTROL_PLANE_METRICS, type MEMBERSHIP_SOURCES, type MetricsRecorder } from '../core/metrics.js';
import type { MembershipAnswer } from '../core/policy.js';
import { isValidTeamId } from '../core/scope.js';
import type { DirectorySource } from './directory-source.js';

export interface MembershipSource {
  teamsOf(user: string): Promise<MembershipAnswer>;
}

export function directoryMembership(source: DirectorySource): MembershipSource {
  return {
    async teamsOf(user) {
      const entry = source.directory.users.get(user);
      return entry === undefined ? { status: 'unknown-user' } : { status: 'ok', teams: entry.teams };
    },
  };
}

export function httpMembership(baseUrl: string, timeoutMs: number): MembershipSource {
  return {
    async teamsOf(user) {
      const url = `${baseUrl}/users/${encodeURIComponent(user)}/teams`;
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await request(url, { method: 'GET', signal, headers: { accept: 'application/json' } });
        const text = await res.body.text();
        if (res.statusCode === 404) return { status: 'unknown-user' };
        if (res.statusCode !== 200) return { status: 'error', error: `membership service answered HTTP ${res.statusCode}` };
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          return { status: 'error', error: 'membership service answered a body that is not JSON' };
        }
        const teams = (body as { teams?: unknown } | null)?.teams;
        if (!Array.isArray(teams) || !teams.every((t) => typeof t === 'string' && isValidTeamId(t))) {
          return { status: 'error', error: 'membership service answered without a "teams" array of team ids' };
        }
        return { status: 'ok', teams: teams as string[] };
      } catch (err) {
        if (signal.aborted) return { status: 'error', error: `membership service did not answer within ${timeoutMs} ms` };
        return { status: 'error', error: `membership service unreachable: ${err instanceof Error ? err.message : String(err)}` };
      }
    },
  };
}

/** Counts and times every lookup of `source` (a throw counts as an error and is passed on). */
export function meteredMembership(source: MembershipSource, kind: (typeof MEMBERSHIP_SOURCES)[number], metrics: MetricsRecorder): MembershipSource {
  const record = (started: number, result: 'ok' | 'unknown_user' | 'error') => {
    metrics.observe(CONTROL_PLANE_METRICS.membershipDuration, { source: kind }, (performance.now() - started) / 1000);
    metrics.inc(CONTROL_PLANE_METRICS.membershipLookups, { source: kind, result });
  };
  return {
    async teamsOf(user) {
      const started = performance.now();
      try {
        const answer = await source.teamsOf(user);
        record(started, answer.status === 'unknown-user' ? 'unknown_user' : answer.status);
        return answer;
      } catch (err) {
        record(started, 'error');
        throw err;
      }
    },
  };
}
