#!/usr/bin/env node
// `npm run test:node-lines`: the FUSE, MCP, client-library and CLI suites
// again on the other supported Node lines (22 and 24; `npm test` runs
// everything on the machine's Node), with the official binaries from the
// npm registry (scripts/node-binary.mjs, cached in .cache/). Each line runs
// vitest itself under that binary with the binary first on PATH, so the
// CLI and daemons the tests spawn (process.execPath, or `node` through
// bin/knowledgefs.js's shebang) run on that line too. The native addon and
// fuse-native are Node-API modules: the one build loads on every line.
// Before the suites, one timed first mount per line (scripts/first-mount.mjs).
//
//   node scripts/test-node-lines.mjs            lines 22 and 24
//   KNOWLEDGEFS_NODE_LINES="24" node scripts/test-node-lines.mjs
//
// Needs `npm run build` (the package script does it first).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { timeFirstMount } from './first-mount.mjs';
import { ensureNodeBinary, REPO_ROOT } from './node-binary.mjs';

// The suites whose code depends most on the Node runtime: FUSE mounts
// through the CLI, the MCP server, the client library, the read tool and
// the CLI itself.
const SUITES = [
  'test/mount-cli.test.ts',
  'test/mount-coherence.test.ts',
  'test/mount-daemon-wiring.test.ts',
  'test/mount-faults.test.ts',
  'test/mount-native.test.ts',
  'test/mount-status.test.ts',
  'test/mount-stop.test.ts',
  'test/mount-sync.test.ts',
  'test/mount-visibility.test.ts',
  'test/e2e-mcp.test.ts',
  'test/e2e-read.test.ts',
  'test/mcp-server.test.ts',
  'test/client-library.test.ts',
  'test/read-cli.test.ts',
  'test/read-socket.test.ts',
  'test/cli-help.test.ts',
  'test/cli-serve.test.ts',
];

const say = (msg) => process.stderr.write(`test:node-lines: ${msg}\n`);
const lines = (process.env.KNOWLEDGEFS_NODE_LINES ?? '22 24').split(/[\s,]+/).filter(Boolean);
const missing = SUITES.filter((f) => !existsSync(join(REPO_ROOT, f)));
if (missing.length > 0) {
  say(`suite file(s) not found: ${missing.join(', ')} (renamed? update SUITES in scripts/test-node-lines.mjs)`);
  process.exit(2);
}
if (!existsSync(join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
  say('dist/ is missing: run `npm run build` first (npm run test:node-lines does)');
  process.exit(2);
}

const vitest = join(REPO_ROOT, 'node_modules', 'vitest', 'vitest.mjs');
const results = [];
for (const line of lines) {
  const { bin, node, version } = ensureNodeBinary(line);
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` };
  say(`Node ${version} (${node})`);
  const mountMs = await timeFirstMount(node, env);
  say(`Node ${version}: first mount in ${mountMs.toFixed(0)} ms`);
  const began = performance.now();
  const run = spawnSync(node, [vitest, 'run', ...SUITES], { cwd: REPO_ROOT, env, stdio: 'inherit' });
  const secs = (performance.now() - began) / 1000;
  results.push({ version, ok: run.status === 0, secs, mountMs });
  say(`Node ${version}: suites ${run.status === 0 ? 'passed' : `FAILED (exit ${run.status ?? run.signal})`} in ${secs.toFixed(0)} s`);
}

say('summary:');
for (const r of results) say(`  Node ${r.version}: ${r.ok ? 'passed' : 'FAILED'}, suites ${r.secs.toFixed(0)} s, first mount ${r.mountMs.toFixed(0)} ms`);
process.exit(results.every((r) => r.ok) ? 0 : 1);
