// StrykerJS over one folder of src/ at a time, on Node 24: Stryker 10 needs
// Node ≥ 22.18, and the machine's own Node may be older. The Node binary is
// fetched once into .cache/ (scripts/node-binary.mjs).
//
//   node scripts/stryker.mjs core            # src/core, report in reports/mutation/core.json
//   node scripts/stryker.mjs server -- --concurrency 2
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ensureNodeBinary, REPO_ROOT } from './node-binary.mjs';

const FOLDERS = ['core', 'server', 'store', 'client', 'mcp'];

const [folder, ...rest] = process.argv.slice(2);
if (folder === undefined || !FOLDERS.includes(folder)) {
  console.error(`usage: node scripts/stryker.mjs ${FOLDERS.join('|')} [-- stryker options]`);
  process.exit(2);
}
const extra = rest[0] === '--' ? rest.slice(1) : rest;
const { bin, version } = ensureNodeBinary(24);
const stryker = join(REPO_ROOT, 'node_modules', '@stryker-mutator', 'core', 'bin', 'stryker.js');
if (!existsSync(stryker)) {
  console.error(`${stryker} is missing: run npm ci first`);
  process.exit(2);
}
console.error(`stryker: src/${folder} on Node ${version}`);
const result = spawnSync(join(bin, 'node'), [stryker, 'run', ...extra], {
  cwd: REPO_ROOT,
  stdio: 'inherit',
  env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, KNOWLEDGEFS_STRYKER_FOLDER: folder },
});
process.exit(result.status ?? 1);
