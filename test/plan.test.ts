// Plan threshold: all loadable scopes when their total size is within the
// prefetch threshold (under and exactly at), else account + bound team +
// mounted teams (over), with mounted teams kept.

import { describe, expect, it } from 'vitest';
import { buildPlan, scopeVersion, selectScopes, snapshotScope, type PlanFile } from '../src/core/session/plan.js';

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
