// A control plane serving packs from a publication in a real S3-protocol
// server (s3rver in a child process): the same answers as from a directory,
// new publications followed without a rescan, malformed ones refused whole,
// corrupt blobs never served, denied requests never touching the store, and
// a store that goes away answered with 503 + Retry-After, never a wrong answer.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrape, value } from './helpers/metrics-scrape.js';
import { KnowledgeError } from '../src/core/errors.js';
import { POINTER_KEY, blobKey, directoryKey, indexKey, parsePointer, serializePointer } from '../src/core/publication.js';
import type { Plan } from '../src/core/session/plan.js';
import { SHA256_HEADER } from '../src/core/wire.js';
import { droppingPuts, publishTo, s3Store, startBucketControlPlane, type BucketControlPlane } from './helpers/bucket.js';
import { directoryJsonOf, makeDataDir, removeDataDir, removeDataFile, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const sha = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search' },
  users: { alice: { teams: ['payments'] } },
  files: {
    'account/DUTY.md': '# Account duty\n',
    'account/guide.md': 'guide v1\n',
    'teams/payments/DUTY.md': '# Payments duty\n',
    'teams/payments/runbooks/db.md': 'db v1\n',
    'teams/search/DUTY.md': '# Search duty\n',
    'teams/search/arch.md': 'search arch\n',
  },
};

let s3: TestS3;
let dir: string;
let n = 0;
/** A fresh prefix per test: publications do not leak between tests. */
const prefix = () => `t${++n}`;

beforeAll(async () => {
  s3 = await startS3();
  dir = await makeDataDir(spec);
});
afterAll(async () => {
  await s3?.close();
  await removeDataDir(dir);
});

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

/**
 * A publication under a fresh prefix and a control plane serving it. With
 * `ownData` the test gets a data directory of its own to change and
 * republish; `close` stops the control plane and removes that directory.
 */
async function serving(options: Parameters<typeof startBucketControlPlane>[2] = {}, { ownData = false } = {}) {
  const p = prefix();
  const data = ownData ? await makeDataDir(spec) : dir;
  await publishTo(s3, p, data);
  const cp = await startBucketControlPlane(s3, p, options);
  const close = async () => {
    await cp.close();
    if (ownData) await removeDataDir(data);
  };
  return { p, data, cp, close };
}

async function plan(cp: BucketControlPlane, token: string): Promise<Plan> {
  const res = await fetch(`${cp.url}/v1/plan`, { headers: auth(token) });
  expect(res.status).toBe(200);
  return (await res.json()) as Plan;
}

async function file(cp: BucketControlPlane, token: string, path: string) {
  const res = await fetch(`${cp.url}/v1/files/${path}`, { headers: auth(token) });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes, sha: res.headers.get(SHA256_HEADER), retryAfter: res.headers.get('retry-after'), text: bytes.toString('utf8') };
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function filesOf(p: Plan, scope: string): Record<string, string> {
  return Object.fromEntries((p.scopes.find((s) => s.scope === scope)?.files ?? []).map((f) => [f.path, f.sha256]));
}

