// The registry at the edge: tallied histograms render as real histograms
// (cumulative buckets, sum, count) that a Prometheus parser reads back;
// running totals exported with setTotal never go down; a label value outside
// its closed set is refused, so a path or name cannot leak through a cast.

import { describe, expect, it } from 'vitest';
import { DAEMON_METRICS as D, LATENCY_BUCKETS } from '../src/core/metrics.js';
import { FuseOpMeter } from '../src/daemon/fuse/fuse-op-meter.js';
import { readActivity } from '../src/daemon/socket/activity.js';
import { PrometheusMetrics } from '../src/metrics/prometheus-metrics.js';
import { parseExposition, value } from './helpers/metrics-scrape.js';

describe('PrometheusMetrics', () => {
  it('renders a tallied histogram a parser reads back', async () => {
    const m = new PrometheusMetrics(Object.values(D), { processMetrics: false, tallied: [D.fuseDuration] });
    const meter = new FuseOpMeter();
    const now = performance.now();
    meter.done('open', now, 0);
    meter.done('open', now - 30, -2); // 30 ms ago, ENOENT
    meter.done('getattr', now, 0);
    m.beforeScrape(() => meter.exportTo(m));
    const s = await parseExposition(await m.text());
    expect(value(s, D.fuseOps.name, { op: 'open' })).toBe(2);
    expect(value(s, D.fuseOps.name, { op: 'open', result: 'ENOENT' })).toBe(1);
    expect(value(s, D.fuseDuration.name, { op: 'open' })).toBe(2);
    const open = s[D.fuseDuration.name]?.data.find((d) => d.labels['op'] === 'open') as { buckets: Record<string, number>; sum: number; count: number };
    expect(open.count).toBe(2);
    expect(open.sum).toBeGreaterThan(0.029);
    expect(open.buckets['0.01']).toBe(1);
    expect(open.buckets['0.05']).toBe(2);
    expect(open.buckets['+Inf']).toBe(2);
    expect(Object.keys(open.buckets)).toHaveLength(LATENCY_BUCKETS.length + 1);
    // Scraping again changes nothing; more operations add up.
    meter.done('open', performance.now(), 0);
    const again = await parseExposition(await m.text());
    expect(value(again, D.fuseOps.name, { op: 'open' })).toBe(3);
    expect(() => m.observe(D.fuseDuration, { op: 'open' }, 1)).toThrow(/tallied/);
  });

  it('a status answer collects the metrics once', async () => {
    const m = new PrometheusMetrics(Object.values(D), { processMetrics: false, tallied: [D.fuseDuration] });
    const meter = new FuseOpMeter();
    meter.done('open', performance.now(), 0);
    let collections = 0;
    m.beforeScrape(() => {
      collections++;
      meter.exportTo(m);
    });
    const activity = await readActivity(m, Date.now());
    expect(collections).toBe(1);
    expect(activity.operations.find((o) => o.op === 'open')?.count).toBe(1);
    await m.text();
    expect(collections).toBe(2);
  });

  it('keeps exported totals monotonic and refuses labels outside their set', async () => {
    const m = new PrometheusMetrics(Object.values(D), { processMetrics: false });
    m.setTotal(D.grants, { result: 'asked' }, 5);
    m.setTotal(D.grants, { result: 'asked' }, 3);
    m.setTotal(D.grants, { result: 'asked' }, 7);
    expect(value(await parseExposition(await m.text()), D.grants.name, { result: 'asked' })).toBe(7);
    const leaky = { result: 'team_payments/DUTY.md' } as unknown as { result: 'asked' };
    expect(() => m.inc(D.grants, leaky)).toThrow('label result cannot be "team_payments/DUTY.md"');
  });
});
