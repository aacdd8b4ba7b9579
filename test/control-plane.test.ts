// How createControlPlaneServer and serveControlPlane put the parts together,
// each part seen from outside: scans timed and counted by result, the
// scrape-time gauges, which membership source and audit sink the options
// pick and which wrappers the deps add, what start-up releases when a later
// part fails, and what close() ends (in order, once), including a request
// that never finishes. The routes themselves have their own suites.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_PLANE_METRICS as M, type MetricSpec } from '../src/core/metrics.js';
import { KnowledgeError } from '../src/core/errors.js';
import { memoryAuditSink, type AuditSink } from '../src/server/access/audit-log.js';
import type { MembershipSource } from '../src/server/access/membership.js';
import { createControlPlaneServer, serveControlPlane, type ControlPlane, type ControlPlaneDeps } from '../src/server/control-plane.js';
import type { SessionState } from '../src/server/state/session-state.js';
import type { ObjectStore } from '../src/store/objects/object-store.js';
import type { PackStore } from '../src/store/pack-store.js';
import { publishTo } from './helpers/bucket.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { fakeWatch } from './helpers/fake-watch.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const ADMIN = 'kfsadmin_control_plane_test_0123456789';
const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search' },
  users: { alice: { teams: ['payments'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments duty\n',
    'teams/payments/runbooks/db.md': 'failover\n',
    'teams/search/DUTY.md': '# Search\n',
  },
};
// Files and bytes of the three packs in `spec`.
const FILES = 4;
const BYTES = Object.values(spec.files ?? {}).reduce((n, c) => n + Buffer.byteLength(c), 0);

let dir: string;
let scratch: string;
const opened: ControlPlane[] = [];

beforeAll(async () => {
  dir = await makeDataDir(spec);
  scratch = await mkdtemp(join(tmpdir(), 'kfs-cp-'));
});
afterEach(async () => {
  for (const cp of opened.splice(0)) await cp.close();
});
afterAll(async () => {
  await removeDataDir(dir);
  await rm(scratch, { recursive: true, force: true });
});

/** Calls to the session state that show what close() and a failed start release. */
function countingSessions(): { wrap: (s: SessionState) => SessionState; closes: number; follows: number; unfollows: number } {
  const counts = {
    closes: 0,
    follows: 0,
    unfollows: 0,
    wrap: (inner: SessionState): SessionState =>
      new Proxy(inner, {
        get(target, key) {
          if (key === 'close') {
            return () => {
              counts.closes++;
              return target.close();
            };
          }
          if (key === 'onChange') {
            return (listener: (id: string) => void) => {
              counts.follows++;
              const stop = target.onChange(listener);
              return () => {
                counts.unfollows++;
                stop();
              };
            };
          }
          const value = Reflect.get(target, key) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      }),
  };
  return counts;
}

/** The project's in-memory sink, counting its closes. */
function recordingAudit(): AuditSink & { closes: number } {
  const inner = memoryAuditSink();
  const sink = {
    ...inner,
    closes: 0,
    close: () => {
      sink.closes++;
      return inner.close();
    },
  };
  return sink;
}

async function create(options: Partial<Parameters<typeof createControlPlaneServer>[0]> = {}, deps: ControlPlaneDeps = {}): Promise<{ cp: ControlPlane; logs: string[] }> {
  const logs: string[] = [];
  const cp = await createControlPlaneServer(
    { dataDir: dir, adminToken: ADMIN, stateFile: join(scratch, `state-${opened.length}-${Date.now()}.json`), auditLog: join(scratch, 'audit.log'), watch: false, log: (l) => logs.push(l), ...options },
    deps,
  );
  opened.push(cp);
  return { cp, logs };
}

async function sample(cp: ControlPlane, spec: MetricSpec, labels: Record<string, string> = {}, suffix = ''): Promise<number | undefined> {
  const all = await cp.metrics.samples(spec);
  return all.find((s) => s.suffix === suffix && Object.entries(labels).every(([k, v]) => String(s.labels[k]) === v))?.value;
}

/** Starts listening on a free port of 127.0.0.1; returns the base URL. */
async function listen(cp: ControlPlane): Promise<string> {
  await new Promise<void>((resolve) => cp.server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(cp.server.address() as AddressInfo).port}`;
}

const get = (url: string, token: string, init: RequestInit = {}) => fetch(url, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } });

describe('scans', () => {
  it('times and counts the first scan and each rescan, by kind and result', async () => {
    const { cp } = await create();
    expect(cp.server.listening).toBe(false);
    expect(await sample(cp, M.packScans, { kind: 'full', result: 'ok' })).toBe(1);
    expect(await sample(cp, M.packScanDuration, { kind: 'full' }, '_count')).toBe(1);
    await cp.rescan();
    expect(await sample(cp, M.packScans, { kind: 'full', result: 'ok' })).toBe(2);
    expect(await sample(cp, M.packScanDuration, { kind: 'full' }, '_count')).toBe(2);
    expect(await sample(cp, M.packScans, { kind: 'full', result: 'error' })).toBe(0);
    // Seconds: two scans of four files take well under two seconds, and more than nothing.
    const seconds = (await sample(cp, M.packScanDuration, { kind: 'full' }, '_sum')) as number;
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThan(2);
  });

  it('wakes a waiting plan long-poll when a rescan changes something', async () => {
    const live = await makeDataDir(spec);
    try {
      // A re-check far off: only the rescan's wake-up can answer the long-poll before it ends.
      const { cp, logs } = await create({ dataDir: live, membershipRecheckMs: 60_000 });
      const url = await listen(cp);
      const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
      const first = await get(`${url}/v1/plan`, token);
      const etag = first.headers.get('etag') ?? '';
      expect(first.status).toBe(200);
      const waiting = get(`${url}/v1/plan?wait=15`, token, { headers: { 'if-none-match': etag } });
      await new Promise((r) => setTimeout(r, 200));
      await writeDataFile(live, 'account/NEW.md', 'new\n');
      await cp.rescan();
      const woken = await waiting;
      expect(woken.status).toBe(200);
      expect(await woken.text()).toContain('NEW.md');
      expect(logs.filter((l) => l.startsWith('rescan failed'))).toEqual([]);
    } finally {
      await removeDataDir(live);
    }
  });
});

describe('sessions', () => {
  it('wakes a waiting plan long-poll of a session that is revoked', async () => {
    const { cp } = await create({ membershipRecheckMs: 60_000 });
    const url = await listen(cp);
    const { record, token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    const first = await get(`${url}/v1/plan`, token);
    await first.arrayBuffer();
    const started = Date.now();
    const waiting = get(`${url}/v1/plan?wait=20`, token, { headers: { 'if-none-match': first.headers.get('etag') ?? '' } });
    await new Promise((r) => setTimeout(r, 200));
    await cp.sessions.revoke(record.id);
    const answer = await waiting;
    await answer.arrayBuffer();
    expect(answer.status).toBe(401);
    // Woken by the revocation, not by the end of its 20 s wait.
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});

describe('the gauges a scrape sets', () => {
  it('counts live sessions by kind, mounted teams, scopes, files and bytes', async () => {
    const { cp } = await create();
    const now = new Date().toISOString();
    const { record } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, now);
    await cp.sessions.create({ kind: 'team', creator: 'alice', team: 'payments' }, now);
    await cp.sessions.create({ kind: 'team', creator: 'alice', team: 'payments' }, now);
    await cp.sessions.recordRead(record, { path: 'team_payments/DUTY.md', sha256: 'a'.repeat(64) }, 'payments');
    expect(await sample(cp, M.sessions, { kind: 'personal' })).toBe(1);
    expect(await sample(cp, M.sessions, { kind: 'team' })).toBe(2);
    expect(await sample(cp, M.mountedTeams)).toBe(1);
    expect(await sample(cp, M.scopes)).toBe(3);
    expect(await sample(cp, M.packFiles)).toBe(FILES);
    expect(await sample(cp, M.packBytes)).toBe(BYTES);
    // A data directory has no blob cache: its counters stay at 0.
    expect((await cp.metrics.samples(M.blobCache)).map((s) => s.value)).toEqual([0, 0]);
  });
});

describe('membership', () => {
  let service: Server;
  let serviceUrl: string;
  const asked: string[] = [];

  beforeAll(async () => {
    service = createServer((req: IncomingMessage, res: ServerResponse) => {
      asked.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ teams: ['payments'] }));
    });
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    serviceUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => service.close(() => resolve())));

  async function planOnce(cp: ControlPlane): Promise<void> {
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    const res = await get(`${url}/v1/plan`, token);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }

  it('asks directory.json by default, and counts the lookups as the directory source', async () => {
    const { cp } = await create();
    await planOnce(cp);
    expect(await sample(cp, M.membershipLookups, { source: 'directory', result: 'ok' })).toBe(1);
    expect(await sample(cp, M.membershipLookups, { source: 'http', result: 'ok' })).toBe(0);
  });

  it('asks the membership service with --membership-url, counted as the http source', async () => {
    asked.length = 0;
    const { cp } = await create({ membershipUrl: serviceUrl });
    await planOnce(cp);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('alice');
    expect(await sample(cp, M.membershipLookups, { source: 'http', result: 'ok' })).toBe(1);
    expect(await sample(cp, M.membershipLookups, { source: 'directory', result: 'ok' })).toBe(0);
  });

  it('takes a given source, and wraps whichever source it has', async () => {
    const users: string[] = [];
    const wrapped: string[] = [];
    const given: MembershipSource = { teamsOf: async (user) => (users.push(user), { status: 'ok', teams: [] }) };
    const { cp } = await create({}, {
      membership: given,
      wrapMembership: (inner) => ({ teamsOf: (user) => (wrapped.push(user), inner.teamsOf(user)) }),
    });
    await planOnce(cp);
    expect(users).toEqual(['alice']);
    expect(wrapped).toEqual(['alice']);
    expect(await sample(cp, M.membershipLookups, { source: 'directory', result: 'ok' })).toBe(1);
  });
});

describe('the wrappers', () => {
  it('routes reads through the wrapped pack store, while the gauges count the store itself', async () => {
    const reads: string[] = [];
    const wrap = (store: PackStore): PackStore =>
      new Proxy(store, {
        get(target, key) {
          const value = Reflect.get(target, key) as unknown;
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (key === 'read' || key === 'readSmallSync') reads.push(String(key));
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
    const { cp } = await create({}, { wrapPackStore: wrap });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    const res = await get(`${url}/v1/files/account/DUTY.md`, token);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('# Account\n');
    expect(reads.length).toBeGreaterThan(0);
    expect(await sample(cp, M.packFiles)).toBe(FILES);
  });
});

describe('the HTTP adapter', () => {
  it('is given the body limit', async () => {
    const { cp } = await create({ maxBodyBytes: 1024 });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    const body = JSON.stringify({ path: 'account/DUTY.md', pad: 'x'.repeat(2048) });
    const res = await get(`${url}/v1/read`, token, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    await res.arrayBuffer();
    expect(res.status).toBe(413);
    expect(await sample(cp, M.httpRequests, { route: 'read', status_class: '4xx' })).toBe(1);
  });
});

describe('the audit sink', () => {
  it("counts the decisions dropped for a stdout nobody reads", async () => {
    const stuck = new Writable({ highWaterMark: 1, write: () => undefined });
    const { cp } = await create({ auditLog: '-', auditBufferRecords: 1 }, { auditStdout: stuck });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    for (let i = 0; i < 4; i++) await (await get(`${url}/v1/files/account/DUTY.md`, token)).arrayBuffer();
    expect(await sample(cp, M.auditDropped, { sink: 'stdout' })).toBeGreaterThan(0);
    opened.splice(opened.indexOf(cp), 1);
    cp.server.close();
  });

  it("writes decisions to the given stream with auditLog '-'", async () => {
    const out = new PassThrough();
    let text = '';
    out.on('data', (d: Buffer) => (text += d.toString()));
    const { cp } = await create({ auditLog: '-' }, { auditStdout: out });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    await (await get(`${url}/v1/files/account/DUTY.md`, token)).arrayBuffer();
    await cp.close();
    expect(JSON.parse(text.trim())).toMatchObject({ scope: 'account', action: 'open', result: 'allow' });
  });

  it('appends decisions to the audit log file otherwise', async () => {
    const file = join(scratch, 'own-audit.log');
    const { cp } = await create({ auditLog: file });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    expect(await (await get(`${url}/v1/files/team_payments/DUTY.md`, token)).text()).toBe('# Payments duty\n');
    await cp.close();
    const lines = (await readFile(file, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ scope: 'team_payments', action: 'open', result: 'allow' });
  });

  it('fails the start when the audit log cannot be opened, releasing the pack source and the session state', async () => {
    const blocker = join(scratch, 'a-file');
    await writeFile(blocker, 'not a directory\n');
    const sessions = countingSessions();
    const fake = fakeWatch();
    await expect(
      createControlPlaneServer(
        { dataDir: dir, adminToken: ADMIN, stateFile: join(scratch, 'unused-state.json'), auditLog: join(blocker, 'audit.log'), log: () => undefined },
        { wrapSessions: sessions.wrap, watch: fake.watch },
      ),
    ).rejects.toThrow(`mkdir '${blocker}'`);
    expect(sessions.closes).toBe(1);
    expect(fake.placed.length).toBeGreaterThan(0);
    expect(fake.open()).toEqual([]);
  });
});

describe('close()', () => {
  it('ends the watch, the session state and the audit sink, once', async () => {
    const sessions = countingSessions();
    const audit = recordingAudit();
    const fake = fakeWatch();
    const { cp } = await create({ watch: true }, { wrapSessions: sessions.wrap, audit, watch: fake.watch });
    expect(cp.watch).not.toBeNull();
    expect(cp.audit).toBe(audit);
    expect(sessions.follows).toBe(1);
    expect(fake.open().length).toBeGreaterThan(0);
    await cp.close();
    await cp.close();
    expect(fake.open()).toEqual([]);
    expect(sessions).toMatchObject({ closes: 1, unfollows: 1 });
    expect(audit.closes).toBe(1);
  });

  it('answers a waiting plan long-poll at once', async () => {
    const { cp } = await create({ membershipRecheckMs: 60_000 });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    const first = await get(`${url}/v1/plan`, token);
    await first.arrayBuffer();
    const waiting = get(`${url}/v1/plan?wait=20`, token, { headers: { 'if-none-match': first.headers.get('etag') ?? '' } });
    await new Promise((r) => setTimeout(r, 200));
    await cp.close();
    // An answer, not a connection cut when closing gave up waiting.
    const answer = await waiting;
    expect(answer.status).toBe(304);
  });

  it('ends a request that would never finish, instead of waiting for it', async () => {
    let asked!: () => void;
    const lookup = new Promise<void>((resolve) => (asked = resolve));
    const hanging: MembershipSource = {
      teamsOf: () => {
        asked();
        return new Promise(() => undefined);
      },
    };
    const { cp } = await create({}, { membership: hanging });
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    const request = get(`${url}/v1/plan`, token).then(
      (res) => res.text(),
      (err: unknown) => err,
    );
    await lookup;
    const started = Date.now();
    await cp.close();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await request).toBeInstanceOf(Error);
    expect(cp.server.listening).toBe(false);
  });
});

describe('serveControlPlane', () => {
  it('listens on 127.0.0.1 by default and reports its URL', async () => {
    const cp = await serveControlPlane({ dataDir: dir, adminToken: ADMIN, stateFile: join(scratch, 'serve-state.json'), watch: false, log: () => undefined });
    try {
      expect(cp.host).toBe('127.0.0.1');
      expect(cp.url).toBe(`http://127.0.0.1:${cp.port}`);
      expect(cp.metricsUrl).toBeUndefined();
      // The start's listen-error handler is gone: a later server error is not swallowed by it.
      expect(cp.server.listenerCount('error')).toBe(0);
      const res = await fetch(`${cp.url}/healthz`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    } finally {
      await cp.close();
    }
    expect(cp.server.listening).toBe(false);
  });

  it('refuses a port in use with the address in the message, and releases what it opened', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    const sessions = countingSessions();
    const audit = recordingAudit();
    try {
      const failed = serveControlPlane({ dataDir: dir, adminToken: ADMIN, stateFile: join(scratch, 'busy-state.json'), watch: false, log: () => undefined, port }, { wrapSessions: sessions.wrap, audit });
      await expect(failed).rejects.toThrow(KnowledgeError);
      await expect(failed).rejects.toMatchObject({ code: 'config' });
      await expect(failed).rejects.toThrow(new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`));
      expect(sessions.closes).toBe(1);
      expect(audit.closes).toBe(1);
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  });

  it('serves token-less metrics with metricsListen, and closes that listener too', async () => {
    const cp = await serveControlPlane({ dataDir: dir, adminToken: ADMIN, stateFile: join(scratch, 'metrics-state.json'), watch: false, log: () => undefined, metricsListen: { host: '127.0.0.1', port: 0 } });
    const metricsUrl = cp.metricsUrl as string;
    try {
      expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const res = await fetch(metricsUrl);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain(M.packScans.name);
    } finally {
      await cp.close();
    }
    await expect(fetch(metricsUrl)).rejects.toThrow();
  });

  it('releases the control plane when the metrics listener cannot listen', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    const sessions = countingSessions();
    try {
      await expect(
        serveControlPlane({ dataDir: dir, adminToken: ADMIN, stateFile: join(scratch, 'mbusy-state.json'), watch: false, log: () => undefined, metricsListen: { host: '127.0.0.1', port } }, { wrapSessions: sessions.wrap }),
      ).rejects.toThrow(/EADDRINUSE|in use/);
      expect(sessions.closes).toBe(1);
    } finally {
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    }
  });
});

describe('a publication in object storage', () => {
  let s3: TestS3;
  beforeAll(async () => {
    s3 = await startS3();
    await publishTo(s3, 'pub', dir);
  }, 60_000);
  afterAll(async () => {
    await s3?.close();
  });

  function closingCounted(): { wrap: (s: ObjectStore) => ObjectStore; closes: number; gets: number } {
    const counts = {
      closes: 0,
      gets: 0,
      wrap: (inner: ObjectStore): ObjectStore => ({
        description: inner.description,
        get: (key, options) => (counts.gets++, inner.get(key, options)),
        put: (key, body, type) => inner.put(key, body, type),
        has: (key) => inner.has(key),
        list: (prefix) => inner.list(prefix),
        close: () => (counts.closes++, inner.close()),
      }),
    };
    return counts;
  }

  it('reads through the wrapped object store, and reports the blob cache', async () => {
    const objects = closingCounted();
    const { cp, logs } = await create(
      { dataDir: undefined, store: `s3://${s3.bucket}/pub`, env: s3.env, s3TimeoutMs: 10_000 },
      { wrapObjectStore: objects.wrap },
    );
    expect(objects.gets).toBeGreaterThan(0);
    const url = await listen(cp);
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    for (let i = 0; i < 2; i++) expect(await (await get(`${url}/v1/files/account/DUTY.md`, token)).text()).toBe('# Account\n');
    expect(await sample(cp, M.blobCache, { result: 'miss' })).toBe(1);
    expect(await sample(cp, M.blobCache, { result: 'hit' })).toBe(1);
    expect(await sample(cp, M.scopes)).toBe(3);
    await cp.close();
    expect(objects.closes).toBe(1);
    // Without a state URL no replica heartbeat is kept (it records publications in PostgreSQL).
    expect(logs.filter((l) => l.includes('heartbeat'))).toEqual([]);
  });

  it('times and counts each look for a publication, and one the bucket cannot answer as an error', async () => {
    await publishTo(s3, 'moving', dir);
    const { cp } = await create({ dataDir: undefined, store: `s3://${s3.bucket}/moving`, env: s3.env, s3TimeoutMs: 2_000, publicationPollMs: 3_600_000 });
    const { token } = await cp.sessions.create({ kind: 'personal', creator: 'alice' }, new Date().toISOString());
    expect(await sample(cp, M.packScans, { kind: 'full', result: 'ok' })).toBe(1);
    const url = await listen(cp);
    const first = await get(`${url}/v1/plan`, token);
    const etag = first.headers.get('etag') ?? '';
    await first.arrayBuffer();
    const waiting = get(`${url}/v1/plan?wait=30`, token, { headers: { 'if-none-match': etag } });
    const edited = await makeDataDir({ ...spec, files: { ...spec.files, 'account/NEW.md': 'new\n' } });
    try {
      await publishTo(s3, 'moving', edited);
    } finally {
      await removeDataDir(edited);
    }
    await cp.rescan();
    // The new publication wakes the long-poll that waited on the old one.
    const woken = await waiting;
    expect(woken.status).toBe(200);
    expect(await woken.text()).toContain('NEW.md');
    expect(await sample(cp, M.packScans, { kind: 'full', result: 'ok' })).toBe(2);
    await s3.stop();
    try {
      await expect(cp.rescan()).rejects.toThrow();
    } finally {
      await s3.start();
    }
    expect(await sample(cp, M.packScans, { kind: 'full', result: 'error' })).toBe(1);
    expect(await sample(cp, M.packScanDuration, { kind: 'full' }, '_count')).toBe(3);
  });

  it('closes the object store when there is no publication to serve', async () => {
    const objects = closingCounted();
    await expect(
      createControlPlaneServer(
        { store: `s3://${s3.bucket}/nothing-here`, env: s3.env, s3TimeoutMs: 10_000, adminToken: ADMIN, stateFile: join(scratch, 'none-state.json'), auditLog: join(scratch, 'none-audit.log'), log: () => undefined },
        { wrapObjectStore: objects.wrap },
      ),
    ).rejects.toThrow(KnowledgeError);
    expect(objects.closes).toBe(1);
  });
});
