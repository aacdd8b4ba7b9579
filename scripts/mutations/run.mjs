#!/usr/bin/env node
// `npm run test:mutations`: do the tests notice when the code breaks?
//
// Every breakage in breakages.json is one small edit of one source file
// (find → replace). The repository (without .git, node_modules, dist) is
// copied to a temporary directory and built once there; then, one breakage
// at a time, the edit is applied to the copy's source, the edited file alone
// is transpiled into the copy's dist/ and the CLI bundled again (the spawned
// CLI runs from dist/bundle/), the tests the breakage names are run
// (vitest -t, nothing else), and the edit is undone. A breakage is caught
// when those tests fail. The run passes only if every breakage is caught,
// after the same tests passed on the unbroken copy (a baseline that fails
// would make every breakage look caught). A breakage may set `env` for its
// tests, e.g. KNOWLEDGEFS_FUSE_BINDING=fuse-native for code only that binding
// runs, and `config` for tests of another suite, e.g.
// test/postgres/vitest.config.ts for the *.pg.ts files.
//
// The working tree is never written to. Options:
//   --only id,id   run these breakages only
//   --list         print the breakages and exit
//   --check        check the list against the code (every file and test
//                  exists, every `find` text occurs exactly once) and exit
//   --keep         keep the temporary copy (its path is printed)
//   --verbose      print the end of each run's test output
//
// A list entry whose `find` text is not in its file exactly once is an error:
// the list must follow the code. A breakage of native/*.c (the addon) is
// built into the copy's native/build/ with scripts/build-native.mjs, and the
// addon is built again from the unbroken source afterwards.

import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const LIST = join(ROOT, 'scripts', 'mutations', 'breakages.json');
/** One breakage's tests, FUSE mounts included, never need longer on a busy machine. */
const RUN_TIMEOUT_MS = 240_000;
const SKIP = new Set(['.git', 'node_modules', 'dist', 'coverage']);

function parseArgs(argv) {
  const opts = { only: undefined, list: false, check: false, keep: false, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--only') opts.only = new Set((argv[++i] ?? '').split(',').filter(Boolean));
    else if (a === '--list') opts.list = true;
    else if (a === '--check') opts.check = true;
    else if (a === '--keep') opts.keep = true;
    else if (a === '--verbose') opts.verbose = true;
    else throw new Error(`unknown argument ${a} (use --only id,id, --list, --check, --keep, --verbose)`);
  }
  return opts;
}

function occurrences(text, part) {
  let n = 0;
  for (let at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) n++;
  return n;
}

