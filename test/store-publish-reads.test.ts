// Publishing while runners read: every file served is wholly one version,
// never a mix and never bytes that do not match their sha256. Checked over
// HTTP (files and batches, many reads in flight) and through a real mount
// whose `cat`s run in a shell loop while new publications land.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHA256_HEADER } from '../src/core/wire.js';
import { publishTo, startBucketControlPlane, type BucketControlPlane } from './helpers/bucket.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { fuseSuite, sh, startMount, waitFor } from './helpers/mount.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const PATHS = Array.from({ length: 24 }, (_, i) => `team_payments/notes/n${String(i).padStart(2, '0')}.md`);
const VERSIONS = ['v1', 'v2', 'v3', 'v4'];

/** A version's file: its marker on every line, so a mix of two versions cannot pass for either. */
function content(version: string, path: string): string {
  return `${`${version} ${path} `.repeat(8)}\n`.repeat(200);
}

async function writeVersion(data: string, version: string): Promise<void> {
  for (const p of PATHS) await writeDataFile(data, `teams/${p.slice('team_'.length)}`, content(version, p));
}

/** Which version `body` wholly is, or null when it is none of them. */
function versionOf(path: string, body: string): string | null {
  return VERSIONS.find((v) => content(v, path) === body) ?? null;
}

let s3: TestS3;
let data: string;
let cp: BucketControlPlane;
let token: string;

beforeAll(async () => {
  s3 = await startS3();
  data = await makeDataDir({ teams: { payments: 'Payments' }, users: { alice: { teams: ['payments'] } }, files: { 'teams/payments/DUTY.md': '# Payments\n' } });
  await writeVersion(data, 'v1');
  await publishTo(s3, 'live', data);
  cp = await startBucketControlPlane(s3, 'live', { publicationPollMs: 20, blobCacheBytes: 64 * 1024 });
  token = (await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' })).token;
});
afterAll(async () => {
  await cp?.close();
  await s3?.close();
  if (data) await removeDataDir(data);
});

describe('publish during reads, over HTTP', () => {
  it('every file and batch frame is wholly one version and matches its sha256', async () => {
    const seen = new Map<string, number>();
    const bad: string[] = [];
    let stop = false;
    const note = (path: string, body: Buffer, claimed: string | null) => {
      const v = versionOf(path, body.toString('utf8'));
      if (v === null || claimed !== sha(body)) bad.push(`${path}: ${v ?? 'mixed or unknown'} (${body.length} bytes, sha ${claimed === sha(body) ? 'ok' : 'wrong'})`);
      else seen.set(v, (seen.get(v) ?? 0) + 1);
    };
    const fileReader = async (offset: number) => {
      for (let i = offset; !stop; i++) {
        const path = PATHS[i % PATHS.length] as string;
        const res = await fetch(`${cp.url}/v1/files/${path}`, { headers: { authorization: `Bearer ${token}` } });
        const body = Buffer.from(await res.arrayBuffer());
        if (res.status !== 200) bad.push(`${path}: HTTP ${res.status} ${body.toString().slice(0, 200)}`);
        else note(path, body, res.headers.get(SHA256_HEADER));
      }
    };
    const batchReader = async () => {
      while (!stop) {
        const res = await fetch(`${cp.url}/v1/batch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}` },
          body: JSON.stringify({ scope: 'team_payments', paths: PATHS.map((p) => p.slice('team_payments/'.length)) }),
        });
        let buf = Buffer.from(await res.arrayBuffer());
        if (res.status !== 200) {
          bad.push(`batch: HTTP ${res.status}`);
          continue;
        }
        while (buf.length > 0) {
          const nl = buf.indexOf(10);
          const head = JSON.parse(buf.subarray(0, nl).toString()) as { path: string; sha256?: string; size?: number; missing?: true };
          buf = buf.subarray(nl + 1);
          if (head.missing) {
            bad.push(`batch: ${head.path} missing`);
            continue;
          }
          note(`team_payments/${head.path}`, buf.subarray(0, head.size), head.sha256 ?? null);
          buf = buf.subarray(head.size);
        }
      }
    };
    const readers = [fileReader(0), fileReader(7), fileReader(13), batchReader()];
    for (const v of ['v2', 'v3', 'v4']) {
      await new Promise((r) => setTimeout(r, 300));
      await writeVersion(data, v);
      await publishTo(s3, 'live', data);
    }
    await waitFor(() => (seen.get('v4') ?? 0) > PATHS.length, 15_000, 20);
    stop = true;
    await Promise.all(readers);
    expect(bad).toEqual([]);
    // Reads really did span publications.
    expect(seen.get('v1')).toBeGreaterThan(0);
    expect(seen.get('v4')).toBeGreaterThan(0);
  });
});

fuseSuite('publish during reads, through a real mount', () => {
  it('cat in a loop sees each file wholly old or wholly new, and the new version in the end', async () => {
    await writeVersion(data, 'v1');
    await publishTo(s3, 'live', data);
    const m = await startMount({ serverUrl: cp.url, token, args: ['--sync-interval', '100ms', '--grant-ttl', '0'] });
    try {
      const files = PATHS.map((p) => `knowledge/${p}`).join(' ');
      // Each cat's output framed by a marker line; the loop runs until told to stop.
      const loop = sh(`i=0; while [ ! -e stop ] && [ $i -lt 2000 ]; do for f in ${files}; do printf '@@%s\\n' "$f"; cat "$f" || printf 'CAT-FAILED\\n'; done; i=$((i+1)); done`, { cwd: m.dir, timeoutMs: 60_000 });
      for (const v of ['v2', 'v3']) {
        await new Promise((r) => setTimeout(r, 400));
        await writeVersion(data, v);
        await publishTo(s3, 'live', data);
      }
      await waitFor(async () => (await sh(`cat knowledge/${PATHS[0]}`, { cwd: m.dir })).stdout === content('v3', PATHS[0] as string), 15_000);
      await new Promise((r) => setTimeout(r, 300));
      await sh('touch stop', { cwd: m.dir });
      const out = await loop;
      expect(out.timedOut).toBe(false);
      const seen = new Map<string, number>();
      const bad: string[] = [];
      for (const chunk of out.stdout.split('@@knowledge/').slice(1)) {
        const nl = chunk.indexOf('\n');
        const path = chunk.slice(0, nl);
        const body = chunk.slice(nl + 1);
        // An open racing the daemon's next plan may fail (EIO, docs/SEMANTICS.md), never print a mix.
        if (body === 'CAT-FAILED\n') continue;
        const v = versionOf(path, body);
        if (v === null) bad.push(`${path}: ${body.slice(0, 80)}…`);
        else seen.set(v, (seen.get(v) ?? 0) + 1);
      }
      expect(bad).toEqual([]);
      // A failed cat said why: EIO (an open racing the plan) or ESTALE (a descriptor held across the switch), nothing else.
      for (const line of out.stderr.split('\n').filter((l) => l !== '')) expect(line).toMatch(/Input\/output error|Stale file handle/);
      expect(seen.get('v1')).toBeGreaterThan(0);
      expect(seen.get('v3')).toBeGreaterThan(0);
    } finally {
      await m.stop();
    }
  });
});
