// The alert rules in deploy/prometheus/ are code: promtool checks them and
// runs their unit tests, every metric and label value they select is one the
// project exports (core/metrics.ts), and docs/OPERATIONS.md lists exactly
// the alerts the file holds. A renamed metric or label value then fails here
// instead of leaving an alert that never fires again.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALL_METRICS, type MetricSpec } from '../src/core/metrics.js';
import { REPO_ROOT } from './helpers/control-plane.js';
import { suiteNeeding } from './helpers/mount.js';

const RULES_DIR = join(REPO_ROOT, 'deploy', 'prometheus');
const RULES = join(RULES_DIR, 'knowledgefs-alerts.yaml');

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
}

/** The rules file's alerts and expressions (inline or `|` blocks); promtool checks the rest of the YAML. */
export function alertRules(text: string = readFileSync(RULES, 'utf8')): AlertRule[] {
  const out: AlertRule[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const name = /^\s*- alert: (\w+)\s*$/.exec(lines[i] as string)?.[1];
    if (name === undefined) continue;
    let j = i + 1;
    while (j < lines.length && !/^\s*expr:/.test(lines[j] as string)) j++;
    const head = /^(\s*)expr:\s*(.*)$/.exec(lines[j] ?? '');
    if (head === null) throw new Error(`alert ${name} has no expr`);
    let expr = head[2] as string;
    if (expr === '|') {
      const indent = (head[1] as string).length;
      const body: string[] = [];
      for (j++; j < lines.length; j++) {
        const line = lines[j] as string;
        if (line.trim() !== '' && line.length - line.trimStart().length <= indent) break;
        body.push(line.trim());
      }
      expr = body.join(' ').trim();
    }
    out.push({ alert: name, expr });
  }
  return out;
}

const SUFFIXES = ['_bucket', '_sum', '_count'];
function specOf(series: string): MetricSpec | undefined {
  return ALL_METRICS.find((m) => m.name === series || (m.type === 'histogram' && SUFFIXES.some((s) => `${m.name}${s}` === series)));
}

/** Every `name{matchers}` selector in an expression, with its exact-match labels. */
function selectors(expr: string): { series: string; exact: Record<string, string> }[] {
  return [...expr.matchAll(/\b([a-z_]+)\{([^}]*)\}/g)].map((m) => {
    const exact: Record<string, string> = {};
    for (const matcher of (m[2] as string).matchAll(/(\w+)\s*=\s*"([^"]*)"/g)) {
      if (!/[!=~]$/.test((m[2] as string).slice(0, matcher.index).trimEnd())) exact[matcher[1] as string] = matcher[2] as string;
    }
    for (const matcher of (m[2] as string).matchAll(/(\w+)\s*(!=|=~|!~)/g)) delete exact[matcher[1] as string];
    return { series: m[1] as string, exact };
  });
}

const TARGET_LABELS = new Set(['job', 'instance']);
const JOBS = new Set(['knowledgefs', 'knowledgefs-mount']);

describe('deploy/prometheus/knowledgefs-alerts.yaml', () => {
  const rules = alertRules();

  it('holds the alerts, each once', () => {
    expect(rules.length).toBeGreaterThanOrEqual(10);
    expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
  });

  it('selects only metrics the project exports, with label values they can take', () => {
    for (const rule of rules) {
      const found = selectors(rule.expr);
      expect(found.length, `${rule.alert} selects no series`).toBeGreaterThan(0);
      for (const { series, exact } of found) {
        if (series === 'up') continue;
        const spec = specOf(series);
        expect(spec, `${rule.alert}: ${series} is not exported`).toBeDefined();
        for (const [label, v] of Object.entries(exact)) {
          if (TARGET_LABELS.has(label)) {
            if (label === 'job') expect(JOBS.has(v), `${rule.alert}: job "${v}"`).toBe(true);
            continue;
          }
          const allowed = (spec?.labels as Record<string, readonly string[]>)[label];
          expect(allowed, `${rule.alert}: ${series} has no label ${label}`).toBeDefined();
          expect(allowed, `${rule.alert}: ${series}{${label}="${v}"} never exists`).toContain(v);
        }
      }
    }
  });

  it('a control-plane metric is selected under job "knowledgefs", a daemon metric under "knowledgefs-mount"', () => {
    const daemonNames = new Set(ALL_METRICS.filter((m) => /fuse|content_cache|fetch|read_ahead|prefetch|grants|syncs|plan_age|plan_files/.test(m.name)).map((m) => m.name));
    for (const rule of rules) {
      for (const { series, exact } of selectors(rule.expr)) {
        const spec = specOf(series);
        if (spec === undefined) continue;
        expect(exact.job, `${rule.alert}: ${series} without a job`).toBe(daemonNames.has(spec.name) ? 'knowledgefs-mount' : 'knowledgefs');
      }
    }
  });

  it('docs/OPERATIONS.md "Alerts" names exactly these alerts', () => {
    const doc = readFileSync(join(REPO_ROOT, 'docs', 'OPERATIONS.md'), 'utf8');
    const start = doc.indexOf('\n### Alerts');
    const section = doc.slice(start, doc.indexOf('\n## ', start + 5));
    const documented = [...section.matchAll(/^\| `(Knowledgefs\w+)` \|/gm)].map((m) => m[1]);
    expect([...documented].sort()).toEqual(rules.map((r) => r.alert).sort());
  });
});

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
suiteNeeding('promtool', promtool.status === 0 ? undefined : 'promtool is not installed (Debian: apt-get install prometheus)', 'promtool', () => {
  it('check rules: the file is valid', () => {
    const r = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toMatch(/SUCCESS: \d+ rules found/);
    expect(r.status).toBe(0);
  });

  it('test rules: every unit test passes', () => {
    const r = spawnSync('promtool', ['test', 'rules', 'knowledgefs-alerts.test.yaml'], { cwd: RULES_DIR, encoding: 'utf8' });
    expect(r.stdout + r.stderr).toContain('SUCCESS');
    expect(r.status).toBe(0);
  });
});
