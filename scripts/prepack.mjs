#!/usr/bin/env node
// `npm pack`'s prepack: builds what the tarball ships that git does not hold,
// from the sources alone, then checks the tarball would run.
//   1. npm ci (without install scripts) when node_modules is absent;
//   2. dist/: tsc, then the CLI bundle (dist/bundle/, which bin/knowledgefs.js
//      imports); files in dist/ this build did not write (left by an older
//      build of sources since deleted) are removed, so they cannot ship;
//   3. prebuilds/linux-<arch>/: the libfuse 3 addon for each arch
//      (scripts/prebuild-native.mjs);
//   4. scripts/package-contents.mjs on what npm is about to pack: everything
//      the CLI and the library import is there, and nothing untracked is.
// dist/ is rebuilt in place, not wiped first, so that CLI processes started
// meanwhile from this checkout (a test run) still find every file.

import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const say = (msg) => process.stderr.write(`prepack: ${msg}\n`);

if (!existsSync(join(root, 'node_modules', 'typescript'))) {
  say('installing npm dependencies (npm ci)…');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], { stdio: 'inherit', cwd: root });
}

say('compiling dist/ (tsc)…');
const emitted = new Set(
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json'), '--listEmittedFiles'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.startsWith('TSFILE: '))
    .map((line) => resolve(line.slice('TSFILE: '.length).trim())),
);
say('bundling the CLI (dist/bundle/)…');
execFileSync(process.execPath, [join(root, 'scripts', 'bundle-cli.mjs')], { stdio: 'inherit' });

/** Every file under `dir`. */
const filesUnder = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
const stale = filesUnder(dist).filter((f) => !emitted.has(f) && !f.startsWith(join(dist, 'bundle') + '/'));
for (const file of stale) rmSync(file);
if (stale.length > 0) say(`removed ${stale.length} file(s) from dist/ that this build did not write (e.g. ${relative(root, stale[0])})`);

const { buildPrebuilds } = await import('./prebuild-native.mjs');
buildPrebuilds();

const { packageContentProblems, packedFileList, trackedFiles } = await import('./package-contents.mjs');
const problems = await packageContentProblems({ root, files: packedFileList(root), tracked: trackedFiles(root) });
if (problems.length > 0) {
  for (const p of problems) say(p);
  say(`the tarball would not be right (${problems.length} problem(s) above): nothing was packed`);
  process.exit(1);
}
say('checked: everything bin/knowledgefs.js and the package exports import is in the tarball');
