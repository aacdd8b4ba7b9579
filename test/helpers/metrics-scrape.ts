// Scrapes a Prometheus endpoint and parses the text with a real exposition
// parser (prom2javascript), so a malformed answer fails the test. `value`
// sums the samples of a family matching the given labels, what a PromQL
// `sum(metric{labels})` would show (histograms: their counts).

import { Readable } from 'node:stream';
import { getMetricsFromStream, type PromMetric, type PromMetrics } from 'prom2javascript';

export type Scrape = PromMetrics;

export async function scrape(url: string, token?: string): Promise<Scrape> {
  const res = await fetch(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`scraping ${url}: HTTP ${res.status} ${text.slice(0, 300)}`);
  if (!/^text\/plain; version=0\.0\.4/.test(res.headers.get('content-type') ?? '')) {
    throw new Error(`scraping ${url}: content-type ${res.headers.get('content-type')}`);
  }
  return parseExposition(text);
}

/**
 * prom2javascript rejects NaN samples, which the format allows (prom-client
 * writes `Nan` for a gauge with no data yet, e.g. event-loop lag right after
 * start; Prometheus parses it case-insensitively): those lines are dropped.
 */
export function parseExposition(text: string): Promise<Scrape> {
  const lines = text.split('\n').filter((line) => !/^\w+(\{.*\})?\s+nan$/i.test(line));
  return getMetricsFromStream(Readable.from([lines.join('\n')]));
}

function family(s: Scrape, name: string): PromMetric {
  const f = s[name];
  if (f === undefined) throw new Error(`metric ${name} is not exported`);
  return f;
}

/** Sum of the samples matching `labels` (0 when none); histograms: sum of their counts. */
export function value(s: Scrape, name: string, labels: Readonly<Record<string, string>> = {}): number {
  let total = 0;
  for (const sample of family(s, name).data) {
    if (!Object.entries(labels).every(([k, v]) => sample.labels[k] === v)) continue;
    total += 'value' in sample ? sample.value : (sample.count ?? 0);
  }
  return total;
}

/** Every label value of every sample (histogram `le` bounds excluded), with its metric. */
export function allLabels(s: Scrape): { metric: string; label: string; value: string }[] {
  const out: { metric: string; label: string; value: string }[] = [];
  for (const [metric, f] of Object.entries(s)) {
    for (const sample of f.data) for (const [label, v] of Object.entries(sample.labels)) out.push({ metric, label, value: v });
  }
  return out;
}
