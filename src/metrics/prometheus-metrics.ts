// The one place prom-client is used: a registry holding the metrics named in
// core/metrics.ts, recorded through `MetricsRecorder`, plus Node's process
// metrics (process_*, nodejs_*). Each control plane or mount daemon owns one
// (no global registry), so two in one process (tests) never mix numbers.
//
// Gauges that describe state (sessions, files, cache bytes, plan age) are
// read when scraped: parts register a `beforeScrape` callback that sets them,
// instead of keeping a second copy of the state up to date.
// Counters kept by the parts as plain numbers (`fetches++`) are exported the
// same way, through `setTotal`.
//
// Counters whose label combinations are few are created at zero, so `rate()`
// has a series to work on before the first event.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import { KnowledgeError } from '../core/errors.js';
import type { CounterSpec, GaugeSpec, HistogramSpec, LabelsOf, MetricSpec, MetricsRecorder } from '../core/metrics.js';

/** Counters with at most this many label combinations start every one at zero. */
const PRECREATE_LIMIT = 128;

export interface MetricValueSample {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
  /** Histograms: `_bucket`, `_sum`, `_count`; else empty. */
  readonly suffix: string;
}

/** A histogram series counted elsewhere: observations per bucket (not cumulative; the last is +Inf) and their sum. */
export interface HistogramTally {
  readonly counts: ArrayLike<number>;
  readonly sum: number;
}

export class PrometheusMetrics implements MetricsRecorder {
  readonly registry = new Registry();
  private readonly metrics = new Map<string, { spec: MetricSpec; metric: Metric<string> }>();
  private readonly scrapeHooks: (() => void)[] = [];
  private readonly totals = new Map<string, number>();
  /** Histograms fed by `setHistogram`: name → series key → labels and tally. */
  private readonly tallied = new Map<string, Map<string, { labels: Record<string, string>; tally: HistogramTally }>>();