describe('serving a publication', () => {
  it('serves the same plan and bytes the directory holds, verified by sha256', async () => {
    const { cp, close } = await serving();
    try {
      const s = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
      const got = await plan(cp, s.token);
      expect(got.scopes.map((x) => x.scope)).toEqual(['account', 'team_payments']);
      expect(filesOf(got, 'team_payments')).toEqual({ 'DUTY.md': sha('# Payments duty\n'), 'runbooks/db.md': sha('db v1\n') });
      const f = await file(cp, s.token, 'team_payments/runbooks/db.md');
      expect(f).toMatchObject({ status: 200, text: 'db v1\n', sha: sha('db v1\n') });
      // The read tool and the manifest take the same path through the store.
      const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(s.token), body: JSON.stringify({ path: 'account/guide.md' }) });
      expect(((await read.json()) as { contentBase64: string }).contentBase64).toBe(Buffer.from('guide v1\n').toString('base64'));
      const manifest = (await (await fetch(`${cp.url}/v1/manifest`, { headers: auth(s.token) })).json()) as { text: string };
      expect(manifest.text).toContain('# Payments duty');
      expect((await file(cp, s.token, 'team_payments/nope.md')).status).toBe(404);
    } finally {
      await close();
    }
  });

  it('follows a new publication without a rescan, and an unchanged pointer costs one conditional GET a poll', async () => {
    const { p, data, cp, close } = await serving({ publicationPollMs: 50 }, { ownData: true });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const before = await plan(cp, s.token);
      const gets = cp.store.counts.get;
      const others = cp.store.counts.list + cp.store.counts.has + cp.store.counts.put;
      await new Promise((r) => setTimeout(r, 500));
      // Only pointer polls happened: no listing, no HEAD, one GET per poll.
      expect(cp.store.counts.list + cp.store.counts.has + cp.store.counts.put).toBe(others);
      expect(cp.store.counts.get - gets).toBeGreaterThan(3);
      await writeDataFile(data, 'teams/payments/runbooks/db.md', 'db v2\n');
      await writeDataFile(data, 'teams/payments/new.md', 'new\n');
      await publishTo(s3, p, data);
      await until('the new publication', async () => (await plan(cp, s.token)).version !== before.version);
      const after = await plan(cp, s.token);
      expect(filesOf(after, 'team_payments')['runbooks/db.md']).toBe(sha('db v2\n'));
      expect((await file(cp, s.token, 'team_payments/new.md')).text).toBe('new\n');
      expect((await file(cp, s.token, 'team_payments/runbooks/db.md')).text).toBe('db v2\n');
    } finally {
      await close();
    }
  });

  it('a plan long-poll answers as soon as a new publication arrives', async () => {
    const { p, data, cp, close } = await serving({ publicationPollMs: 50 }, { ownData: true });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const first = await fetch(`${cp.url}/v1/plan`, { headers: auth(s.token) });
      const etag = first.headers.get('etag') as string;
      await first.arrayBuffer();
      const waiting = fetch(`${cp.url}/v1/plan?wait=20`, { headers: { ...auth(s.token), 'if-none-match': etag } });
      await new Promise((r) => setTimeout(r, 200));
      await writeDataFile(data, 'teams/payments/DUTY.md', '# Payments duty v2\n');
      await publishTo(s3, p, data);
      const res = await waiting;
      expect(res.status).toBe(200);
      expect(filesOf((await res.json()) as Plan, 'team_payments')['DUTY.md']).toBe(sha('# Payments duty v2\n'));
    } finally {
      await close();
    }
  });
});

describe('the version a plan names', () => {
  it('an open naming the previous publication\'s version gets it whole; older ones and the current one get the current', async () => {
    const { p, data, cp, close } = await serving({ publicationPollMs: 50 }, { ownData: true });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const path = 'team_payments/runbooks/db.md';
      const at = async (version: string | null) => {
        const res = await fetch(`${cp.url}/v1/files/${path}${version === null ? '' : `?sha256=${version}`}`, { headers: auth(s.token) });
        return { status: res.status, text: await res.text(), sha: res.headers.get(SHA256_HEADER) };
      };
      for (const v of ['db v2\n', 'db v3\n']) {
        await writeDataFile(data, 'teams/payments/runbooks/db.md', v);
        await publishTo(s3, p, data);
        await until(`publication ${v}`, async () => (await at(null)).text === v);
      }
      // v2 is the previous publication's version: served whole, under its own hash.
      expect(await at(sha('db v2\n'))).toEqual({ status: 200, text: 'db v2\n', sha: sha('db v2\n') });
      // v1 is two publications back, and a made-up version is no version: the current one.
      expect(await at(sha('db v1\n'))).toEqual({ status: 200, text: 'db v3\n', sha: sha('db v3\n') });
      expect(await at('0'.repeat(64))).toMatchObject({ status: 200, text: 'db v3\n' });
      expect((await at('not-a-hash')).status).toBe(400);
      // Denied stays denied, whatever version is named.
      const other = await cp.createSession({ kind: 'team', creator: 'alice', team: 'search' });
      const res = await fetch(`${cp.url}/v1/files/${path}?sha256=${sha('db v2\n')}`, { headers: auth(other.token) });
      expect(res.status).toBe(403);
    } finally {
      await close();
    }
  });

  it('a path the current publication removed is not served, whatever version is named', async () => {
    const { p, data, cp, close } = await serving({ publicationPollMs: 50 }, { ownData: true });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      await writeDataFile(data, 'account/oops.md', 'a secret published by mistake\n');
      await publishTo(s3, p, data);
      await until('the publication with oops.md', async () => (await file(cp, s.token, 'account/oops.md')).status === 200);
      await removeDataFile(data, 'account/oops.md');
      await publishTo(s3, p, data);
      await until('the publication without oops.md', async () => !('oops.md' in filesOf(await plan(cp, s.token), 'account')));
      const old = sha('a secret published by mistake\n');
      for (const query of ['', `?sha256=${old}`, `?sha256=${'0'.repeat(64)}`]) {
        const res = await fetch(`${cp.url}/v1/files/account/oops.md${query}`, { headers: auth(s.token) });
        expect({ query, status: res.status, served: (await res.text()).includes('secret') }).toEqual({ query, status: 404, served: false });
      }
    } finally {
      await close();
    }
  });
});

