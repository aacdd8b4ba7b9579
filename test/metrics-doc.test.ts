// docs/OPERATIONS.md "Metrics" lists exactly the metrics the code exports
// (core/metrics.ts), each with its type, its labels and a dashboard query
// that uses it; and the route label values it names are the code's.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALL_METRICS, HTTP_ROUTES } from '../src/core/metrics.js';
import { REPO_ROOT } from './helpers/control-plane.js';

const doc = readFileSync(join(REPO_ROOT, 'docs', 'OPERATIONS.md'), 'utf8');
const section = doc.slice(doc.indexOf('\n## Metrics\n'), doc.indexOf('\n## ', doc.indexOf('\n## Metrics\n') + 5));

interface Row {
  name: string;
  type: string;
  labels: string[];
  query: string;
}

function rows(): Row[] {
  const out: Row[] = [];
  for (const line of section.split('\n')) {
    const m = /^\| `(knowledgefs_\w+)` \| (\w+) \| ([^|]*) \| [^|]* \| (.*) \|$/.exec(line);
    if (m === null) continue;
    const labels = [...(m[3] ?? '').matchAll(/`(\w+)`/g)].map((l) => l[1] as string);
    out.push({ name: m[1] as string, type: m[2] as string, labels, query: m[4] as string });
  }
  return out;
}

describe('docs/OPERATIONS.md metrics', () => {
  it('lists every exported metric once, and nothing else', () => {
    const documented = rows().map((r) => r.name);
    expect(new Set(documented).size).toBe(documented.length);
    expect([...documented].sort()).toEqual(ALL_METRICS.map((m) => m.name).sort());
  });

  it('gives each its type, labels and a dashboard query that uses it', () => {
    for (const row of rows()) {
      const spec = ALL_METRICS.find((m) => m.name === row.name);
      expect(row.type, row.name).toBe(spec?.type);
      expect(row.labels.sort(), row.name).toEqual(Object.keys(spec?.labels ?? {}).sort());
      expect(row.query, row.name).toContain(row.name);
    }
  });

  it('names the route label values the code uses', () => {
    const routes = /`route` is one of ([^;]*);/.exec(section.replace(/\n/g, ' '))?.[1] ?? '';
    expect([...routes.matchAll(/`(\w+)`/g)].map((m) => m[1])).toEqual([...HTTP_ROUTES]);
  });
});
