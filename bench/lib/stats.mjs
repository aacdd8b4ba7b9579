// Small statistics for bench samples: medians for the table, nearest-rank
// percentiles for latency distributions. Pure functions.

export function sorted(xs) {
  return [...xs].sort((a, b) => a - b);
}

export function median(xs) {
  if (xs.length === 0) return null;
  const s = sorted(xs);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Nearest-rank percentile, p in (0, 100]. */
export function percentile(xs, p) {
  if (xs.length === 0) return null;
  const s = sorted(xs);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[rank - 1];
}

/** Summary kept in the JSON: every sample plus median/min/max. */
export function summarize(samples) {
  if (samples.length === 0) return { n: 0, median: null, min: null, max: null, samples: [] };
  const s = sorted(samples);
  return { n: s.length, median: median(s), min: s[0], max: s[s.length - 1], samples: samples.map(round3) };
}

export function latencySummary(samples) {
  return {
    n: samples.length,
    p50: round3(percentile(samples, 50)),
    p90: round3(percentile(samples, 90)),
    p99: round3(percentile(samples, 99)),
    max: round3(percentile(samples, 100)),
  };
}

export function round3(x) {
  return x === null || x === undefined ? x : Math.round(x * 1000) / 1000;
}