describe('denied requests never touch the store', () => {
  it('counts object-store requests: a denial adds none, an allowed first read adds one', async () => {
    const { cp, close } = await serving({ publicationPollMs: 60_000 });
    try {
      const team = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const personal = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
      const before = cp.store.total();
      expect((await file(cp, team.token, 'team_search/arch.md')).status).toBe(403);
      expect((await file(cp, personal.token, 'team_search/arch.md')).status).toBe(404);
      const read = await fetch(`${cp.url}/v1/read`, { method: 'POST', headers: auth(personal.token), body: JSON.stringify({ path: 'team_search/DUTY.md' }) });
      expect(read.status).toBe(404);
      const batch = await fetch(`${cp.url}/v1/batch`, { method: 'POST', headers: auth(team.token), body: JSON.stringify({ scope: 'team_search', paths: ['arch.md'] }) });
      expect(batch.status).toBe(403);
      expect(cp.store.total()).toBe(before);
      // The counter does count: an allowed read of an uncached blob is one GET.
      expect((await file(cp, team.token, 'team_payments/runbooks/db.md')).status).toBe(200);
      expect(cp.store.total()).toBe(before + 1);
      // ...and a second read is served from the cache.
      expect((await file(cp, team.token, 'team_payments/runbooks/db.md')).status).toBe(200);
      expect(cp.store.total()).toBe(before + 1);
    } finally {
      await close();
    }
  });
});

describe('metrics with a publication', () => {
  it('count blob-cache hits and misses as the reads went, and each publication poll as a scan', async () => {
    const { cp, close } = await serving({ publicationPollMs: 50 });
    try {
      const team = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const before = await scrape(`${cp.url}/metrics`, cp.adminToken);
      expect((await file(cp, team.token, 'team_payments/runbooks/db.md')).status).toBe(200);
      expect((await file(cp, team.token, 'team_payments/runbooks/db.md')).status).toBe(200);
      let after = before;
      const delta = (name: string, labels: Record<string, string>) => value(after, name, labels) - value(before, name, labels);
      await until('two publication polls', async () => {
        after = await scrape(`${cp.url}/metrics`, cp.adminToken);
        return delta('knowledgefs_pack_scans_total', { kind: 'full', result: 'ok' }) >= 2;
      });
      expect(delta('knowledgefs_blob_cache_requests_total', { result: 'miss' })).toBe(1);
      expect(delta('knowledgefs_blob_cache_requests_total', { result: 'hit' })).toBe(1);
      expect(delta('knowledgefs_pack_scans_total', { kind: 'full', result: 'ok' })).toBeGreaterThanOrEqual(2);
      expect(value(after, 'knowledgefs_pack_files')).toBe(cp.cp.store.scopes().reduce((n, x) => n + x.files.length, 0));
    } finally {
      await close();
    }
  });
});

