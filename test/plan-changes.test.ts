// Plans as changes, in-process: stubs filled from the tree give exactly the
// full plan's tree; a stub the tree no longer holds at that version falls
// back to one full plan; clients without planChanges get full plans; the sync
// loop applies changed scopes and keeps the rest.

import { describe, expect, it } from 'vitest';
import { KNOWN_VERSION_PREFIX, type KnownScope, type Plan, type PlanChanges } from '../src/core/session/plan.js';
import { Tree } from '../src/core/tree/tree.js';
import type { ControlClient, PlanRequest } from '../src/daemon/control-plane/control-client.js';
import { filesHeld, knownScopes, planSource, resolveWithHeld, type PlanChangesClient } from '../src/daemon/sync/plan-changes.js';
import { SyncLoop } from '../src/daemon/sync/sync-loop.js';
import { checkPlanChanges } from '../src/daemon/control-plane/wire-check.js';
import { FakeControlClient } from './helpers/fake-control-client.js';

/** The fake, answering `known=` the way the control plane does. */
class ChangesClient extends FakeControlClient implements PlanChangesClient {
  readonly changeCalls: KnownScope[][] = [];

  async planChanges(req: PlanRequest, known: readonly KnownScope[]): Promise<PlanChanges | null> {
    this.changeCalls.push([...known]);
    const full = await this.plan(req);
    if (full === null) return null;
    const prefixes = new Map(known.map((k) => [k.scope, k.version.slice(0, KNOWN_VERSION_PREFIX)]));
    return {
      ...full,
      scopes: full.scopes.map((s) =>
        s.version.startsWith(prefixes.get(s.scope) ?? '-') ? { scope: s.scope, version: s.version, totalBytes: s.totalBytes, unchanged: true as const } : s,
      ),
    };
  }
}


function listing(tree: Tree): string[] {
  return [...tree.files()].map((f) => `${f.path} ${f.sha256.slice(0, 8)} ${f.size} ${f.mtimeMs}`).sort();
}

function seeded(): ChangesClient {
  const client = new ChangesClient();
  client.put('account/DUTY.md', '# account');
  client.put('account/runbooks/db.md', 'db');
  client.put('team_a/DUTY.md', '# a');
  client.put('team_a/x/y/z.md', 'deep');
  client.put('team_b/DUTY.md', '# b');
  return client;
}

