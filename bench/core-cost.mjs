#!/usr/bin/env node
// The daemon's own CPU and memory per file, in-process, without FUSE or a
// network: what docs/PERFORMANCE.md quotes when it separates our code from
// the binding's round trips.
//
//   node --expose-gc bench/core-cost.mjs DATA_DIR
//
// Builds the plan a control plane would send for DATA_DIR (every scope, fake
// sha256 = hash of the path: only shapes matter here), serialises it, then
// measures with the built dist/:
//   - JSON parse, plan checks (wire-check) and Tree.fromPlan, first call
//     (cold JIT, as at mount time) and warmed up;
//   - bytes the tree keeps per file (heap after full GCs, --expose-gc);
//   - open + getattr + release on the filesystem core with a fresh grant and
//     the bytes in memory, µs per file (the warm `grep -r` path minus FUSE).

import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dist = pathToFileURL(join(fileURLToPath(new URL('..', import.meta.url)), 'dist')).href;
const { snapshotScope, buildPlan } = await import(`${dist}/core/session/plan.js`);
const { checkPlan } = await import(`${dist}/daemon/control-plane/wire-check.js`);
const { Tree } = await import(`${dist}/core/tree/tree.js`);
const { KnowledgeFilesystem } = await import(`${dist}/daemon/filesystem.js`);
const { GrantCache } = await import(`${dist}/daemon/content/grant-cache.js`);
const { ContentCache } = await import(`${dist}/daemon/content/content-cache.js`);
const { ContentFetcher } = await import(`${dist}/daemon/content/fetcher.js`);

const data = process.argv[2];
if (!data) {
  process.stderr.write('usage: node --expose-gc bench/core-cost.mjs DATA_DIR\n');
  process.exit(2);
}

function planFor(root) {
  const roots = [['account', join(root, 'account')], ...readdirSync(join(root, 'teams')).map((t) => [`team_${t}`, join(root, 'teams', t)])];
  const scopes = roots.map(([scope, dir]) => snapshotScope(scope, readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const abs = join(e.parentPath, e.name);
      const path = relative(dir, abs);
      const st = statSync(abs);
      return { path, size: st.size, mtimeMs: Math.floor(st.mtimeMs), sha256: createHash('sha256').update(path).digest('hex') };
    })));
  return buildPlan({ sessionId: 'bench', threshold: Number.MAX_SAFE_INTEGER, loadable: scopes, mounted: [] });
}

const text = JSON.stringify(planFor(data));
const ms = (f) => { const t = performance.now(); const v = f(); return [performance.now() - t, v]; };
const phases = () => {
  const [parse, json] = ms(() => JSON.parse(text));
  const [check, plan] = ms(() => checkPlan(json));
  const [tree, t] = ms(() => Tree.fromPlan(plan, undefined, {}));
  return { parse, check, tree, t };
};
const first = phases();
for (let i = 0; i < 5; i++) phases();
const warm = phases();
const files = first.t.fileCount;
const fmt = (p) => `parse ${p.parse.toFixed(1)} ms, check ${p.check.toFixed(1)} ms, tree ${p.tree.toFixed(1)} ms`;
console.log(`${files} files, plan ${(text.length / 1e6).toFixed(2)} MB of JSON`);
console.log(`first call (cold JIT): ${fmt(first)}`);
console.log(`warmed up:             ${fmt(warm)}`);

if (typeof gc === 'function') {
  for (let i = 0; i < 4; i++) gc();
  const base = process.memoryUsage().heapUsed;
  let keep = phases().t;
  for (let i = 0; i < 4; i++) gc();
  const bytes = process.memoryUsage().heapUsed - base;
  console.log(`tree keeps ${(bytes / 1048576).toFixed(1)} MiB: ${(bytes / files).toFixed(0)} bytes per file`);
  keep = undefined;
} else {
  console.log('(run with --expose-gc for the bytes the tree keeps)');
}

const tree = warm.t;
const nodes = [...tree.files()];
const cache = new ContentCache({ maxBytes: 1 << 30 });
for (const f of nodes) cache.put(f.sha256, Buffer.alloc(f.size));
const fs = new KnowledgeFilesystem({
  tree: () => tree,
  grants: new GrantCache({ grant: async () => {} }, 3_600_000),
  fetcher: new ContentFetcher({ client: {}, cache }),
  requestTimeoutMs: 5000,
});
await fs.open(nodes[0].path, 0); // takes the grant
let best = Infinity;
for (let round = 0; round < 5; round++) {
  const t = performance.now();
  for (const f of nodes) {
    const fd = await fs.open(f.path, 0);
    fs.getattr(f.path);
    fs.release(fd);
  }
  best = Math.min(best, ((performance.now() - t) * 1000) / nodes.length);
}
console.log(`open + getattr + release, warm: ${best.toFixed(1)} µs per file (best of 5 passes)`);
