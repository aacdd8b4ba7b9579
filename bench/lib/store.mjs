// Object storage: `knowledgefs publish` and replicas serving from a bucket,
// against a real S3-protocol server on this machine (s3rver, the one the
// tests use), each beside a baseline measured in the same rounds:
//
// - publish of the whole corpus into a fresh prefix, vs `rclone copy` of the
//   same tree into another (same --transfers as our --concurrency);
// - publish after a one-file edit, vs `rclone sync` after the same edit;
//   and a publish with nothing changed;
// - a replica's start (`serve --store`) vs `serve --data` on the same files;
// - how long after `publish` exits a running replica serves the new plan;
// - mount ready and the first `grep -r` through a bucket-backed replica vs a
//   directory-backed one.
//
// s3rver is far slower than S3 or MinIO per request (a few ms each, on the
// same 2 CPUs as everything else), so the absolute publish times are an
// upper bound; the request counts are what carries over.

import { cpSync, appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { REPO, BIN, startServer, createSession, writeToken, startMount, stopMount } from './knowledgefs.mjs';
import { start, stop, run, log } from './proc.mjs';
import { coldRounds } from './rounds.mjs';
import { summarize } from './stats.mjs';

const S3RVER_CHILD = join(REPO, 'test', 'helpers', 's3rver-child.cjs');
export const BUCKET = 'bench';
const TRANSFERS = 16;

export async function startS3(dir) {
  mkdirSync(dir, { recursive: true });
  const handle = start('s3rver', process.execPath, ['--openssl-legacy-provider', S3RVER_CHILD, dir, '0', BUCKET]);
  const m = await handle.waitFor(/listening (\d+)/, 30_000);
  return { handle, endpoint: `http://127.0.0.1:${m[1]}` };
}

export function envFor(s3) {
  const env = { ...process.env, AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_S3: s3.endpoint };
  // rclone's S3 remote from the environment (no config file); it trips over a CA bundle meant for TLS proxies.
  Object.assign(env, {
    RCLONE_CONFIG_KFSBENCH_TYPE: 's3', RCLONE_CONFIG_KFSBENCH_PROVIDER: 'Other', RCLONE_CONFIG_KFSBENCH_ENDPOINT: s3.endpoint,
    RCLONE_CONFIG_KFSBENCH_ACCESS_KEY_ID: 'S3RVER', RCLONE_CONFIG_KFSBENCH_SECRET_ACCESS_KEY: 'S3RVER', RCLONE_CONFIG_KFSBENCH_FORCE_PATH_STYLE: 'true',
  });
  delete env.AWS_CA_BUNDLE;
  return env;
}

async function timedOk(what, cmd, env) {
  const r = await run(cmd, { env, timeoutMs: 900_000 });
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}): ${(r.stderr || r.stdout).slice(-400)}`);
  return r;
}

export const publishCmd = (data, prefix) => `'${process.execPath}' '${BIN}' publish --data '${data}' --store s3://${BUCKET}/${prefix} --concurrency ${TRANSFERS} --json`;
const rcloneCmd = (verb, data, prefix) => `rclone ${verb} '${data}' kfsbench:${BUCKET}/${prefix} --transfers ${TRANSFERS} --checkers ${TRANSFERS} --retries 1`;

async function startStoreServer(prefix, workDir, env) {
  mkdirSync(workDir, { recursive: true });
  const adminToken = randomBytes(24).toString('hex');
  const adminFile = join(workDir, 'admin-token');
  writeFileSync(adminFile, adminToken, { mode: 0o600 });
  const t0 = process.hrtime.bigint();
  const handle = start('serve-store', process.execPath, [BIN, 'serve', '--store', `s3://${BUCKET}/${prefix}`, '--listen', '127.0.0.1:0', '--admin-token-file', adminFile,
    '--state', join(workDir, 'state.json'), '--audit-log', join(workDir, 'audit.log')], { env });
  try {
    const m = await handle.waitFor(/listening on (http:\/\/[^\s]+)/, 300_000);
    return { handle, url: m[1].replace(/\/$/, ''), adminToken, startMs: Number(process.hrtime.bigint() - t0) / 1e6 };
  } catch (err) {
    await stop(handle);
    throw err;
  }
}

async function planVersion(server, token) {
  const res = await fetch(`${server.url}/v1/plan`, { headers: { authorization: `Bearer ${token}` } });
  const etag = res.headers.get('etag');
  await res.arrayBuffer();
  return etag;
}

