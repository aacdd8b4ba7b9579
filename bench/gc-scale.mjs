#!/usr/bin/env node
// `knowledgefs gc` over 100 000 blobs in s3rver: how long the dry run and
// the --delete run take and the gc process's peak RSS (/usr/bin/time -f %M),
// beside a baseline measured in the same run: one plain listing of the same
// bucket (ListObjectsV2, every page), which any gc must do at least.
//
//   npm run build && node bench/gc-scale.mjs [BLOBS]      (default 100000)
//   node --expose-gc bench/gc-scale.mjs BLOBS --memory
//
// s3rver walks its whole bucket directory for every listing page, so a
// listing of 100 000 objects costs it minutes (quadratic); `--memory` runs
// gc in-process against an in-memory store with the same pages of 1 000
// keys, to measure gc's own time and memory at that size (mark, sweep,
// batches), beside a plain listing of the same store as the baseline.
//
// The bucket is written straight into s3rver's directory (an object file,
// its metadata and md5, as s3rver's filesystem store lays them out), which
// takes seconds where 100 000 PUTs through s3rver take minutes: half the
// blobs are named by one publication (an account index of BLOBS/2 files,
// its pointer and history copy, all valid), half by nothing, and every
// file is backdated two days so the default grace (24 h) lets gc sweep.
// Quoted by docs/PERFORMANCE.md ("Garbage collection").

import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO, BIN } from './lib/knowledgefs.mjs';
import { start, stop, run, log, cleanup, installCleanupHandlers } from './lib/proc.mjs';
import { startPostgres } from './lib/postgres.mjs';

installCleanupHandlers();
const BLOBS = Number(process.argv[2] ?? 100_000);
const MEMORY = process.argv.includes('--memory');
const BUCKET = 'bench';
const PREFIX = 'kfs';
const dist = pathToFileURL(join(REPO, 'dist')).href;
const { serializeIndex, serializePointer, pointerFor, blobKey, indexKey, directoryKey, historyKey, POINTER_KEY } = await import(`${dist}/core/publication.js`);
const { scopeVersion } = await import(`${dist}/core/session/plan.js`);
const { S3ObjectStore } = await import(`${dist}/store/objects/s3-object-store.js`);
const { resolveS3Config } = await import(`${dist}/store/objects/store-config.js`);

const sha = (b) => createHash('sha256').update(b).digest('hex');

if (MEMORY) {
  const { collectGarbage } = await import(`${dist}/store/gc/gc.js`);
  const old = Date.now() - 48 * 3_600_000;
  const objects = new Map();
  const put = (key, body) => objects.set(key, { body, lastModified: old });
  const named = [];
  for (let i = 0; i < BLOBS; i++) {
    const body = Buffer.from(`blob ${i}\n`);
    const hash = sha(body);
    put(blobKey(hash), body);
    if (i % 2 === 0) named.push({ path: `notes/n${String(i).padStart(7, '0')}.md`, size: body.length, mtimeMs: 0, sha256: hash });
  }
  const files = named.sort((a, b) => (a.path < b.path ? -1 : 1));
  const snapshot = { scope: 'account', version: scopeVersion(files), totalBytes: 0, files };
  const directory = Buffer.from('{"teams":{},"users":{}}');
  put(indexKey('account', snapshot.version), serializeIndex(snapshot));
  put(directoryKey(sha(directory)), directory);
  const pointer = pointerFor(sha(directory), [snapshot], new Date(old).toISOString());
  put(historyKey(pointer), serializePointer(pointer));
  put(POINTER_KEY, serializePointer(pointer));
  // Pages of 1 000 keys in key order, each a macrotask, as a store's answers arrive.
  const store = {
    description: 'memory',
    async get(key) { const o = objects.get(key); return o === undefined ? null : { bytes: o.body, etag: undefined }; },
    async put(key, body) { put(key, body); },
    async has(key) { return objects.has(key); },
    async lastModified(key) { return objects.get(key)?.lastModified ?? null; },
    async *list(prefix) { for await (const e of this.listObjects(prefix)) yield e.key; },
    async *listObjects(prefix) {
      const keys = [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();
      for (let i = 0; i < keys.length; i += 1000) {
        await new Promise((r) => setImmediate(r));
        for (const key of keys.slice(i, i + 1000)) { const o = objects.get(key); if (o) yield { key, size: o.body.length, lastModified: o.lastModified }; }
      }
    },
    async deleteMany(keys) { await new Promise((r) => setImmediate(r)); for (const k of keys) objects.delete(k); },
    async close() {},
  };
  globalThis.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let peak = rssBefore;
  const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 5);
  let t0 = performance.now();
  let listed = 0;
  for await (const _ of store.listObjects('')) listed++;
  const listMs = performance.now() - t0;
  const runGc = async (del) => {
    globalThis.gc?.();
    const base = process.memoryUsage().rss;
    peak = base;
    const cpu0 = process.cpuUsage();
    t0 = performance.now();
    const r = await collectGarbage({ store, keep: 3, graceMs: 24 * 3_600_000, delete: del, served: [], log: () => {} });
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    peak = Math.max(peak, process.memoryUsage().rss);
    return { seconds: +(ms / 1000).toFixed(2), cpuSeconds: +((cpu.user + cpu.system) / 1e6).toFixed(2), rssGrowthMiB: +((peak - base) / 1048576).toFixed(0), swept: r.swept.objects, marked: r.marked.objects, vsListing: +(ms / listMs).toFixed(1) };
  };
  const dry = await runGc(false);
  const del = await runGc(true);
  clearInterval(sampler);
  process.stdout.write(`${JSON.stringify({ mode: 'memory', blobs: BLOBS, named: files.length, listing: { objects: listed, seconds: +(listMs / 1000).toFixed(2) }, dryRun: dry, delete: del, processRssMiB: +(process.memoryUsage().rss / 1048576).toFixed(0), storeRssBeforeGcMiB: +(rssBefore / 1048576).toFixed(0) }, null, 2)}\n`);
  process.exit(0);
}

