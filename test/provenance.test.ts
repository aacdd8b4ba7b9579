// Provenance in the core: a scope's table of records and runs (its version
// follows every part of it, the scope version none), the checks a plan's
// provenance passes on the way in, source URLs from a template, and the
// watermarks `read --cite` writes and `verify-sources` finds.

import { describe, expect, it } from 'vitest';
import { buildScopeProvenance, fileProvenance, parseScopeProvenance, planTag, recordAt, withSource, type ProvenanceRecord } from '../src/core/provenance/provenance.js';
import { ProvenanceLookup } from '../src/core/provenance/provenance-lookup.js';
import { checkSourceTemplate, expandSourceUrl } from '../src/core/provenance/source-url.js';
import { findWatermarks, formatWatermark } from '../src/core/provenance/citation.js';
import { snapshotScope, type PlanFile } from '../src/core/session/plan.js';
import { fileTable } from '../src/core/session/plan-columns.js';

const A: ProvenanceRecord = { publishedAt: '2026-01-02T03:04:05.000Z', knowledgefsVersion: '0.1.0', commit: 'a'.repeat(40), committedAt: '2026-01-01T00:00:00.000Z' };
const B: ProvenanceRecord = { publishedAt: '2026-01-02T03:04:05.000Z', knowledgefsVersion: '0.1.0' };
const file = (path: string): PlanFile => ({ path, size: 1, mtimeMs: 1, sha256: 'f'.repeat(64) });

describe('scope provenance', () => {
  it('keeps one record per distinct value and runs over the files in order', () => {
    const p = buildScopeProvenance([A, A, B, A]);
    expect(p.records).toEqual([A, B]);
    expect(p.runs).toEqual([0, 2, 1, 1, 0, 1]);
    expect([0, 1, 2, 3, 4].map((i) => recordAt(p, i))).toEqual([A, A, B, A, undefined]);
  });

  it('has a version of its own that follows records, runs and source, and leaves the scope version alone', () => {
    const files = [file('a.md'), file('b.md')];
    const before = snapshotScope('account', files);
    const p1 = buildScopeProvenance([A, A]);
    const p2 = buildScopeProvenance([A, B]);
    expect(p1.version).not.toBe(p2.version);
    expect(withSource(p1, { template: 'https://x/{path}', prefix: '' }).version).not.toBe(p1.version);
    expect(snapshotScope('account', files).version).toBe(before.version);
    expect(planTag('v', undefined)).toBe('v');
    expect(planTag('v', p1.version)).toBe(`v+${p1.version.slice(0, 16)}`);
  });

  it('is parsed back only whole: runs covering the files, known records, a matching version', () => {
    const p = withSource(buildScopeProvenance([A, B]), { template: 'https://git.example/kb/blob/{commit}/{path}', prefix: 'kb/' });
    const wire = JSON.parse(JSON.stringify(p)) as Record<string, unknown>;
    expect(parseScopeProvenance(wire, 2)).toEqual(p);
    expect(parseScopeProvenance(wire, 3)).toBe('"runs" cover 2 files, the scope has 3');
    expect(parseScopeProvenance({ ...wire, runs: [5, 2] }, 2)).toBe('"runs" names a record that does not exist');
    expect(parseScopeProvenance({ ...wire, version: '0'.repeat(64) }, 2)).toBe('its version does not match its records');
    expect(parseScopeProvenance({ ...wire, records: [{ ...A, commit: 'nope' }, B] }, 2)).toMatch(/commit/);
    expect(parseScopeProvenance({ ...wire, source: { template: 'https://x/{author}', prefix: '' } }, 2)).toMatch(/unknown placeholder \{author\}/);
  });

  it('is looked up by path through the plan\'s file table', () => {
    const snapshot = snapshotScope('team_payments', [file('DUTY.md'), file('runbooks/a.md'), file('runbooks/b.md')]);
    const p = withSource(buildScopeProvenance([A, B, A]), { template: 'https://git.example/{commit}/{path}', prefix: 'teams/payments/' });
    const lookup = ProvenanceLookup.of(p, fileTable(snapshot));
    expect(lookup.recordOf('runbooks/a.md')).toEqual(B);
    expect(lookup.fileProvenance('team_payments', 'runbooks/b.md')).toEqual({
      publishedAt: A.publishedAt,
      knowledgefsVersion: '0.1.0',
      commit: A.commit,
      committedAt: A.committedAt,
      source: `https://git.example/${A.commit as string}/teams/payments/runbooks/b.md`,
    });
    // No commit: a template that needs one gives no URL.
    expect(fileProvenance(B, p, 'team_payments', 'runbooks/a.md').source).toBeNull();
  });
});

describe('source URLs', () => {
  it('rejects unknown placeholders, stray braces and spaces, naming what is wrong', () => {
    expect(checkSourceTemplate('https://git.example/kb/blob/{commit}/{path}')).toBeNull();
    expect(checkSourceTemplate('https://x/{author}')).toMatch(/unknown placeholder \{author\}/);
    expect(checkSourceTemplate('https://x/{path')).toMatch(/not part of a placeholder/);
    expect(checkSourceTemplate('https://x/ {path}')).toMatch(/no spaces/);
  });

  it('percent-encodes each path segment, keeping the slashes', () => {
    const url = expandSourceUrl({ template: 'https://x/{scope}/{file}?p={path}', prefix: 'a b/' }, { commit: undefined, scope: 'account', file: 'dir/x#?.md' });
    expect(url).toBe('https://x/account/dir/x%23%3F.md?p=a%20b/dir/x%23%3F.md');
  });
});

describe('watermarks', () => {
  it('round-trip through text, paths with spaces included, and ignore a scope mismatch', () => {
    const mark = formatWatermark('team_payments/runbooks/db failover.md', 'ab'.repeat(32), 'cd'.repeat(32));
    expect(mark).toBe(`[Source: knowledge/team_payments/runbooks/db failover.md sha256:${'ab'.repeat(8)} team_payments@${'cd'.repeat(8)}]`);
    const text = `Answer.\n${mark}\nmore [Source: knowledge/account/x.md sha256:${'1'.repeat(16)} team_a@${'2'.repeat(16)}]`;
    expect(findWatermarks(text)).toEqual([
      { path: 'team_payments/runbooks/db failover.md', scope: 'team_payments', sha256: 'ab'.repeat(8), scopeVersion: 'cd'.repeat(8), text: mark },
    ]);
  });
});