export async function measureStore({ dataDir, files, runs, runDir }) {
  const work = join(runDir, 'store');
  const data = join(work, 'data');
  cpSync(dataDir, data, { recursive: true, preserveTimestamps: true });
  const s3 = await startS3(join(work, 's3'));
  const env = envFor(s3);
  const out = { files, runs, s3rver: true };
  const stops = [() => stop(s3.handle)];
  try {
    // ---- publish vs rclone ---------------------------------------------
    const first = [], rcloneFirst = [], noop = [], edit = [], rcloneEdit = [];
    let uploaded = null;
    for (let i = 0; i < runs; i++) {
      const a = await timedOk('publish', publishCmd(data, `p${i}`), env);
      first.push(a.ms);
      uploaded = JSON.parse(a.stdout).uploaded;
      rcloneFirst.push((await timedOk('rclone copy', rcloneCmd('copy', data, `r${i}`), env)).ms);
      noop.push((await timedOk('publish (unchanged)', publishCmd(data, `p${i}`), env)).ms);
      appendFileSync(join(data, 'account', 'DUTY.md'), `\nedited in round ${i}\n`);
      const e = await timedOk('publish (one-file edit)', publishCmd(data, `p${i}`), env);
      edit.push(e.ms);
      const u = JSON.parse(e.stdout).uploaded;
      if (u.blobs !== 1) throw new Error(`a one-file edit uploaded ${u.blobs} blobs`);
      rcloneEdit.push((await timedOk('rclone sync', rcloneCmd('sync', data, `r${i}`), env)).ms);
      log(`store ${i + 1}/${runs}: publish ${(a.ms / 1000).toFixed(2)} s (rclone copy ${(rcloneFirst.at(-1) / 1000).toFixed(2)} s), unchanged ${(noop.at(-1) / 1000).toFixed(2)} s, one-file edit ${(e.ms / 1000).toFixed(2)} s (rclone sync ${(rcloneEdit.at(-1) / 1000).toFixed(2)} s)`);
    }
    Object.assign(out, {
      publishFirst: summarize(first), rcloneCopy: summarize(rcloneFirst), firstUploaded: uploaded,
      publishUnchanged: summarize(noop), publishOneFileEdit: summarize(edit), rcloneSyncOneFileEdit: summarize(rcloneEdit),
    });

    // ---- replica start, and a new publication reaching it ------------------
    const latest = `p${runs - 1}`;
    const storeStart = [], dirStart = [], seen = [];
    for (let i = 0; i < runs; i++) {
      const d = await startServer(data, join(work, `cp-dir-${i}`));
      dirStart.push(d.startMs ?? NaN);
      await stop(d.handle);
      const r = await startStoreServer(latest, join(work, `cp-store-${i}`), env);
      storeStart.push(r.startMs);
      try {
        const token = (await createSession(r, { kind: 'personal', creator: 'bench' })).token;
        const before = await planVersion(r, token);
        appendFileSync(join(data, 'account', 'DUTY.md'), `\nseen round ${i}\n`);
        await timedOk('publish', publishCmd(data, latest), env);
        const t0 = performance.now();
        while ((await planVersion(r, token)) === before) {
          if (performance.now() - t0 > 30_000) throw new Error('a replica did not see a new publication within 30 s');
          await new Promise((res) => setTimeout(res, 10));
        }
        seen.push(performance.now() - t0);
      } finally {
        await stop(r.handle);
      }
    }
    Object.assign(out, { serveStoreStart: summarize(storeStart), serveDataStart: dirStart.every(Number.isFinite) ? summarize(dirStart) : null, newPublicationSeen: summarize(seen) });
    log(`store: serve --store ready ${(out.serveStoreStart.median / 1000).toFixed(2)} s; a new publication served ${out.newPublicationSeen.median.toFixed(0)} ms after publish exits`);

    // ---- mounts through a bucket-backed and a directory-backed replica -----
    const dirServer = await startServer(data, join(work, 'cp-dir'));
    stops.push(() => stop(dirServer.handle));
    const storeServer = await startStoreServer(latest, join(work, 'cp-store'), env);
    stops.push(() => stop(storeServer.handle));
    const tokenDir = writeToken(work, 'dir', (await createSession(dirServer, { kind: 'personal', creator: 'bench' })).token);
    const tokenStore = writeToken(work, 'store', (await createSession(storeServer, { kind: 'personal', creator: 'bench' })).token);
    const mountsDir = join(work, 'mounts');
    const c = await coldRounds([
      { key: 'dir', label: 'mount via serve --data', start: () => startMount(dirServer, tokenDir, mountsDir, { prefetch: 'on' }), stop: stopMount },
      { key: 'store', label: 'mount via serve --store', start: () => startMount(storeServer, tokenStore, mountsDir, { prefetch: 'on' }), stop: stopMount },
    ], runs, out.errors = []);
    if (c.dir.grep && c.store.grep && c.dir.grep.output !== c.store.grep.output) out.errors.push(`grep -r output differs: directory ${c.dir.grep.output}, bucket ${c.store.grep.output}`);
    Object.assign(out, { mountViaData: c.dir, mountViaStore: c.store });
  } finally {
    for (const s of stops.reverse()) await s().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  }
  return out;
}

const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const ratio = (a, b) => (a && b ? `${(a.median / b.median).toFixed(2)}×` : '—');

/** The section's table. */
export function storeTable(st) {
  if (!st || st.error) return st?.error ? `object storage: ${st.error}` : '';
  const rows = [
    ['publish, first (whole corpus)', st.publishFirst, 'rclone copy', st.rcloneCopy],
    ['publish, nothing changed', st.publishUnchanged, null, null],
    ['publish after a one-file edit', st.publishOneFileEdit, 'rclone sync', st.rcloneSyncOneFileEdit],
    ['replica start: serve --store', st.serveStoreStart, 'serve --data', st.serveDataStart],
    ['mount ready via serve --store', st.mountViaStore?.ready, 'via serve --data', st.mountViaData?.ready],
    ['first grep -r via serve --store', st.mountViaStore?.grep, 'via serve --data', st.mountViaData?.grep],
  ];
  const lines = [`object storage (s3rver on this machine, ${st.files} files; median of ${st.runs})`];
  for (const [label, ours, baseLabel, base] of rows) {
    if (!ours) continue;
    lines.push(`  ${label.padEnd(34)} ${s(ours.median).padStart(9)}${base ? `   ${baseLabel}: ${s(base.median)} (${ratio(ours, base)})` : ''}`);
  }
  if (st.newPublicationSeen) lines.push(`  ${'new publication served after'.padEnd(34)} ${`${st.newPublicationSeen.median.toFixed(0)} ms`.padStart(9)}   (from publish exiting to the replica's plan; --publication-poll 500ms)`);
  return lines.join('\n');
}