  /**
   * `tallied`: histograms whose observations a hot path counts itself (one
   * array increment instead of prom-client's label hashing per call) and
   * hands over with `setHistogram` before each scrape.
   */
  constructor(specs: readonly MetricSpec[], options: { processMetrics?: boolean; tallied?: readonly HistogramSpec[] } = {}) {
    const tallied = new Set((options.tallied ?? []).map((t) => t.name));
    for (const spec of specs) {
      if (spec.type === 'histogram' && tallied.has(spec.name)) this.registerTallied(spec);
      else this.register(spec);
    }
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** Sets state gauges right before each scrape or status snapshot. */
  beforeScrape(hook: () => void): void {
    this.scrapeHooks.push(hook);
  }

  inc<S extends CounterSpec>(spec: S, labels: LabelsOf<S>, by = 1): void {
    (this.get(spec, labels) as Counter<string>).inc(labels as Record<string, string>, by);
  }

  /**
   * A counter kept elsewhere as a plain running total (a part's own
   * `requests++`): exports that total. Call it from `beforeScrape`.
   */
  setTotal<S extends CounterSpec>(spec: S, labels: LabelsOf<S>, total: number): void {
    const key = `${spec.name}${JSON.stringify(labels)}`;
    const last = this.totals.get(key) ?? 0;
    if (total > last) this.inc(spec, labels, total - last);
    this.totals.set(key, Math.max(last, total));
  }

  /** The current tally of one series of a `tallied` histogram. Call it from `beforeScrape`. */
  setHistogram<S extends HistogramSpec>(spec: S, labels: LabelsOf<S>, tally: HistogramTally): void {
    const series = this.tallied.get(spec.name);
    if (series === undefined) throw new KnowledgeError('internal', `metric ${spec.name} is not a tallied histogram`);
    this.checkLabels(spec, labels as Record<string, string>);
    series.set(JSON.stringify(labels), { labels: { ...(labels as Record<string, string>) }, tally });
  }

  add<S extends GaugeSpec>(spec: S, labels: LabelsOf<S>, delta: number): void {
    (this.get(spec, labels) as Gauge<string>).inc(labels as Record<string, string>, delta);
  }

  set<S extends GaugeSpec>(spec: S, labels: LabelsOf<S>, value: number): void {
    (this.get(spec, labels) as Gauge<string>).set(labels as Record<string, string>, value);
  }

  observe<S extends HistogramSpec>(spec: S, labels: LabelsOf<S>, value: number): void {
    if (this.tallied.has(spec.name)) throw new KnowledgeError('internal', `metric ${spec.name} is tallied: use setHistogram`);
    (this.get(spec, labels) as Histogram<string>).observe(labels as Record<string, string>, value);
  }

  /** The Prometheus text exposition. */
  async text(): Promise<string> {
    this.runHooks();
    return this.registry.metrics();
  }

  /** One metric's current samples. */
  async samples(spec: MetricSpec): Promise<MetricValueSample[]> {
    const [samples] = await this.snapshot([spec]);
    return samples ?? [];
  }

  /**
   * Several metrics' current samples, from one collection (the hooks run
   * once), so they are consistent with each other: `knowledgefs status`.
   */
  async snapshot(specs: readonly MetricSpec[]): Promise<MetricValueSample[][]> {
    this.runHooks();
    return Promise.all(specs.map((spec) => this.current(spec)));
  }

  private async current(spec: MetricSpec): Promise<MetricValueSample[]> {
    const entry = this.metrics.get(spec.name);
    if (entry === undefined) return [];
    const data = await entry.metric.get();
    return data.values.map((v) => ({
      labels: v.labels as Record<string, string | number>,
      value: v.value,
      suffix: (v as { metricName?: string }).metricName?.slice(spec.name.length) ?? '',
    }));
  }

  private runHooks(): void {
    for (const hook of this.scrapeHooks) hook();
  }

  private register(spec: MetricSpec): void {
    const base = { name: spec.name, help: spec.help, labelNames: Object.keys(spec.labels), registers: [this.registry] };
    let metric: Metric<string>;
    if (spec.type === 'counter') metric = new Counter(base);
    else if (spec.type === 'gauge') metric = new Gauge(base);
    else metric = new Histogram({ ...base, buckets: [...spec.buckets] });
    this.metrics.set(spec.name, { spec, metric });
    // prom-client starts a metric without labels at zero itself.
    if (spec.type === 'counter') {
      const combos = labelCombinations(spec.labels);
      if (combos.length <= PRECREATE_LIMIT) for (const labels of combos) (metric as Counter<string>).inc(labels, 0);
    }
  }

  private get(spec: MetricSpec, labels: Readonly<Record<string, string>>): Metric<string> {
    const entry = this.metrics.get(spec.name);
    if (entry === undefined) throw new KnowledgeError('internal', `metric ${spec.name} is not registered`);
    this.checkLabels(entry.spec, labels);
    return entry.metric;
  }

  /** The types allow only the listed values; this keeps a cast from leaking a name or path. */
  private checkLabels(spec: MetricSpec, labels: Readonly<Record<string, string>>): void {
    for (const [name, value] of Object.entries(labels)) {
      if (!spec.labels[name]?.includes(value)) throw new KnowledgeError('internal', `metric ${spec.name}: label ${name} cannot be "${value}"`);
    }
  }

  /** A histogram rendered from tallies: the shape prom-client's own `get()` returns, so text and samples work alike. */
  private registerTallied(spec: HistogramSpec): void {
    const series = new Map<string, { labels: Record<string, string>; tally: HistogramTally }>();
    this.tallied.set(spec.name, series);
    const bounds = [...spec.buckets.map(String), '+Inf'];
    const metric = {
      name: spec.name,
      help: spec.help,
      type: 'histogram',
      aggregator: 'sum',
      reset: () => series.clear(),
      get: async () => {
        const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
        for (const { labels, tally } of series.values()) {
          let cumulative = 0;
          bounds.forEach((le, i) => {
            cumulative += tally.counts[i] ?? 0;
            values.push({ labels: { ...labels, le }, value: cumulative, metricName: `${spec.name}_bucket` });
          });
          values.push({ labels, value: tally.sum, metricName: `${spec.name}_sum` });
          values.push({ labels, value: cumulative, metricName: `${spec.name}_count` });
        }
        return { name: spec.name, help: spec.help, type: 'histogram', aggregator: 'sum', values };
      },
    };
    this.registry.registerMetric(metric as unknown as Metric<string>);
    this.metrics.set(spec.name, { spec, metric: metric as unknown as Metric<string> });
  }
}

function labelCombinations(labels: Readonly<Record<string, readonly string[]>>): Record<string, string>[] {
  let combos: Record<string, string>[] = [{}];
  for (const [name, values] of Object.entries(labels)) {
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [name]: v })));
  }
  return combos;
}
