// Plan threshold: all loadable scopes when their total size is within the
// prefetch threshold (under and exactly at), else account + bound team +
// mounted teams (over), with mounted teams kept.

import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { buildPlan, comparePaths, findFile, formatKnownScopes, planVersion, scopeVersion, selectScopes, snapshotScope, type PlanFile } from '../src/core/session/plan.js';

const file = (path: string, size: number, sha = path): PlanFile => ({ path, size, mtimeMs: 1, sha256: sha.padEnd(64, '0') });

const account = snapshotScope('account', [file('DUTY.md', 100)]);
const payments = snapshotScope('team_payments', [file('DUTY.md', 200), file('runbooks/db.md', 300)]);
const search = snapshotScope('team_search', [file('DUTY.md', 400)]);
const storage = snapshotScope('team_storage', [file('DUTY.md', 500)]);
const loadable = [storage, search, payments, account];
const total = 100 + 500 + 400 + 500;

const names = (scopes: readonly { scope: string }[]) => scopes.map((s) => s.scope);

describe('plan threshold', () => {
  it('under the threshold: every loadable scope, sorted account first', () => {
    const plan = buildPlan({ sessionId: 's', threshold: total + 1, loadable, boundTeam: 'payments', mounted: [] });
    expect(plan.mode).toBe('all-loadable');
    expect(names(plan.scopes)).toEqual(['account', 'team_payments', 'team_search', 'team_storage']);
  });

  it('exactly at the threshold: still every loadable scope', () => {
    const plan = buildPlan({ sessionId: 's', threshold: total, loadable, boundTeam: 'payments', mounted: [] });
    expect(plan.mode).toBe('all-loadable');
    expect(plan.scopes).toHaveLength(4);
  });

  it('over the threshold: account and bound team only', () => {
    const plan = buildPlan({ sessionId: 's', threshold: total - 1, loadable, boundTeam: 'payments', mounted: [] });
    expect(plan.mode).toBe('bound-and-mounted');
    expect(names(plan.scopes)).toEqual(['account', 'team_payments']);
  });

  it('over the threshold: mounted teams are kept', () => {
    const plan = buildPlan({ sessionId: 's', threshold: 0, loadable, boundTeam: 'payments', mounted: ['storage'] });
    expect(names(plan.scopes)).toEqual(['account', 'team_payments', 'team_storage']);
    expect(plan.mounted).toEqual(['storage']);
  });

  it('over the threshold without a bound team: account plus mounted teams', () => {
    const plan = buildPlan({ sessionId: 's', threshold: 0, loadable, mounted: ['search'] });
    expect(names(plan.scopes)).toEqual(['account', 'team_search']);
  });

  it('over the threshold without a bound team: no team is kept for it, not even one named "undefined"', () => {
    const odd = snapshotScope('team_undefined', [file('DUTY.md', 10)]);
    const input = { sessionId: 's', threshold: 0, loadable: [...loadable, odd], mounted: [] };
    expect(names(selectScopes(input).scopes)).toEqual(['account']);
  });

  it('never materialises a mounted team that is not loadable', () => {
    const plan = buildPlan({ sessionId: 's', threshold: 0, loadable: [account, payments], boundTeam: 'payments', mounted: ['search'] });
    expect(names(plan.scopes)).toEqual(['account', 'team_payments']);
  });

  it('selectScopes agrees with buildPlan', () => {
    const input = { sessionId: 's', threshold: 10, loadable, boundTeam: 'payments', mounted: ['search'] };
    expect(names(selectScopes(input).scopes)).toEqual(names(buildPlan(input).scopes));
  });
});

