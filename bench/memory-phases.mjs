#!/usr/bin/env node
// Where the daemon's memory goes while it starts: process.memoryUsage()
// after each phase of what `knowledgefs mount` does before it mounts (the
// daemon's own heap setting, HTTP client and tree code from dist/, against a
// real control plane), then 3 s later, then after forced full GCs (with
// --expose-gc). `node --max-semi-space-size=16 …` shows it without the
// daemon's young-generation cap.
//
//   node --expose-gc bench/memory-phases.mjs URL TOKEN_FILE
//
// Quoted by docs/PERFORMANCE.md ("Memory at 100 000 files"). Create the
// session with `knowledgefs session create` or the admin API first.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dist = pathToFileURL(join(fileURLToPath(new URL('..', import.meta.url)), 'dist')).href;
const { HttpControlClient } = await import(`${dist}/daemon/control-plane/control-client.js`);
const { Tree } = await import(`${dist}/core/tree/tree.js`);
const { keepYoungGenerationSmall } = await import(`${dist}/daemon/heap.js`);
// As `knowledgefs mount` does at start (unless node was given a semi-space flag).
keepYoungGenerationSmall(process.execArgv, process.env.NODE_OPTIONS);

const [url, tokenFile] = process.argv.slice(2);
if (!url || !tokenFile) {
  process.stderr.write('usage: node --expose-gc bench/memory-phases.mjs URL TOKEN_FILE\n');
  process.exit(2);
}

const rows = [];
const mib = (n) => (n / 1048576).toFixed(0);
const mark = (label) => {
  const m = process.memoryUsage();
  rows.push(`| ${label} | ${mib(m.rss)} | ${mib(m.heapTotal)} | ${mib(m.heapUsed)} | ${mib(m.external)} |`);
};

mark('start (Node + modules)');
const client = new HttpControlClient({ serverUrl: url, token: readFileSync(tokenFile, 'utf8').trim(), requestTimeoutMs: 120_000 });
await client.session();
let t = performance.now();
let plan = await client.plan({ threshold: Number.MAX_SAFE_INTEGER });
const planMs = performance.now() - t;
mark('plan received and checked');
t = performance.now();
const tree = Tree.fromPlan(plan, undefined, {});
const treeMs = performance.now() - t;
plan = null;
mark('tree built');
await new Promise((r) => setTimeout(r, 3000));
mark('3 s later');
if (typeof gc === 'function') {
  gc();
  gc();
  mark('forced full GC');
}
await client.close();
process.stdout.write(`${tree.fileCount} files: plan ${planMs.toFixed(0)} ms (request, parse, checks), tree ${treeMs.toFixed(0)} ms\n\n`);
process.stdout.write(`| after | rss | heapTotal | heapUsed | external |\n|---|---|---|---|---|\n${rows.join('\n')}\n`);
