// Plans as changes. The sync loop's plan requests name the scopes the tree
// holds and their versions (GET /v1/plan?known=…); the control plane sends
// each scope still at that version as a stub without files, and the stub is
// filled from the tree. So a new mount (the read tool) or an edit in one team
// costs that team's files on the wire, in JSON parsing and in checking, not
// the whole plan's. The plan's version, mode and scope list are still the
// control plane's, so ETags and long-polls are those of a full plan.
//
// A stub the tree no longer holds at that version (the tree changed while
// the request was out) costs one full plan instead. Clients without
// `planChanges` (in-memory fakes) always get full plans.

import type { KnownScope, Plan, PlanChanges, PlanFile } from '../../core/session/plan.js';
import { isUnchangedScope, resolvePlanChanges } from '../../core/session/plan.js';
import type { ScopeName } from '../../core/scope.js';
import type { Tree } from '../../core/tree/tree.js';
import type { ControlClient, PlanRequest } from '../control-plane/control-client.js';

export interface PlanChangesClient {
  planChanges(req: PlanRequest, known: readonly KnownScope[]): Promise<PlanChanges | null>;
}

/** Most scopes named in one request, which keeps its URL far below header limits. */
export const MAX_KNOWN_SCOPES = 100;

/** The files of `scopes` as their plan listed them (a file node keeps its plan mtime). */
export function filesHeld(tree: Tree, scopes: ReadonlySet<ScopeName>): Map<ScopeName, PlanFile[]> {
  const byScope = new Map<ScopeName, PlanFile[]>();
  for (const scope of scopes) byScope.set(scope, []);
  if (scopes.size === 0) return byScope;
  for (const file of tree.plannedFiles()) {
    const list = byScope.get(file.scope);
    if (list === undefined) continue;
    list.push({ path: file.scopePath, size: file.size, mtimeMs: file.planMtimeMs, sha256: file.sha256 });
  }
  return byScope;
}

/** The scopes `tree` holds and their versions, as a request names them. */
export function knownScopes(tree: Tree): KnownScope[] {
  const known: KnownScope[] = [];
  for (const scope of tree.scopes) {
    const version = tree.scopeVersion(scope);
    if (version !== undefined) known.push({ scope, version });
    if (known.length === MAX_KNOWN_SCOPES) break;
  }
  return known;
}

/** Fills each stub from the tree held now, or null when it no longer holds one at its version. */
export function resolveWithHeld(changes: PlanChanges, tree: Tree): Plan | null {
  const wanted = new Set<ScopeName>();
  for (const s of changes.scopes) {
    if (isUnchangedScope(s) && tree.scopeVersion(s.scope) === s.version) wanted.add(s.scope);
  }
  const files = filesHeld(tree, wanted);
  return resolvePlanChanges(changes, (scope) => files.get(scope));
}

/** A `plan` for the sync loop that asks for changes when the client can. */
export function planSource(client: ControlClient, held: () => Tree): Pick<ControlClient, 'plan'> {
  const changesClient = client as ControlClient & Partial<PlanChangesClient>;
  return {
    async plan(req: PlanRequest): Promise<Plan | null> {
      const known = knownScopes(held());
      if (typeof changesClient.planChanges !== 'function' || known.length === 0) return client.plan(req);
      const changes = await changesClient.planChanges(req, known);
      if (changes === null) return null;
      return resolveWithHeld(changes, held()) ?? client.plan({ threshold: req.threshold, signal: req.signal });
    },
  };
}