describe('versions', () => {
  it('a scope version changes iff a (path, sha256) changes, independent of order', () => {
    const a = [file('a', 1, 'x'), file('b', 1, 'y')];
    expect(scopeVersion(a)).toBe(scopeVersion([...a].reverse()));
    expect(scopeVersion(a)).not.toBe(scopeVersion([file('a', 1, 'x'), file('b', 1, 'z')]));
    expect(scopeVersion(a)).not.toBe(scopeVersion([file('a', 1, 'x')]));
  });

  it('the plan version changes with content, mode and mounted teams', () => {
    const base = { sessionId: 's', threshold: 0, loadable, boundTeam: 'payments', mounted: [] as string[] };
    const v = buildPlan(base).version;
    expect(buildPlan(base).version).toBe(v);
    expect(buildPlan({ ...base, mounted: ['search'] }).version).not.toBe(v);
    expect(buildPlan({ ...base, threshold: total }).version).not.toBe(v);
    const edited = snapshotScope('team_payments', [file('DUTY.md', 200, 'changed'), file('runbooks/db.md', 300)]);
    expect(buildPlan({ ...base, loadable: [account, edited, search, storage] }).version).not.toBe(v);
  });

  it('snapshots sort files by path and total their sizes', () => {
    const s = snapshotScope('team_x', [file('b', 2), file('a', 3)]);
    expect(s.files.map((f) => f.path)).toEqual(['a', 'b']);
    expect(s.totalBytes).toBe(5);
  });
});

// Versions are compared across processes and releases (a daemon's ETag
// against any replica's, a publication's index against its name), so their
// text is a format: each is the sha256 written out here.
describe('version formats', () => {
  const sha = (text: string) => createHash('sha256').update(text).digest('hex');

  it('a scope version is the sha256 of "path NUL sha256 LF" per file, in path order', () => {
    const files = [file('b.md', 1, 'y'), file('a.md', 1, 'x')];
    expect(scopeVersion(files)).toBe(sha(`a.md\0${'x'.padEnd(64, '0')}\nb.md\0${'y'.padEnd(64, '0')}\n`));
    expect(scopeVersion([])).toBe(sha(''));
  });

  it('the same for a scope of many files, whatever pieces it is hashed in', () => {
    const many = Array.from({ length: 3000 }, (_, i) => file(`runbooks/${String(i).padStart(5, '0')}-${'x'.repeat(40)}.md`, 1, String(i)));
    const text = many.map((f) => `${f.path}\0${f.sha256}\n`).join('');
    expect(text.length).toBeGreaterThan(3 * 64 * 1024);
    expect(scopeVersion(many)).toBe(sha(text));
  });

  it('a plan version is the sha256 of the mode, each scope, and the mounted teams', () => {
    const scopes = [{ scope: 'account', version: 'a'.repeat(64) }, { scope: 'team_x', version: 'b'.repeat(64) }];
    expect(planVersion('bound-and-mounted', scopes, ['x', 'y'])).toBe(
      sha(`bound-and-mounted\naccount\0${'a'.repeat(64)}\nteam_x\0${'b'.repeat(64)}\nmounted\0x,y\n`),
    );
    expect(planVersion('all-loadable', [], [])).toBe(sha('all-loadable\nmounted\0\n'));
  });

  it('paths compare by UTF-16 code unit, equal ones as 0 (how a duplicate in an index is found)', () => {
    expect([comparePaths('a', 'b'), comparePaths('b', 'a'), comparePaths('a', 'a')]).toEqual([-1, 1, 0]);
    expect(comparePaths('Z', 'a')).toBe(-1);
    expect(comparePaths('a/b', 'a.b')).toBe(1);
  });

  it('known scopes go on the wire as scope:first-16-hex-digits, comma-separated', () => {
    expect(formatKnownScopes([{ scope: 'account', version: '0123456789abcdef'.repeat(4) }, { scope: 'team_x', version: 'f'.repeat(64) }])).toBe(
      'account:0123456789abcdef,team_x:ffffffffffffffff',
    );
    expect(formatKnownScopes([])).toBe('');
  });
});

describe('findFile', () => {
  it('finds every file of a snapshot, and nothing between, before or after them', () => {
    for (const n of [0, 1, 2, 7, 64]) {
      const s = snapshotScope('team_x', Array.from({ length: n }, (_, i) => file(`f${String(2 * i + 1).padStart(3, '0')}`, 1)));
      for (let i = 0; i < n; i++) expect(findFile(s, `f${String(2 * i + 1).padStart(3, '0')}`)?.path).toBe(`f${String(2 * i + 1).padStart(3, '0')}`);
      for (let i = 0; i <= n; i++) expect(findFile(s, `f${String(2 * i).padStart(3, '0')}`)).toBeUndefined();
      expect(findFile(s, 'zzz')).toBeUndefined();
    }
    expect(findFile(undefined, 'DUTY.md')).toBeUndefined();
  });
});
