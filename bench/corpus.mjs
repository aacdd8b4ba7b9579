#!/usr/bin/env node
// Deterministic benchmark corpus: the same seed and options always give the
// same bytes, paths and mtimes, so runs on different days compare.
//
// Layout written (the control plane's data dir):
//   DATA/directory.json
//   DATA/account/{DUTY.md, guidelines.md, reference/incident-archive.md (1 MiB)}
//   DATA/teams/<team>/DUTY.md and nested runbooks/architecture/postmortems/...
//   DATA/teams/x000…/DUTY.md + notes.md   (small "extra" teams, see below)
//
// Users: `bench` belongs to the main teams (its personal session under a high
// threshold materialises account + every main team: `--files` files in all).
// `reader` belongs to the first main team and to every extra team; its
// personal session bound to that team with a low threshold leaves the extra
// teams unmounted, so each extra team's DUTY.md is one "unmounted team" read.
//
// Sizes are uniform in [minSize, maxSize] bytes (default 0.5–8 KB: ~25 MB of
// bytes, ~37 MB on disk in 4 KiB blocks at 6 003 files). Some files carry
// grep-able tokens (GREP_TOKEN in ~2 %, RARE_TOKEN in one file per team).
//
// CLI: node bench/corpus.mjs DIR [--files N] [--teams N] [--extra-teams N]
//      [--min-size B] [--max-size B] [--seed S]

import { mkdirSync, writeFileSync, utimesSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const GREP_TOKEN = 'ERR_LEDGER_TIMEOUT';
export const RARE_TOKEN = 'kfs-needle-7f3a';
export const MAIN_TEAMS = ['payments', 'search', 'storage', 'identity', 'billing', 'network', 'compute', 'data'];
export const BIG_FILE = 'account/reference/incident-archive.md';
export const BIG_FILE_SIZE = 1024 * 1024;
const ACCOUNT_FILES = 3; // DUTY.md, guidelines.md, the 1 MiB file
const BASE_MTIME_S = 1_704_067_200; // 2024-01-01T00:00:00Z

export const DEFAULTS = Object.freeze({ files: 6003, teams: 3, extraTeams: 100, minSize: 512, maxSize: 8192, seed: 42 });

/** sfc32: small, fast, good enough for corpus shapes. */
export function prng(seed) {
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = seed >>> 0;
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    const r = (t + d) | 0;
    c = (c + r) | 0;
    return (r >>> 0) / 4294967296;
  };
  for (let i = 0; i < 16; i++) next();
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (arr) => arr[Math.floor(next() * arr.length)],
  };
}

const WORDS = ('latency queue shard replica leader follower failover rollback deploy canary alert pager ' +
  'dashboard quota throttle backpressure timeout retry circuit breaker ledger settlement index ' +
  'reindex compaction snapshot checkpoint lease heartbeat partition rebalance consumer producer ' +
  'upstream downstream ingress egress certificate rotation secret vault migration schema replica ' +
  'saturation p99 budget burn error rate runbook escalation mitigation root cause timeline owner ' +
  'region zone cluster node pod container kernel disk inode memory cpu throttling gc pause').split(' ');
const HEADINGS = ['Summary', 'Impact', 'Timeline', 'Root cause', 'Mitigation', 'Follow-ups', 'Symptoms',
  'Diagnosis', 'Escalation', 'Dashboards', 'Dependencies', 'Design', 'Trade-offs', 'Open questions'];
const DIRS = ['runbooks', 'architecture', 'postmortems/2022', 'postmortems/2023', 'postmortems/2024',
  'services/api', 'services/workers', 'services/api/handlers', 'oncall', 'decisions', 'playbooks/db', 'playbooks/net'];
const SERVICES = ['gateway', 'ledger', 'indexer', 'scheduler', 'blobstore', 'authz', 'notifier', 'router'];

function sentence(r) {
  const n = r.int(6, 16);
  const words = [];
  for (let i = 0; i < n; i++) words.push(r.pick(WORDS));
  const s = words.join(' ');
  return s[0].toUpperCase() + s.slice(1) + '.';
}

function paragraph(r) {
  const kind = r.next();
  if (kind < 0.15) {
    const lines = [];
    for (let i = r.int(2, 5); i > 0; i--) lines.push(`- ${sentence(r)}`);
    return lines.join('\n');
  }
  if (kind < 0.22) {
    const svc = r.pick(SERVICES);
    return '```sh\n' + `kubectl -n ${svc} rollout status deploy/${svc}\n` +
      `curl -s http://${svc}.internal:8080/healthz | jq .status\n` + '```';
  }
  const parts = [];
  for (let i = r.int(2, 4); i > 0; i--) parts.push(sentence(r));
  return parts.join(' ');
}

