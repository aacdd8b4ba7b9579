// A replica whose object store misbehaves, through a fault proxy in front of
// a real S3-protocol server: garbage, flipped, truncated, 5xx, resets, hangs
// and oversized objects. Never a wrong byte, never a hang past --s3-timeout,
// never a half-taken publication; the replica recovers by itself.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { POINTER_KEY } from '../src/core/publication.js';
import { publishTo, s3Store, startBucketControlPlane, type BucketControlPlane } from './helpers/bucket.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { startFaultProxy, type FaultProxy, type ProxyMode } from './helpers/fault-proxy.js';
import { waitFor } from './helpers/mount.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

let s3: TestS3;
let proxy: FaultProxy;
let data: string;
let n = 0;

beforeAll(async () => {
  s3 = await startS3();
  proxy = await startFaultProxy(s3.endpoint);
  data = await makeDataDir({
    teams: { payments: 'Payments' },
    users: { alice: { teams: ['payments'] } },
    files: { 'teams/payments/DUTY.md': '# Payments\n', 'teams/payments/db.md': 'db v1\n'.repeat(100) },
  });
});
afterAll(async () => {
  await proxy?.close();
  await s3?.close();
  await removeDataDir(data);
});

const viaProxy = () => ({ env: { ...s3.env, AWS_ENDPOINT_URL_S3: proxy.url } });
const blobs = (method: string, url: string) => method === 'GET' && url.includes('/blobs/');