describe('malformed publications are refused whole', () => {
  async function setup() {
    const { p, data, cp, close } = await serving({ publicationPollMs: 50 }, { ownData: true });
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const good = await plan(cp, s.token);
    const raw = s3Store(s3, p);
    const pointerBytes = (await raw.get(POINTER_KEY, { maxBytes: 1 << 20 })) as { bytes: Buffer };
    const pointer = parsePointer(pointerBytes.bytes);
    return { p, data, cp, close, s, good, raw, pointer };
  }

  const cases: { name: string; log: RegExp; corrupt: (ctx: Awaited<ReturnType<typeof setup>>) => Promise<void> }[] = [
    { name: 'a pointer that is not JSON', log: /current\.json: not valid JSON/, corrupt: ({ raw }) => raw.put(POINTER_KEY, Buffer.from('{"format": 1, "scop')) },
    {
      name: 'a pointer to an index that does not exist',
      log: /indexes\/team_payments\/f{64}\.json: missing/,
      corrupt: ({ raw, pointer }) => raw.put(POINTER_KEY, serializePointer({ ...pointer, scopes: { ...pointer.scopes, team_payments: 'f'.repeat(64) } })),
    },
    {
      name: 'a pointer to a directory.json that does not exist',
      log: /directories\/e{64}\.json: missing/,
      corrupt: ({ raw, pointer }) => raw.put(POINTER_KEY, serializePointer({ ...pointer, directory: 'e'.repeat(64) })),
    },
    {
      name: 'a directory.json that does not hash to its name (tampered teams and memberships)',
      log: /directories\/d{64}\.json: does not hash to its name/,
      corrupt: async ({ raw, pointer }) => {
        // Well-formed, and it would give alice the search team and a new owner: only its hash gives it away.
        const tampered = directoryJsonOf({ teams: spec.teams, users: { alice: { teams: ['payments', 'search'] }, mallory: { teams: ['payments'], role: 'owner' } } });
        await raw.put(directoryKey('d'.repeat(64)), Buffer.from(tampered));
        await raw.put(POINTER_KEY, serializePointer({ ...pointer, directory: 'd'.repeat(64), publishedAt: 'later' }));
      },
    },
    {
      name: 'an index whose files do not hash to its version',
      log: /do not hash to the version/,
      corrupt: async ({ raw, pointer, data, p }) => {
        // A real new publication, then its new index tampered with before replicas look.
        await writeDataFile(data, 'teams/payments/runbooks/db.md', 'db v2\n');
        const next = await publishTo(s3, p, data, { wrap: (st) => droppingPuts(st, (k) => k === POINTER_KEY) });
        const version = next.pointer.scopes['team_payments'] as string;
        const key = indexKey('team_payments', version);
        const index = JSON.parse(((await raw.get(key, { maxBytes: 1 << 20 })) as { bytes: Buffer }).bytes.toString()) as { files: { sha256: string }[] };
        (index.files[0] as { sha256: string }).sha256 = 'a'.repeat(64);
        await raw.put(key, Buffer.from(JSON.stringify(index)));
        await raw.put(POINTER_KEY, serializePointer({ ...pointer, scopes: { ...pointer.scopes, team_payments: version }, publishedAt: 'later' }));
      },
    },
    {
      name: 'a publication naming a blob that is missing',
      log: /blobs\/[0-9a-f]{64}: missing \(the blob of team_payments\/runbooks\/db\.md\)/,
      corrupt: async ({ data, p }) => {
        await writeDataFile(data, 'teams/payments/runbooks/db.md', 'db v3, never uploaded\n');
        // Publish everything but that blob.
        await publishTo(s3, p, data, { wrap: (st) => droppingPuts(st, (k) => k === blobKey(sha('db v3, never uploaded\n'))) });
      },
    },
  ];

  for (const c of cases) {
    it(`${c.name}: the previous one stays served, one log line says why`, async () => {
      const ctx = await setup();
      try {
        await c.corrupt(ctx);
        await until('the refusal log line', () => ctx.cp.logs.some((l) => /refusing the publication/.test(l) && c.log.test(l)));
        const still = await plan(ctx.cp, ctx.s.token);
        expect(still.version).toBe(ctx.good.version);
        expect((await file(ctx.cp, ctx.s.token, 'team_payments/runbooks/db.md')).text).toBe('db v1\n');
        // Logged once, not once per poll.
        await new Promise((r) => setTimeout(r, 300));
        expect(ctx.cp.logs.filter((l) => /refusing the publication/.test(l))).toHaveLength(1);
        // A good publication afterwards is taken.
        await writeDataFile(ctx.data, 'teams/payments/runbooks/db.md', 'db v4\n');
        await publishTo(s3, ctx.p, ctx.data);
        await until('the good publication', async () => (await file(ctx.cp, ctx.s.token, 'team_payments/runbooks/db.md')).text === 'db v4\n');
      } finally {
        await ctx.raw.close();
        await ctx.close();
      }
    });
  }

  it('a pointer that vanishes keeps the last publication served', async () => {
    const ctx = await setup();
    try {
      const { rm } = await import('node:fs/promises');
      await rm(`${s3.dir}/${s3.bucket}/${ctx.p}/current.json._S3rver_object`, { force: true });
      await until('the refusal', () => ctx.cp.logs.some((l) => /current\.json: missing/.test(l)));
      expect((await plan(ctx.cp, ctx.s.token)).version).toBe(ctx.good.version);
    } finally {
      await ctx.raw.close();
      await ctx.close();
    }
  });

  it('a new pointer read torn once (its new etag, a cut body) is read again and taken', async () => {
    // s3rver writes the new etag before the body is on disk: a poll in that
    // window gets a pointer that is not JSON under the etag of the good one.
    const ctx = await setup();
    try {
      let torn = 0;
      ctx.cp.store.rewriteGet = (key, got) => {
        if (key !== POINTER_KEY || torn > 0) return got;
        torn++;
        return { ...got, bytes: got.bytes.subarray(0, 7) };
      };
      await writeDataFile(ctx.data, 'teams/payments/runbooks/db.md', 'db v5\n');
      await publishTo(s3, ctx.p, ctx.data);
      await until('the refusal of the torn read', () => ctx.cp.logs.some((l) => /refusing the publication: .*current\.json: not valid JSON/.test(l)));
      await until('the publication, read again', async () => (await file(ctx.cp, ctx.s.token, 'team_payments/runbooks/db.md')).text === 'db v5\n');
      expect(torn).toBe(1);
    } finally {
      ctx.cp.store.rewriteGet = null;
      await ctx.raw.close();
      await ctx.close();
    }
  });
});

