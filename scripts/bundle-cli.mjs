#!/usr/bin/env node
// Bundles the compiled CLI (dist/cli/main.js and everything it imports of
// ours) into fewer files in dist/bundle/, which bin/knowledgefs.js loads.
// Node resolves, reads, compiles and links each ES module on its own, and
// a mount loaded 72 of ours in its first seconds; bundled, it loads 21
// files and is ready ~20 ms sooner (docs/PERFORMANCE.md, "The CLI as a
// bundle").
//
//   node scripts/bundle-cli.mjs      after tsc (npm run build runs both)
//
// - Commands stay loaded on demand: each dynamic import becomes its own
//   chunk, so `read` still does not load the control plane.
// - npm packages stay outside the bundle, loaded from node_modules as before.
// - Each module's `import.meta.url` is its own file in dist/, so paths found
//   from it (package.json, native/build/, sql/migrations/) resolve as they
//   do unbundled.
// - dist/bundle/modules.json lists the modules in each chunk, for tests
//   that check what a command loads (test/cli-startup.test.ts).
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const out = join(dist, 'bundle');
const ENTRIES = { main: join(dist, 'cli', 'main.js'), 'broken-pipe': join(dist, 'cli', 'broken-pipe.js') };

for (const file of Object.values(ENTRIES)) {
  if (!existsSync(file)) {
    process.stderr.write(`bundle-cli: ${relative(root, file)} is missing: run tsc first (npm run build)\n`);
    process.exit(1);
  }
}

/** Bare specifiers (npm packages) and node: builtins are loaded at run time, not bundled. */
const isPackage = (id) => !id.startsWith('.') && !id.startsWith('/') && !id.startsWith('\0');

/** Rewrites `import.meta.url` in each of our modules to the URL of its own file in dist/. */
const ownUrl = {
  name: 'knowledgefs-own-import-meta-url',
  transform(code, id) {
    if (!code.includes('import.meta.url')) return null;
    return { code: code.replaceAll('import.meta.url', `new URL(${JSON.stringify(relative(out, id))}, import.meta.url).href`), map: null };
  },
};

const started = performance.now();
const bundle = await rolldown({ input: ENTRIES, platform: 'node', external: isPackage, plugins: [ownUrl], logLevel: 'warn' });
try {
  // Written to a temporary sibling, then swapped in: an interrupted build leaves the previous bundle whole.
  const partial = `${out}.partial`;
  rmSync(partial, { recursive: true, force: true });
  const { output } = await bundle.write({ dir: partial, format: 'esm', entryFileNames: '[name].js', chunkFileNames: '[name]-[hash].js' });
  const modules = {};
  for (const chunk of output) {
    if (chunk.type === 'chunk') modules[chunk.fileName] = chunk.moduleIds.filter((m) => !m.startsWith('\0')).map((m) => relative(root, m)).sort();
  }
  writeFileSync(join(partial, 'modules.json'), `${JSON.stringify(modules, null, 1)}\n`);
  rmSync(out, { recursive: true, force: true });
  renameSync(partial, out);
  const count = Object.values(modules).reduce((n, list) => n + list.length, 0);
  process.stderr.write(`bundle-cli: ${count} modules in ${Object.keys(modules).length} files in dist/bundle/ (${Math.round(performance.now() - started)} ms)\n`);
} finally {
  await bundle.close();
}
