// A plan for tree tests: every scope given is loadable and materialised
// (threshold without bound), its files sorted as the control plane sends them.

import { buildPlan, snapshotScope, type Plan, type PlanFile } from '../../src/core/session/plan.js';
import { ColumnarSnapshot } from '../../src/core/session/plan-columns.js';
import { FLOAT64_BYTES, PackedTable, packScope, SHA256_BYTES } from '../../src/core/session/plan-packed.js';

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

/** The same plan as a packed body carries it (core/session/plan-packed.ts), read back without the daemon's checks. */
export function packedPlan(p: Plan): Plan {
  const scopes = p.scopes.map((s) => {
    const { head, sections } = packScope(s);
    const n = head.fileCount;
    const paths = sections.toString('utf8', 0, head.pathBytes);
    const starts = new Uint32Array(n + 1);
    for (let i = 0, at = 0; i < n; i++) starts[i + 1] = at = paths.indexOf('\n', at) + 1;
    const shaAt = head.pathBytes;
    const numbers = (at: number) => new Float64Array(sections.buffer.slice(sections.byteOffset + at, sections.byteOffset + at + FLOAT64_BYTES * n));
    const sizesAt = shaAt + SHA256_BYTES * n;
    const table = new PackedTable(paths, starts, sections.subarray(shaAt, sizesAt), numbers(sizesAt), numbers(sizesAt + FLOAT64_BYTES * n));
    return new ColumnarSnapshot(s.scope, s.version, s.totalBytes, table);
  });
  return { ...p, scopes };
}
