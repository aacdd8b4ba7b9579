#!/usr/bin/env node
// Summarises a V8 .cpuprofile (from `node --cpu-prof`) as text: self time by
// function and by file, and inclusive time for functions under src/ (or any
// path filter), so a profile can be quoted in docs/PERFORMANCE.md.
//
// Usage: node bench/profile-summary.mjs FILE.cpuprofile [--top N] [--filter SUBSTR]

import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--'));
const top = Number(args[args.indexOf('--top') + 1]) || 25;
const filter = args.includes('--filter') ? args[args.indexOf('--filter') + 1] : '/dist/';
if (!file) {
  process.stderr.write('usage: node bench/profile-summary.mjs FILE.cpuprofile [--top N] [--filter SUBSTR]\n');
  process.exit(2);
}

const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Sample counts → milliseconds via the time deltas.
const selfMs = new Map();
const deltas = profile.timeDeltas ?? [];
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  selfMs.set(id, (selfMs.get(id) ?? 0) + (deltas[i] ?? 0) / 1000);
}
const total = [...selfMs.values()].reduce((a, b) => a + b, 0);

const shortUrl = (u) => (u ? u.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, 'node_modules/').replace(/.*\/(dist|src|bench)\//, '$1/') : '');
const label = (n) => `${n.callFrame.functionName || '(anonymous)'} ${shortUrl(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;

const selfBy = (key) => {
  const m = new Map();
  for (const [id, ms] of selfMs) {
    const k = key(byId.get(id));
    m.set(k, (m.get(k) ?? 0) + ms);
  }
  return [...m.entries()].sort((a, b) => b[1] - a[1]);
};

// Inclusive time for frames whose url matches the filter (each sample counted once per distinct frame).
const incl = new Map();
for (const [id, ms] of selfMs) {
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur);
    if (!n.callFrame.url.includes(filter)) continue;
    const k = label(n);
    if (seen.has(k)) continue;
    seen.add(k);
    incl.set(k, (incl.get(k) ?? 0) + ms);
  }
}

const pct = (ms) => `${((ms / total) * 100).toFixed(1).padStart(5)} %  ${ms.toFixed(0).padStart(6)} ms`;
const out = [];
out.push(`profile ${file}: ${total.toFixed(0)} ms sampled`);
out.push('', 'self time by category:');
const category = (n) => {
  const u = n.callFrame.url;
  const f = n.callFrame.functionName;
  if (f === '(idle)') return '(idle)';
  if (f === '(garbage collector)') return '(garbage collector)';
  if (f === '(program)') return '(program: native, outside JS)';
  if (u.includes('/node_modules/')) return `node_modules/${u.split('/node_modules/')[1].split('/')[0]}`;
  if (u.includes('/dist/') || u.includes('/src/')) return 'knowledgefs';
  if (u.startsWith('node:')) return `node:${u.slice(5).split('/')[0]}`;
  return u ? 'other' : `(native) ${f}`;
};
for (const [k, ms] of selfBy(category).slice(0, top)) out.push(`  ${pct(ms)}  ${k}`);
out.push('', 'self time by function:');
for (const [k, ms] of selfBy(label).slice(0, top)) out.push(`  ${pct(ms)}  ${k}`);
out.push('', `inclusive time, frames matching "${filter}":`);
for (const [k, ms] of [...incl.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) out.push(`  ${pct(ms)}  ${k}`);
process.stdout.write(out.join('\n') + '\n');
