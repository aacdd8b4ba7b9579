// A fresh `npm ci` must be quiet: npm 11 warns about every dependency whose
// install script package.json's `allowScripts` does not cover (and a later
// npm blocks them). fuse-native's install script picks its prebuilt binding;
// it is allowed by name (its version is pinned in dependencies). This asks
// npm itself, offline, which installed packages are still unreviewed.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/mount.js';

it('every installed dependency with an install script is covered by allowScripts (no npm ci warning)', async () => {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)('npm', ['install-scripts', 'ls', '--json'], { cwd: REPO_ROOT }));
  } catch (err) {
    throw new Error(`\`npm install-scripts ls\` failed (npm ≥ 11.16 is needed): ${err instanceof Error ? err.message : String(err)}`);
  }
  const pending = (JSON.parse(stdout) as { allowScripts: { name: string }[] }).allowScripts.map((p) => p.name);
  expect(pending, 'approve them with `npm install-scripts approve <name>` after reviewing their install scripts').toEqual([]);
});