/** Checks every entry against the code and the tests; returns the problems. */
function validate(breakages) {
  const problems = [];
  const ids = new Set();
  for (const b of breakages) {
    if (ids.has(b.id)) problems.push(`${b.id}: duplicate id`);
    ids.add(b.id);
    const file = join(ROOT, b.file);
    if (!existsSync(file)) {
      problems.push(`${b.id}: ${b.file} does not exist`);
      continue;
    }
    const n = occurrences(readFileSync(file, 'utf8'), b.find);
    if (n !== 1) problems.push(`${b.id}: the text to replace occurs ${n} times in ${b.file} (must be exactly once)`);
    if (!Array.isArray(b.tests) || b.tests.length === 0) problems.push(`${b.id}: names no tests`);
    if (b.config !== undefined && !existsSync(join(ROOT, b.config))) problems.push(`${b.id}: ${b.config} does not exist`);
    for (const t of b.tests ?? []) {
      const testFile = join(ROOT, t.file);
      if (!existsSync(testFile)) problems.push(`${b.id}: ${t.file} does not exist`);
      else if (!readFileSync(testFile, 'utf8').replace(/\\'/g, "'").includes(t.name)) problems.push(`${b.id}: no test "${t.name}" in ${t.file}`);
    }
  }
  return problems;
}

const escapeRegex = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The copy has no .git: tests that need the history (the rolling-upgrade test
 * builds the previous release from it) read this clone's, named in
 * $KNOWLEDGEFS_TEST_GIT_DIR (test/helpers/previous-release.ts).
 */
function gitDirOf(root) {
  const found = spawnSync('git', ['-C', root, 'rev-parse', '--absolute-git-dir'], { encoding: 'utf8' });
  return found.status === 0 ? { KNOWLEDGEFS_TEST_GIT_DIR: found.stdout.trim() } : {};
}
const GIT_DIR_ENV = gitDirOf(ROOT);

/** vitest on `tests` in `dir` (with `config`, if given); resolves with the exit code (null on timeout) and the output. */
function runTests(dir, tests, env = {}, config = undefined) {
  const files = [...new Set(tests.map((t) => t.file))];
  const pattern = [...new Set(tests.map((t) => escapeRegex(t.name)))].join('|');
  const vitest = join(dir, 'node_modules', 'vitest', 'vitest.mjs');
  return new Promise((done) => {
    const child = spawn(process.execPath, [vitest, 'run', ...(config === undefined ? [] : ['--config', config]), ...files, '-t', pattern], {
      cwd: dir,
      env: { ...process.env, CI: process.env.CI ?? '', FORCE_COLOR: '0', ...GIT_DIR_ENV, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, RUN_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code: signal === 'SIGKILL' ? null : code, out });
    });
  });
}

function compilerOptions(ts, dir) {
  const configPath = join(dir, 'tsconfig.build.json');
  const config = ts.readConfigFile(configPath, ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  const options = ts.parseJsonConfigFileContent(config.config, ts.sys, dir).options;
  // One file alone cannot tell NodeNext it is ESM (that needs package.json); the build emits ESM.
  return { ...options, module: ts.ModuleKind.ES2022, sourceMap: false };
}

/** Runs a build script of the copy; resolves with its exit code. */
function buildStep(dir, step) {
  return new Promise((done) => {
    const child = spawn(process.execPath, step, { cwd: dir, stdio: 'inherit' });
    child.on('close', done);
  });
}

const isNative = (file) => file.endsWith('.c');

/**
 * Writes `source` (the copy's src/<file>) transpiled to the copy's dist/ and
 * marks the CLI bundle stale; for the addon's C source, builds the addon.
 */
async function emit(ts, options, dir, file, source, bundle) {
  if (isNative(file)) {
    const code = await buildStep(dir, [join(dir, 'scripts', 'build-native.mjs')]);
    if (code !== 0) throw new Error(`the addon did not build from ${file} (status ${code})`);
    return;
  }
  const out = ts.transpileModule(source, { compilerOptions: options, fileName: join(dir, file) });
  const target = join(dir, 'dist', relative('src', file)).replace(/\.ts$/, '.js');
  writeFileSync(target, out.outputText);
  bundle.stale = true;
}

/** Bundles the CLI again when dist/ changed since its last bundle: the spawned CLI runs dist/bundle/, not dist/. */
async function bundleIfStale(dir, bundle) {
  if (!bundle.stale) return;
  const code = await buildStep(dir, [join(dir, 'scripts', 'bundle-cli.mjs')]);
  if (code !== 0) throw new Error(`the CLI bundle did not build (status ${code})`);
  bundle.stale = false;
}

function tail(text, lines = 40) {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { breakages } = JSON.parse(readFileSync(LIST, 'utf8'));
  const chosen = opts.only === undefined ? breakages : breakages.filter((b) => opts.only.has(b.id));
  if (opts.only !== undefined && chosen.length !== opts.only.size) {
    throw new Error(`unknown breakage id in --only; known: ${breakages.map((b) => b.id).join(', ')}`);
  }
  if (opts.list) {
    for (const b of chosen) process.stdout.write(`${b.id}\t${b.file}\t${b.tests.map((t) => `${t.file} › ${t.name}`).join('; ')}\n`);
    return 0;
  }
  const problems = validate(chosen);
  if (problems.length > 0) {
    process.stderr.write(`test:mutations: the list does not match the code:\n  ${problems.join('\n  ')}\n`);
    return 1;
  }
  if (opts.check) {
    process.stdout.write(`test:mutations: the list matches the code (${chosen.length} breakages in ${new Set(chosen.map((b) => b.file)).size} files)\n`);
    return 0;
  }

  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'kfs-mutations-'));
  // Some tests run the CLI from this copy as other (test) users: they must reach it, as they reach the work tree.
  chmodSync(dir, 0o755);
  const cleanup = () => {
    if (!opts.keep) rmSync(dir, { recursive: true, force: true });
  };
  process.on('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  try {
    process.stdout.write(`test:mutations: copying the repository to ${dir} and building it\n`);
    cpSync(ROOT, dir, { recursive: true, filter: (src) => !SKIP.has(relative(ROOT, src).split('/')[0]) || src === ROOT });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const require = createRequire(join(ROOT, 'package.json'));
    const ts = require('typescript');
    // What `npm run build` does: the TypeScript build, the CLI bundle, and the native addon where it can be built.
    const build = [[join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], [join(dir, 'scripts', 'bundle-cli.mjs')], [join(dir, 'scripts', 'build-native.mjs'), '--if-possible']];
    for (const step of build) {
      const code = await buildStep(dir, step);
      if (code !== 0) throw new Error(`the build of the unbroken copy failed (${step.slice(0, 2).join(' ')})`);
    }
    const options = compilerOptions(ts, dir);
    const bundle = { stale: false };
    // The baseline runs on the single-file transpiles the breakages will use, so a transpile that differs from tsc's build shows there, not as a false "caught".
    for (const file of new Set(chosen.map((b) => b.file))) if (!isNative(file)) await emit(ts, options, dir, file, readFileSync(join(dir, file), 'utf8'), bundle);

    // One baseline run per environment and suite configuration the breakages ask for.
    const byEnv = new Map();
    for (const b of chosen) {
      const key = JSON.stringify({ env: b.env ?? {}, config: b.config });
      byEnv.set(key, [...(byEnv.get(key) ?? []), ...b.tests]);
    }
    for (const [key, tests] of byEnv) {
      const { env, config } = JSON.parse(key);
      process.stdout.write(`test:mutations: baseline (${new Set(tests.map((t) => `${t.file} › ${t.name}`)).size} tests on the unbroken copy, env ${JSON.stringify(env)}${config === undefined ? '' : `, config ${config}`})\n`);
      await bundleIfStale(dir, bundle);
      const baseline = await runTests(dir, tests, env, config);
      if (baseline.code !== 0) {
        process.stderr.write(`${tail(baseline.out, 80)}\ntest:mutations: the named tests fail on the unbroken code; fix that first\n`);
        return 1;
      }
    }

    const survived = [];
    for (const [i, b] of chosen.entries()) {
      const path = join(dir, b.file);
      const original = readFileSync(path, 'utf8');
      const broken = original.replace(b.find, () => b.replace);
      writeFileSync(path, broken);
      await emit(ts, options, dir, b.file, broken, bundle);
      await bundleIfStale(dir, bundle);
      const t0 = Date.now();
      const result = await runTests(dir, b.tests, b.env, b.config);
      writeFileSync(path, original);
      // The next breakage's bundle carries this file's original back.
      await emit(ts, options, dir, b.file, original, bundle);
      const secs = ((Date.now() - t0) / 1000).toFixed(1);
      const verdict = result.code === 0 ? 'SURVIVED' : result.code === null ? 'caught (timed out)' : 'caught';
      process.stdout.write(`[${i + 1}/${chosen.length}] ${verdict.padEnd(18)} ${b.id} (${secs} s)\n`);
      if (opts.verbose) process.stdout.write(`${tail(result.out, 25)}\n\n`);
      if (result.code === 0) survived.push(b);
    }

    const caught = chosen.length - survived.length;
    const total = ((Date.now() - started) / 1000).toFixed(0);
    process.stdout.write(`test:mutations: ${caught}/${chosen.length} breakages caught in ${total} s\n`);
    for (const b of survived) {
      process.stdout.write(`  not caught: ${b.id}: ${b.file}: ${JSON.stringify(b.find)} → ${JSON.stringify(b.replace)}; tests: ${b.tests.map((t) => t.name).join('; ')}\n`);
    }
    return survived.length === 0 ? 0 : 1;
  } finally {
    if (opts.keep) process.stdout.write(`test:mutations: kept ${dir}\n`);
    cleanup();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`test:mutations: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