const md5 = (b) => createHash('md5').update(b).digest('hex');
const old = new Date(Date.now() - 48 * 3_600_000);

/** One object as s3rver's filesystem store keeps it. */
function putFile(root, key, body, type = 'application/octet-stream') {
  const parts = `${PREFIX}/${key}`.split('/');
  const name = parts.pop();
  const dir = join(root, BUCKET, ...parts);
  mkdirSync(dir, { recursive: true });
  const object = join(dir, `${name}._S3rver_object`);
  writeFileSync(object, body);
  writeFileSync(join(dir, `${name}._S3rver_object.md5`), md5(body));
  writeFileSync(join(dir, `${name}._S3rver_metadata.json`), JSON.stringify({ 'content-type': type }));
  utimesSync(object, old, old);
}

const s3dir = `/tmp/kfsbench-gc-${process.pid}`;
log(`writing ${BLOBS} blobs into ${s3dir}`);
let t = performance.now();
const named = [];
for (let i = 0; i < BLOBS; i++) {
  const body = Buffer.from(`blob ${i}\n`);
  const hash = sha(body);
  putFile(s3dir, blobKey(hash), body);
  if (i % 2 === 0) named.push({ path: `notes/n${String(i).padStart(7, '0')}.md`, size: body.length, mtimeMs: 0, sha256: hash });
}
const files = named.sort((a, b) => (a.path < b.path ? -1 : 1));
const snapshot = { scope: 'account', version: scopeVersion(files), totalBytes: 0, files };
const directory = Buffer.from(JSON.stringify({ teams: {}, users: {} }));
putFile(s3dir, indexKey('account', snapshot.version), serializeIndex(snapshot), 'application/json');
putFile(s3dir, directoryKey(sha(directory)), directory, 'application/json');
const pointer = pointerFor(sha(directory), [snapshot], old.toISOString());
putFile(s3dir, historyKey(pointer), serializePointer(pointer), 'application/json');
putFile(s3dir, POINTER_KEY, serializePointer(pointer), 'application/json');
log(`written in ${((performance.now() - t) / 1000).toFixed(1)} s`);

const s3 = start('s3rver', process.execPath, ['--openssl-legacy-provider', join(REPO, 'test', 'helpers', 's3rver-child.cjs'), s3dir, '0', BUCKET]);
const endpoint = `http://127.0.0.1:${(await s3.waitFor(/listening (\d+)/, 30_000))[1]}`;
const pg = await startPostgres();
const env = { ...process.env, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_S3: endpoint, KNOWLEDGEFS_STATE_URL: pg.url() };

// Baseline: one listing of everything, in-process.
const store = new S3ObjectStore(resolveS3Config({ store: `s3://${BUCKET}/${PREFIX}`, timeoutMs: 60_000, env }));
t = performance.now();
let listed = 0;
for await (const _ of store.list('')) listed++;
const listMs = performance.now() - t;
await store.close();
log(`listing: ${listed} objects in ${(listMs / 1000).toFixed(2)} s`);

async function gc(extra) {
  const r = await run(`/usr/bin/time -f 'peak-rss-kib %M' '${process.execPath}' '${BIN}' gc --store s3://${BUCKET}/${PREFIX} --s3-timeout 10m ${extra}`, { env, timeoutMs: 1_800_000 });
  if (r.code !== 0) throw new Error(`gc ${extra} failed (exit ${r.code}): ${r.stderr.slice(-600)}`);
  const rss = Number(/peak-rss-kib (\d+)/.exec(r.stderr)?.[1]);
  return { ms: r.ms, rssMiB: rss / 1024, summary: r.stdout.split('\n').find((l) => /^(would delete|deleted) /.test(l)) ?? r.stdout.trim() };
}
process.on('unhandledRejection', async (err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  await cleanup();
  process.exit(1);
});
const dry = await gc('');
log(`dry run: ${(dry.ms / 1000).toFixed(2)} s, peak RSS ${dry.rssMiB.toFixed(0)} MiB: ${dry.summary}`);
const del = await gc('--delete');
log(`--delete: ${(del.ms / 1000).toFixed(2)} s, peak RSS ${del.rssMiB.toFixed(0)} MiB: ${del.summary}`);
const again = await gc('--delete');
log(`again: ${(again.ms / 1000).toFixed(2)} s, peak RSS ${again.rssMiB.toFixed(0)} MiB`);
const idle = await run(`/usr/bin/time -f 'peak-rss-kib %M' '${process.execPath}' '${BIN}' --version`, { env });
const baseRss = Number(/peak-rss-kib (\d+)/.exec(idle.stderr)?.[1]) / 1024;

process.stdout.write(`${JSON.stringify({
  blobs: BLOBS,
  named: files.length,
  listing: { objects: listed, seconds: +(listMs / 1000).toFixed(2) },
  dryRun: { seconds: +(dry.ms / 1000).toFixed(2), peakRssMiB: +dry.rssMiB.toFixed(0), vsListing: +(dry.ms / listMs).toFixed(2) },
  delete: { seconds: +(del.ms / 1000).toFixed(2), peakRssMiB: +del.rssMiB.toFixed(0), summary: del.summary },
  again: { seconds: +(again.ms / 1000).toFixed(2), peakRssMiB: +again.rssMiB.toFixed(0) },
  cliAloneRssMiB: +baseRss.toFixed(0),
}, null, 2)}\n`);
await stop(s3);
await cleanup();