async function fresh(): Promise<{ cp: BucketControlPlane; token: string; p: string }> {
  const p = `f${++n}`;
  await publishTo(s3, p, data);
  const cp = await startBucketControlPlane(s3, p, { ...viaProxy(), s3TimeoutMs: 1_500, publicationPollMs: 50 });
  const token = (await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' })).token;
  return { cp, token, p };
}

async function get(cp: BucketControlPlane, token: string, path: string) {
  const started = Date.now();
  const res = await fetch(`${cp.url}/v1/files/${path}`, { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return { status: res.status, text, ms: Date.now() - started, retryAfter: res.headers.get('retry-after') };
}

describe('faults of the object store while serving', () => {
  const cases: { mode: ProxyMode; status: number; message: RegExp }[] = [
    { mode: { kind: 'garbage' }, status: 502, message: /is corrupt \(.*\); not served/ },
    { mode: { kind: 'flip' }, status: 502, message: /is corrupt \(hashes to [0-9a-f]{64}\); not served/ },
    { mode: { kind: 'truncate' }, status: 503, message: /cannot reach|no complete answer/ },
    { mode: { kind: 'status', status: 500, body: '<Error><Code>InternalError</Code></Error>' }, status: 503, message: /answered HTTP 500 InternalError/ },
    { mode: { kind: 'reset' }, status: 503, message: /cannot reach .*\(ECONNRESET\)/ },
    { mode: { kind: 'hang' }, status: 503, message: /no complete answer from .* within 1500 ms \(--s3-timeout\)/ },
  ];
  for (const c of cases) {
    it(`${c.mode.kind}: ${c.status}, never the bytes; served again once the store behaves`, async () => {
      const { cp, token } = await fresh();
      try {
        proxy.setRules([{ mode: c.mode, match: blobs }]);
        const bad = await get(cp, token, 'team_payments/db.md');
        expect(bad.status).toBe(c.status);
        expect(bad.text).not.toContain('db v1');
        expect(JSON.parse(bad.text).error.message).toMatch(c.message);
        if (c.status === 503) expect(bad.retryAfter).toBe('1');
        expect(bad.ms).toBeLessThan(5_000);
        // Plans do not need the store.
        const plan = await fetch(`${cp.url}/v1/plan`, { headers: { authorization: `Bearer ${token}` } });
        expect(plan.status).toBe(200);
        proxy.setMode({ kind: 'pass' });
        const good = await get(cp, token, 'team_payments/db.md');
        expect(good).toMatchObject({ status: 200, text: 'db v1\n'.repeat(100) });
      } finally {
        proxy.setMode({ kind: 'pass' });
        await cp.close();
      }
    });
  }
});

describe('faults while a new publication is loaded', () => {
  it('an index answered with garbage is not taken; the previous one is served; it is taken once the store behaves', async () => {
    const { cp, token, p } = await fresh();
    try {
      proxy.setRules([{ mode: { kind: 'garbage' }, match: (m, url) => m === 'GET' && url.includes('/indexes/') }]);
      await writeDataFile(data, 'teams/payments/db.md', 'db v2\n');
      await publishTo(s3, p, data);
      await waitFor(() => cp.logs.some((l) => /refusing the publication/.test(l)), 3_000, 25);
      expect(cp.logs.find((l) => /refusing the publication/.test(l))).toMatch(/indexes\/team_payments\/[0-9a-f]{64}\.json: not valid JSON/);
      expect((await get(cp, token, 'team_payments/db.md')).text).toBe('db v1\n'.repeat(100));
      proxy.setMode({ kind: 'pass' });
      // A refused pointer is looked at again only when it changes: publish once more.
      await writeDataFile(data, 'teams/payments/db.md', 'db v3\n');
      await publishTo(s3, p, data);
      const until = Date.now() + 5_000;
      let text = '';
      while (text !== 'db v3\n' && Date.now() < until) text = (await get(cp, token, 'team_payments/db.md')).text;
      expect(text).toBe('db v3\n');
    } finally {
      proxy.setMode({ kind: 'pass' });
      await writeDataFile(data, 'teams/payments/db.md', 'db v1\n'.repeat(100));
      await cp.close();
    }
  });

  it('the store down or hanging while a publication loads: not taken until it can be loaded whole', async () => {
    const { cp, token, p } = await fresh();
    try {
      proxy.setRules([{ mode: { kind: 'hang' }, match: (m, url) => m === 'GET' && url.includes('/indexes/') }]);
      await writeDataFile(data, 'teams/payments/db.md', 'db v2\n');
      await publishTo(s3, p, data);
      // Under load another look may fail first (the pointer itself slow): wait for the index's own line.
      await waitFor(() => cp.logs.some((l) => /cannot follow new publications: GET .*indexes.*within 1500 ms/.test(l)) || undefined, 15_000, 25);
      expect((await get(cp, token, 'team_payments/db.md')).text).toBe('db v1\n'.repeat(100));
      // Unlike a malformed publication, an outage is retried: the same pointer is taken once the store answers.
      proxy.setMode({ kind: 'pass' });
      const until = Date.now() + 5_000;
      let text = '';
      while (text !== 'db v2\n' && Date.now() < until) text = (await get(cp, token, 'team_payments/db.md')).text;
      expect(text).toBe('db v2\n');
      expect(cp.logs.some((l) => /reachable again/.test(l))).toBe(true);
    } finally {
      proxy.setMode({ kind: 'pass' });
      await writeDataFile(data, 'teams/payments/db.md', 'db v1\n'.repeat(100));
      await cp.close();
    }
  });

  it('an oversized pointer is refused while it streams in, and the previous one stays', async () => {
    const { cp, token, p } = await fresh();
    const raw = s3Store(s3, p);
    try {
      await raw.put(POINTER_KEY, Buffer.alloc(5 * 1024 * 1024, ' '));
      await waitFor(() => cp.logs.some((l) => /current\.json.*more than the \d+ expected|longer than/.test(l)), 3_000, 25);
      expect(cp.logs.some((l) => /current\.json: object is \d+ bytes, more than the 4194304 expected/.test(l))).toBe(true);
      expect((await get(cp, token, 'team_payments/DUTY.md')).text).toBe('# Payments\n');
    } finally {
      await raw.close();
      await cp.close();
    }
  });
});

describe('faults at start', () => {
  it('a store answering garbage: the replica does not start, and says what it got', async () => {
    const p = `f${++n}`;
    await publishTo(s3, p, data);
    proxy.setMode({ kind: 'garbage' });
    try {
      const err = await startBucketControlPlane(s3, p, viaProxy()).catch((e: unknown) => e);
      expect((err as KnowledgeError).code).toBe('unavailable');
      expect((err as Error).message).toMatch(/refusing the publication: current\.json: not valid JSON/);
      proxy.setMode({ kind: 'status', status: 503, body: '<Error><Code>SlowDown</Code></Error>' });
      const slow = await startBucketControlPlane(s3, p, viaProxy()).catch((e: unknown) => e);
      expect((slow as Error).message).toMatch(/GET s3:\/\/knowledge\/f\d+\/current\.json: .* answered HTTP 503 SlowDown/);
    } finally {
      proxy.setMode({ kind: 'pass' });
    }
  });
});
