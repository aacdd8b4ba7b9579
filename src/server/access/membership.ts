// Where a personal session's creator's teams come from: directory.json
// (embedded default) or an external HTTP service (`--membership-url`).
//
// HTTP contract: GET <url>/users/<user>/teams → 200 {"teams": ["<id>", ...]};
// 404 = unknown user; any other status, a bad body, a body over
// MAX_MEMBERSHIP_BODY_BYTES or a timeout = error, which CanLoadScope turns
// into a deny for other teams (fail closed). The status is looked at before
// the body: a body is only read for a 200, and never more than the cap (a
// service answering hundreds of megabytes cannot grow the control plane).
// Never cached here: the control plane asks once per request (see
// createScopeEvaluator).

import { request } from 'undici';
import { performance } from 'node:perf_hooks';
import { CONTROL_PLANE_METRICS, type MEMBERSHIP_SOURCES, type MetricsRecorder } from '../../core/metrics.js';
import { userNameProblem } from '../../core/user-name.js';
import type { MembershipAnswer } from '../../core/session/policy.js';
import { isValidTeamId } from '../../core/scope.js';
import type { DirectoryView } from '../packs/pack-source.js';

export interface MembershipSource {
  teamsOf(user: string): Promise<MembershipAnswer>;
}

export function directoryMembership(source: DirectoryView): MembershipSource {
  return {
    async teamsOf(user) {
      const entry = source.directory.users.get(user);
      return entry === undefined ? { status: 'unknown-user' } : { status: 'ok', teams: entry.teams };
    },
  };
}

/** A user's teams fit in far less; anything bigger is treated as a failure. */
export const MAX_MEMBERSHIP_BODY_BYTES = 1024 * 1024;

type Body = AsyncIterable<Buffer> & { destroy(): unknown; on(event: 'error', listener: () => void): unknown };

/** Stops reading `body`; the request's timeout firing later must not surface as an unhandled error. */
function discard(body: Body): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** The body as text, or null once it passes `cap` bytes (the rest is not read). */
async function readCapped(body: Body, cap: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.length;
    if (total > cap) {
      discard(body);
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function httpMembership(baseUrl: string, timeoutMs: number): MembershipSource {
  return {
    async teamsOf(user) {
      // Session creation refuses such names; one that got here anyway is never put in the URL.
      const problem = userNameProblem(user);
      if (problem !== undefined) return { status: 'error', error: `user name ${JSON.stringify(user)} ${problem}: not asked of the membership service` };
      const url = `${baseUrl}/users/${encodeURIComponent(user)}/teams`;
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        const res = await request(url, { method: 'GET', signal, headers: { accept: 'application/json' } });
        if (res.statusCode !== 200) {
          discard(res.body);
          if (res.statusCode === 404) return { status: 'unknown-user' };
          return { status: 'error', error: `membership service answered HTTP ${res.statusCode}` };
        }
        const tooLarge = { status: 'error', error: `membership service answered more than ${MAX_MEMBERSHIP_BODY_BYTES} bytes` } as const;
        if (Number(res.headers['content-length'] ?? 0) > MAX_MEMBERSHIP_BODY_BYTES) {
          discard(res.body);
          return tooLarge;
        }
        const text = await readCapped(res.body, MAX_MEMBERSHIP_BODY_BYTES);
        if (text === null) return tooLarge;
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

/**
 * Answers from `source`, each kept for `maxAgeMs`: what a waiting long-poll
 * uses, so recomputing its plan after a change wakes it asks the service
 * again only once the answer is that old (one request's cache, never shared).
 */
export function recheckedMembership(source: MembershipSource, maxAgeMs: number, now: () => number): MembershipSource {
  const answers = new Map<string, { at: number; answer: Promise<MembershipAnswer> }>();
  return {
    teamsOf(user) {
      const kept = answers.get(user);
      if (kept !== undefined && now() - kept.at < maxAgeMs) return kept.answer;
      const answer = source.teamsOf(user);
      answers.set(user, { at: now(), answer });
      return answer;
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