describe('plan changes', () => {
  it('stubs filled from the tree build the same tree as the full plan', async () => {
    const client = seeded();
    const first = client.currentPlan();
    const tree = Tree.fromPlan(first, undefined);
    client.put('team_b/new.md', 'new');
    const changes = (await client.planChanges({ threshold: Number.MAX_SAFE_INTEGER }, knownScopes(tree)))!;
    expect(changes.scopes.map((s) => ('unchanged' in s ? `${s.scope} (stub)` : s.scope))).toEqual(['account (stub)', 'team_a (stub)', 'team_b']);
    const resolved = resolveWithHeld(changes, tree) as Plan;
    const full = client.currentPlan();
    expect(resolved.version).toBe(full.version);
    expect(listing(Tree.fromPlan(resolved, tree))).toEqual(listing(Tree.fromPlan(full, tree)));
  });

  it('files come back with their plan mtime, not the bumped one the tree reports', () => {
    const client = seeded();
    client.put('team_a/DUTY.md', 'AAAA', 1_000);
    const p1 = client.currentPlan();
    const t1 = Tree.fromPlan(p1, undefined);
    client.put('team_a/DUTY.md', 'BBBB', 1_000); // same size and mtime, other bytes: the tree bumps the mtime
    const p2 = client.currentPlan();
    const t2 = Tree.fromPlan(p2, t1);
    expect(t2.fileByScopePath('team_a/DUTY.md')?.mtimeMs).toBe(1_001);
    const duty = filesHeld(t2, new Set(['team_a'])).get('team_a')?.find((f) => f.path === 'DUTY.md');
    expect(duty?.mtimeMs).toBe(1_000);
  });

  it('a stub the tree no longer holds at that version resolves to null', async () => {
    const client = seeded();
    const first = client.currentPlan();
    const tree = Tree.fromPlan(first, undefined);
    const known = knownScopes(tree);
    const changes = (await client.planChanges({ threshold: Number.MAX_SAFE_INTEGER }, known))!;
    const without = tree.withoutScope('team_a');
    expect(resolveWithHeld(changes, without)).toBeNull();
    const otherVersion = Tree.fromPlan({ ...first, scopes: first.scopes.map((s) => (s.scope === 'team_a' ? { ...s, version: 'f'.repeat(64) } : s)) }, undefined);
    expect(resolveWithHeld(changes, otherVersion)).toBeNull();
  });

  it('planSource: changes when the client can, a full plan when a stub cannot be filled, plain plans otherwise', async () => {
    const client = seeded();
    const first = client.currentPlan();
    let state = Tree.fromPlan(first, undefined);
    const source = planSource(client, () => state);
    client.put('team_b/new.md', 'new');
    const plansBefore = client.calls.plan;
    const p = (await source.plan({ threshold: Number.MAX_SAFE_INTEGER }))!;
    expect(p.version).toBe(client.currentPlan().version);
    expect(client.changeCalls).toHaveLength(1);
    expect(client.calls.plan - plansBefore).toBe(1); // the one inside planChanges: no fallback

    // The tree lost team_a while the request was out: one full plan instead.
    const gate = client.planChanges.bind(client);
    client.planChanges = async (req, known) => {
      const answer = await gate(req, known);
      state = state.withoutScope('team_a');
      return answer;
    };
    const fallback = (await source.plan({ threshold: Number.MAX_SAFE_INTEGER }))!;
    expect(fallback.scopes.every((s) => !('unchanged' in s))).toBe(true);
    expect(client.calls.plan - plansBefore).toBe(3);

    const plain = new FakeControlClient();
    plain.put('account/DUTY.md', 'x');
    const plainPlan = plain.currentPlan();
    const viaPlain = planSource(plain, () => Tree.fromPlan(plainPlan, undefined));
    expect((await viaPlain.plan({ threshold: 1 << 30 }))?.version).toBe(plainPlan.version);
  });

  it('the sync loop applies a changed scope and keeps the rest, and then long-polls the new version', async () => {
    const client = seeded();
    let tree = Tree.fromPlan(client.currentPlan(), undefined);
    const source = planSource(client as ControlClient, () => tree);
    const loop = new SyncLoop({
      client: source,
      threshold: Number.MAX_SAFE_INTEGER,
      intervalMs: 20,
      currentVersion: () => tree.version,
      apply: (p) => {
        tree = Tree.fromPlan(p, tree);
      },
      revoked: () => {},
      log: () => {},
    });
    const untouched = tree.fileByScopePath('team_a/x/y/z.md');
    client.put('team_b/DUTY.md', '# b, edited');
    await loop.refreshNow();
    await loop.stop();
    expect(tree.version).toBe(client.currentPlan().version);
    expect(tree.fileByScopePath('team_a/x/y/z.md')).toBe(untouched); // the node itself was reused
    expect(listing(tree)).toEqual(listing(Tree.fromPlan(client.currentPlan(), undefined)));
    expect(client.changeCalls.at(-1)?.map((k) => k.scope)).toEqual(['account', 'team_a', 'team_b']);
  });

  it('the wire check: stubs are names, versions and sizes only, and the plan version still covers them', async () => {
    const client = seeded();
    const first = client.currentPlan();
    const known = first.scopes.map((x) => ({ scope: x.scope, version: x.version }));
    client.put('team_b/new.md', 'new');
    const changes = JSON.parse(JSON.stringify(await client.planChanges({ threshold: Number.MAX_SAFE_INTEGER }, known))) as { scopes: Record<string, unknown>[] };
    expect(checkPlanChanges(changes).scopes).toHaveLength(3);
    const forged = { ...changes, scopes: changes.scopes.map((x, i) => (i === 0 ? { ...x, version: 'e'.repeat(64) } : x)) };
    expect(() => checkPlanChanges(forged)).toThrow(/version does not match/);
    const odd = { ...changes, scopes: changes.scopes.map((x, i) => (i === 0 ? { ...x, unchanged: 'yes' } : x)) };
    expect(() => checkPlanChanges(odd)).toThrow(/unchanged scope/);
    const traversal = { ...changes, scopes: changes.scopes.map((x, i) => (i === 0 ? { ...x, scope: '../etc' } : x)) };
    expect(() => checkPlanChanges(traversal)).toThrow(/invalid plan/);
  });
});
