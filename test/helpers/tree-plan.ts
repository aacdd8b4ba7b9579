// A plan for tree tests: every scope given is loadable and materialised
// (threshold without bound), its files sorted as the control plane sends them.

import { buildPlan, snapshotScope, type Plan, type PlanFile } from '../../src/core/session/plan.js';

/** The n-th test content's sha256. */
export const sha = (n: number) => n.toString(16).padStart(64, '0');

export function treePlan(scopes: Record<string, PlanFile[]>, mounted: string[] = []): Plan {
  return buildPlan({
    sessionId: 'ses_test',
    threshold: Number.MAX_SAFE_INTEGER,
    loadable: Object.entries(scopes).map(([scope, files]) => snapshotScope(scope, files)),
    boundTeam: undefined,
    mounted,
  });
}