/** Markdown of exactly `size` bytes (ASCII only, so bytes = characters). */
export function markdown(r, title, size, tokens = []) {
  let text = `# ${title}\n\n`;
  for (const t of tokens) text += `Reference: ${t} seen in ${r.pick(SERVICES)} logs.\n\n`;
  while (text.length < size) text += `## ${r.pick(HEADINGS)}\n\n${paragraph(r)}\n\n`;
  return text.slice(0, size - 1) + '\n';
}

function writeFile(root, rel, body, index) {
  const full = join(root, rel);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, body);
  const t = BASE_MTIME_S + index * 61;
  utimesSync(full, t, t);
}

/** Files per main team so that the materialised total is `files`. */
export function teamFileCount(opts) {
  return Math.max(1, Math.floor((opts.files - ACCOUNT_FILES) / opts.teams));
}

export function corpusKey(opts) {
  return `f${opts.files}-t${opts.teams}-x${opts.extraTeams}-s${opts.minSize}-${opts.maxSize}-seed${opts.seed}`;
}

/**
 * Writes the corpus into `root` (replacing it). Returns a summary; a
 * `.corpus.json` marker lets callers reuse an existing identical corpus.
 */
export function generateCorpus(root, options = {}) {
  const opts = { ...DEFAULTS, ...options };
  if (opts.teams < 1 || opts.teams > MAIN_TEAMS.length) throw new Error(`--teams must be 1..${MAIN_TEAMS.length}`);
  const marker = join(root, '.corpus.json');
  if (existsSync(marker)) {
    const prev = JSON.parse(readFileSync(marker, 'utf8'));
    if (prev.key === corpusKey(opts)) return prev;
  }
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  const r = prng(opts.seed);
  const teams = MAIN_TEAMS.slice(0, opts.teams);
  const extra = Array.from({ length: opts.extraTeams }, (_, i) => `x${String(i).padStart(3, '0')}`);
  let index = 0;
  let bytes = 0;
  let diskBytes = 0;
  const add = (rel, body) => {
    writeFile(root, rel, body, index++);
    bytes += body.length;
    diskBytes += Math.ceil(body.length / 4096) * 4096;
  };

  add('account/DUTY.md', markdown(r, 'Account duty: shared SRE practice', 3000));
  add('account/guidelines.md', markdown(r, 'Guidelines', 6000, [GREP_TOKEN]));
  add(BIG_FILE, markdown(r, 'Incident archive', BIG_FILE_SIZE, [RARE_TOKEN]));

  const perTeam = teamFileCount(opts);
  for (const team of teams) {
    add(`teams/${team}/DUTY.md`, markdown(r, `Team ${team} duty`, r.int(1500, 4000)));
    for (let i = 1; i < perTeam; i++) {
      const dir = r.pick(DIRS);
      const name = `${r.pick(SERVICES)}-${r.pick(WORDS)}-${i}.md`;
      const tokens = [];
      if (r.next() < 0.02) tokens.push(GREP_TOKEN);
      if (i === Math.floor(perTeam / 2)) tokens.push(RARE_TOKEN);
      add(`teams/${team}/${dir}/${name}`, markdown(r, `${team} ${dir} ${i}`, r.int(opts.minSize, opts.maxSize), tokens));
    }
  }
  const materialised = index;
  for (const x of extra) {
    add(`teams/${x}/DUTY.md`, markdown(r, `Team ${x} duty`, 1200));
    add(`teams/${x}/notes.md`, markdown(r, `Team ${x} notes`, 2000));
  }

  const directory = {
    teams: Object.fromEntries([...teams, ...extra].map((t) => [t, { name: `Team ${t}` }])),
    users: {
      bench: { teams, role: 'member' },
      reader: { teams: [teams[0], ...extra], role: 'member' },
    },
  };
  writeFileSync(join(root, 'directory.json'), JSON.stringify(directory, null, 2) + '\n');
  const summary = { key: corpusKey(opts), options: opts, teams, extraTeams: extra, materialisedFiles: materialised, files: index, bytes, diskBytes };
  writeFileSync(marker, JSON.stringify(summary, null, 2) + '\n');
  return summary;
}

function parseArgs(argv) {
  const out = { dir: undefined, opts: {} };
  const names = { '--files': 'files', '--teams': 'teams', '--extra-teams': 'extraTeams', '--min-size': 'minSize', '--max-size': 'maxSize', '--seed': 'seed' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (names[a]) out.opts[names[a]] = Number(argv[++i]);
    else if (!a.startsWith('-') && out.dir === undefined) out.dir = a;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!out.dir) throw new Error('usage: node bench/corpus.mjs DIR [--files N] [--teams N] [--extra-teams N] [--min-size B] [--max-size B] [--seed S]');
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { dir, opts } = parseArgs(process.argv.slice(2));
  const s = generateCorpus(dir, opts);
  process.stdout.write(`${JSON.stringify({ dir, files: s.files, materialisedFiles: s.materialisedFiles, bytes: s.bytes, diskBytes: s.diskBytes })}\n`);
}
