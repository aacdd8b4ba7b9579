// The pure parts of core/metrics.ts, core/text/listen-address.ts and the router's
// route templates: route templates never echo a path, status classes,
// decision outcomes, every label value a short name, and HOST:PORT parsing
// with clear errors.

import { describe, expect, it } from 'vitest';
import { parseListenAddress } from '../src/core/text/listen-address.js';
import { constants } from 'node:os';
import { ALL_METRICS, decisionOutcome, fuseResultOf, histogramQuantile, statusClass } from '../src/core/metrics.js';
import { httpRouteOf } from '../src/server/http/router.js';

const q = (s = '') => new URLSearchParams(s);

/** Every label value a metric may take must be a short name: no slashes, spaces or dots. */
function labelValueProblem(value: string): string | null {
  return /^[A-Za-z0-9_]{1,32}$/.test(value) ? null : `label value "${value}" is not a short name`;
}

describe('route templates', () => {
  it('maps each API route to its template and everything else to other', () => {
    expect(httpRouteOf('GET', '/v1/files/team_search/secret/plan.md', q())).toBe('files');
    expect(httpRouteOf('HEAD', '/v1/files/account/x', q())).toBe('files');
    expect(httpRouteOf('GET', '/v1/grants/team_x', q())).toBe('grants');
    expect(httpRouteOf('GET', '/v1/plan', q('threshold=1'))).toBe('plan');
    expect(httpRouteOf('GET', '/v1/plan', q('wait=30'))).toBe('plan_long_poll');
    expect(httpRouteOf('DELETE', '/v1/admin/sessions/s_123', q())).toBe('admin_session_revoke');
    expect(httpRouteOf('POST', '/v1/admin/sessions', q())).toBe('admin_session_create');
    expect(httpRouteOf('GET', '/v1/admin/explain', q('session=s_1'))).toBe('admin_explain');
    expect(httpRouteOf('GET', '/metrics', q())).toBe('metrics');
    expect(httpRouteOf('POST', '/v1/files/account/x', q())).toBe('other');
    expect(httpRouteOf('GET', '/alice/token/kfs_abc', q())).toBe('other');
    expect(httpRouteOf('GET', '/v1/planx', q())).toBe('other');
  });

  it('classes statuses', () => {
    expect([100, 200, 204, 304, 403, 404, 413, 500, 503, 999, 0].map(statusClass)).toEqual(['1xx', '2xx', '2xx', '3xx', '4xx', '4xx', '4xx', '5xx', '5xx', '5xx', '1xx']);
  });

  it('tells a fail-closed denial from a plain one', () => {
    expect(decisionOutcome({ scope: 'account', allowed: true, rule: 'account' })).toBe('allow');
    expect(decisionOutcome({ scope: 'team_x', allowed: false, rule: 'creator-not-member' })).toBe('deny');
    expect(decisionOutcome({ scope: 'team_x', allowed: false, rule: 'creator-unknown' })).toBe('deny');
    expect(decisionOutcome({ scope: 'team_x', allowed: false, rule: 'membership-unavailable', membership: { status: 'error', error: 'down' } })).toBe('fail_closed');
  });
});

describe('FUSE results and latency quantiles', () => {
  it('names the errno an answer stands for', () => {
    const E = constants.errno;
    expect([0, 4096, -E.ENOENT, -E.EIO, -E.EROFS, -E.EACCES, -E.ESTALE, -E.EISDIR].map((c) => fuseResultOf(c, E))).toEqual(['ok', 'ok', 'ENOENT', 'EIO', 'EROFS', 'EACCES', 'ESTALE', 'other_error']);
  });

  it('interpolates within the bucket like histogram_quantile, null without data', () => {
    const b = (pairs: [number, number][]) => pairs.map(([le, count]) => ({ le, count }));
    // 100 observations: 50 ≤ 1, 90 ≤ 2, all ≤ 4.
    const h = b([[1, 50], [2, 90], [4, 100], [Infinity, 100]]);
    expect(histogramQuantile(0.5, h)).toBe(1);
    expect(histogramQuantile(0.7, h)).toBeCloseTo(1.5);
    expect(histogramQuantile(0.95, h)).toBeCloseTo(3);
    expect(histogramQuantile(0.99, b([[1, 0], [Infinity, 10]]))).toBe(1);
    expect(histogramQuantile(0.99, b([[1, 0], [Infinity, 0]]))).toBeNull();
  });
});

describe('metric specs', () => {
  it('are uniquely named knowledgefs_*, with short label names and values', () => {
    const names = ALL_METRICS.map((m) => m.name);
    expect(new Set(names).size).toBe(names.length);
    for (const m of ALL_METRICS) {
      expect(m.name).toMatch(/^knowledgefs_[a-z_]+$/);
      if (m.type === 'counter') expect(m.name).toMatch(/_total$/);
      expect(m.help.length).toBeGreaterThan(10);
      for (const [label, values] of Object.entries(m.labels)) {
        expect(label).toMatch(/^[a-z_]+$/);
        expect(values.length).toBeGreaterThan(0);
        for (const v of values) expect(labelValueProblem(v), `${m.name}{${label}="${v}"}`).toBeNull();
      }
    }
    expect(labelValueProblem('team_x/DUTY.md')).not.toBeNull();
  });
});

describe('HOST:PORT', () => {
  it('parses IPv4, names and bracketed IPv6', () => {
    expect(parseListenAddress('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseListenAddress('metrics.local:9464')).toEqual({ host: 'metrics.local', port: 9464 });
    expect(parseListenAddress('[::1]:9464')).toEqual({ host: '::1', port: 9464 });
  });

  it('names the flag and the expected shape when the value is wrong', () => {
    for (const bad of ['9464', ':9464', '127.0.0.1:', '127.0.0.1:70000', '::1:80', 'host:port']) {
      expect(() => parseListenAddress(bad, '--metrics-listen'), bad).toThrow(`invalid --metrics-listen "${bad}" (expected HOST:PORT`);
    }
  });
});