describe('integrity', () => {
  it('a blob whose bytes do not match its sha256 is a 502 integrity error and never served', async () => {
    const { p, cp, close } = await serving();
    const raw = s3Store(s3, p);
    try {
      await raw.put(blobKey(sha('db v1\n')), Buffer.from('db vX\n'));
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      const f = await file(cp, s.token, 'team_payments/runbooks/db.md');
      expect({ status: f.status, text: f.text }).toMatchObject({ status: 502 });
      expect(f.text).not.toContain('db vX');
      expect(JSON.parse(f.text)).toMatchObject({ error: { code: 'integrity' } });
      expect(cp.logs.some((l) => /blobs\/[0-9a-f]{64} is corrupt \(hashes to/.test(l))).toBe(true);
      // A body longer than the index says is refused while it streams in.
      await raw.put(blobKey(sha('# Payments duty\n')), Buffer.alloc(10_000_000, 'x'));
      const big = await file(cp, s.token, 'team_payments/DUTY.md');
      expect({ status: big.status, text: big.text.slice(0, 300) }).toMatchObject({ status: 502 });
      expect(big.bytes.length).toBeLessThan(1000);
      // Repaired in the store: served again (nothing bad was cached).
      await raw.put(blobKey(sha('db v1\n')), Buffer.from('db v1\n'));
      expect((await file(cp, s.token, 'team_payments/runbooks/db.md')).text).toBe('db v1\n');
    } finally {
      await raw.close();
      await close();
    }
  });
});

describe('the store unreachable', () => {
  it('at start: the control plane does not start, and says which store and why', async () => {
    const p = prefix();
    const err = await startBucketControlPlane(s3, p).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('unavailable');
    expect((err as Error).message).toMatch(new RegExp(`s3://${s3.bucket}/${p} at http://127\\.0\\.0\\.1:\\d+: refusing the publication: current\\.json: missing`));
    const down = await startBucketControlPlane(s3, p, { env: { ...s3.env, AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1' } }).catch((e: unknown) => e);
    expect((down as KnowledgeError).code).toBe('unavailable');
    expect((down as Error).message).toMatch(/GET s3:\/\/knowledge\/t\d+\/current\.json: cannot reach http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/);
  });

  it('while serving: plans still answer, reads that need the store are 503 with Retry-After, and it recovers', async () => {
    const { cp, close } = await serving({ publicationPollMs: 50, s3TimeoutMs: 1_500 });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      expect((await file(cp, s.token, 'team_payments/DUTY.md')).status).toBe(200);
      await s3.stop();
      await until('the outage log line', () => cp.logs.some((l) => /cannot follow new publications: .*cannot reach/.test(l)));
      expect((await plan(cp, s.token)).scopes.length).toBe(2);
      // Cached: still served.
      expect((await file(cp, s.token, 'team_payments/DUTY.md')).text).toBe('# Payments duty\n');
      const down = await file(cp, s.token, 'team_payments/runbooks/db.md');
      expect(down.status).toBe(503);
      expect(down.retryAfter).toBe('1');
      expect(JSON.parse(down.text).error.message).toMatch(/blobs\/[0-9a-f]{64}: cannot reach/);
      await s3.start();
      await until('recovery', async () => (await file(cp, s.token, 'team_payments/runbooks/db.md')).status === 200);
      await until('the recovery log line', () => cp.logs.some((l) => /reachable again/.test(l)));
      // Hanging: a 503 within the timeout, not a hung request.
      s3.pause();
      const started = Date.now();
      const slow = await file(cp, s.token, 'account/guide.md');
      expect(slow.status).toBe(503);
      expect(JSON.parse(slow.text).error.message).toContain('--s3-timeout');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      s3.resume();
      await s3.start();
      await close();
    }
  });
});

describe('metrics', () => {
  it('counts object-store requests and publications taken and refused', async () => {
    const { p, data, cp, close } = await serving({ publicationPollMs: 50 }, { ownData: true });
    try {
      const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
      await writeDataFile(data, 'teams/payments/DUTY.md', '# Payments v2\n');
      await publishTo(s3, p, data);
      await until('the new publication', async () => (await file(cp, s.token, 'team_payments/DUTY.md')).text === '# Payments v2\n');
      const raw = s3Store(s3, p);
      await raw.put(POINTER_KEY, Buffer.from('not json'));
      await raw.close();
      await until('the refusal', () => cp.logs.some((l) => /refusing the publication/.test(l)));
      const after = await scrape(`${cp.url}/metrics`, cp.adminToken);
      // The one loaded at start, and the new one.
      expect(value(after, 'knowledgefs_publications_total', { result: 'taken' })).toBe(2);
      expect(value(after, 'knowledgefs_publications_total', { result: 'refused' })).toBe(1);
      expect(value(after, 'knowledgefs_object_store_requests_total', { op: 'get', result: 'ok' })).toBeGreaterThan(4);
      expect(value(after, 'knowledgefs_object_store_requests_total', { op: 'head', result: 'ok' })).toBeGreaterThan(0);
      expect(value(after, 'knowledgefs_object_store_request_duration_seconds', { op: 'get' })).toBe(value(after, 'knowledgefs_object_store_requests_total', { op: 'get' }));
    } finally {
      await close();
    }
  });
});
