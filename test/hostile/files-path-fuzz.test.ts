// Property-based path fuzzing of the control plane's path-taking routes
// (`GET /v1/files/…`, `GET /v1/grants/…`, `POST /v1/read`) over real HTTP,
// with request targets written byte for byte. For every input:
//   - never a 5xx;
//   - never a canary (files planted next to DIR, at its root, behind
//     symlinks, in directory.json) and never a token or token hash;
//   - a 200 carries exactly the bytes of a file in a scope the session may
//     load, with their sha256;
//   - for a personal session, another team's path answers byte for byte like
//     the same path under a team that does not exist;
//   - the pack store is never asked about a scope the session may not load.

import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PackStore } from '../../src/store/pack-store.js';
import { hashToken } from '../../src/server/state/session-record.js';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { canaryIn, makeHostileData, type HostileData } from './hostile-data.js';
import { hostileFilesTarget, hostileScope, hostileSuffix } from './hostile-paths.js';
import { fingerprint, rawRequest, type RawResponse } from './raw-http.js';

const RUNS = Number(process.env['KFS_FUZZ_RUNS'] ?? 400);

let data: HostileData;
let cp: TestControlPlane;
let port: number;
let personal: { sessionId: string; token: string };
let team: { sessionId: string; token: string };
const storeCalls: { method: string; scope: string; path?: string; who: Who }[] = [];
type Who = 'personal' | 'team';
/** Which session the request in flight belongs to (requests run one at a time). */
let current: Who = 'personal';
const secrets: string[] = [];

function countingStore(store: PackStore): PackStore {
  return {
    scopes: () => store.scopes(),
    snapshot: (scope) => {
      storeCalls.push({ method: 'snapshot', scope, who: current });
      return store.snapshot(scope);
    },
    read: (scope, path) => {
      storeCalls.push({ method: 'read', scope, path, who: current });
      return store.read(scope, path);
    },
    get generation() {
      return store.generation;
    },
  };
}

beforeAll(async () => {
  data = await makeHostileData();
  cp = await startControlPlane({ dataDir: data.dataDir, deps: { wrapPackStore: countingStore } });
  port = Number(new URL(cp.url).port);
  personal = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
  team = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
  secrets.push(cp.adminToken, personal.token, team.token, hashToken(personal.token), hashToken(team.token));
});

afterAll(async () => {
  await cp?.close();
  await data?.cleanup();
});

const ALLOWED = {
  personal: new Set(['account', 'team_payments', 'team_search']),
  team: new Set(['account', 'team_payments']),
};

function checkAnswer(res: RawResponse, who: 'personal' | 'team', what: string): void {
  const label = `${who} ${what}`;
  expect(res.status, label).toBeLessThan(500);
  expect(canaryIn(res.body, data.markers), label).toBeNull();
  expect(canaryIn(res.head, data.markers), label).toBeNull();
  for (const s of secrets) expect(res.body.toString('latin1').includes(s), `${label}: secret in body`).toBe(false);
  if (who === 'personal') expect(res.status, `${label}: a personal session never gets a 403`).not.toBe(403);
}

function checkFileBody(res: RawResponse, who: 'personal' | 'team', what: string): void {
  if (res.status !== 200) return;
  const match = [...data.files].find(([key, bytes]) => ALLOWED[who].has(key.split('/')[0] ?? '') && bytes.equals(res.body));
  expect(match, `${who} ${what}: 200 with bytes of no loadable file`).toBeDefined();
  expect(res.headers['x-kfs-sha256']).toBe(createHash('sha256').update(res.body).digest('hex'));
}

/** Well-formed requests for real files of every scope, so the 200 checks get exercised too. */
function plainTarget(): fc.Arbitrary<Buffer> {
  return fc
    .tuple(fc.constantFrom('account', 'team_payments', 'team_search', 'team_storage'), fc.constantFrom(...new Set([...data.files.keys()].map((k) => k.slice(k.indexOf('/') + 1)))))
    .map(([scope, path]) => Buffer.from(`/v1/files/${scope}/${path.split('/').map(encodeURIComponent).join('/')}`, 'utf8'));
}

function get(token: string, target: Buffer | string): Promise<RawResponse> {
  current = token === team?.token ? 'team' : 'personal';
  return rawRequest(port, { target, headers: { authorization: `Bearer ${token}` } });
}

/** Store calls about a scope the calling session may not load: must stay empty. */
function deniedScopeTouched(): string[] {
  return storeCalls.filter((c) => !ALLOWED[c.who].has(c.scope)).map((c) => `${c.who}: ${c.method} ${c.scope}/${c.path ?? ''}`);
}

describe('GET /v1/files with hostile paths', () => {
  it('sanity: the attack surface is real (allowed files are served, canaries exist on disk)', async () => {
    const ok = await get(personal.token, '/v1/files/team_search/DUTY.md');
    expect(ok.status).toBe(200);
    expect(ok.body.equals(data.files.get('team_search/DUTY.md') as Buffer)).toBe(true);
    const unicode = await get(personal.token, `/v1/files/account/${encodeURIComponent('a b')}/${encodeURIComponent('ü ñ.md')}`);
    expect(unicode.status).toBe(200);
    // Traversal targets that would leak if the server resolved them.
    for (const target of ['/v1/files/account/../../CANARY.txt', '/v1/files/account/link.md', '/v1/files/account/linkdir/secret.md']) {
      const res = await get(personal.token, target);
      checkAnswer(res, 'personal', target);
      expect(res.status, target).not.toBe(200);
    }
  });

  it('never 5xx, never escapes, never serves what the session may not load (personal and team)', async () => {
    storeCalls.length = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof({ weight: 3, arbitrary: hostileFilesTarget }, { weight: 1, arbitrary: plainTarget() }), fc.constantFrom('personal' as const, 'team' as const), async (target, who) => {
        const res = await get(who === 'personal' ? personal.token : team.token, target);
        const what = JSON.stringify(target.toString('latin1'));
        checkAnswer(res, who, what);
        checkFileBody(res, who, what);
      }),
      { numRuns: RUNS },
    );
    expect(deniedScopeTouched()).toEqual([]);
  });

  it('a personal session cannot tell another team\'s file from a file that does not exist', async () => {
    const mask = ['team_storage', 'team_ghost'];
    await fc.assert(
      fc.asyncProperty(fc.oneof(hostileSuffix, fc.constantFrom('DUTY.md', 'runbooks/restart.md', 'postmortems/secret-outage.md', 'nope.md')), async (suffix) => {
        const real = await get(personal.token, Buffer.from(`/v1/files/team_storage/${suffix}`, 'utf8'));
        const ghost = await get(personal.token, Buffer.from(`/v1/files/team_ghost/${suffix}`, 'utf8'));
        expect(fingerprint(real, mask), JSON.stringify(suffix)).toBe(fingerprint(ghost, mask));
        expect(real.status).not.toBe(200);
      }),
      { numRuns: RUNS },
    );
    // And like a missing file in a scope it may load, once the path is masked.
    const denied = await get(personal.token, '/v1/files/team_storage/postmortems/secret-outage.md');
    const missing = await get(personal.token, '/v1/files/account/postmortems/secret-outage.md');
    expect(fingerprint(denied, ['team_storage', 'account'])).toBe(fingerprint(missing, ['team_storage', 'account']));
    expect(denied.status).toBe(404);
    expect(deniedScopeTouched()).toEqual([]);
  });

  it('grants: hostile scope names never 5xx, never grant a scope the session may not load', async () => {
    storeCalls.length = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(hostileScope, hostileSuffix), fc.constantFrom('personal' as const, 'team' as const), async (scope, who) => {
        const res = await get(who === 'personal' ? personal.token : team.token, Buffer.from(`/v1/grants/${scope}`, 'utf8'));
        checkAnswer(res, who, scope);
        if (res.status === 200) {
          const body = JSON.parse(res.body.toString('utf8')) as { scope: string; allowed: boolean };
          expect(ALLOWED[who].has(body.scope), `granted ${body.scope}`).toBe(true);
        }
      }),
      { numRuns: RUNS },
    );
    expect(deniedScopeTouched()).toEqual([]);
  });
});

/** Splits a batch stream into frames; throws on a malformed stream. */
function parseBatch(body: Buffer): { path: string; sha256?: string; bytes?: Buffer; missing?: true }[] {
  const frames: { path: string; sha256?: string; bytes?: Buffer; missing?: true }[] = [];
  let pos = 0;
  while (pos < body.length) {
    const eol = body.indexOf(0x0a, pos);
    if (eol < 0) throw new Error('batch stream ends inside a header');
    const header = JSON.parse(body.subarray(pos, eol).toString('utf8')) as { path: string; sha256?: string; size?: number; missing?: true };
    pos = eol + 1;
    if (header.missing === true) {
      frames.push({ path: header.path, missing: true });
      continue;
    }
    const bytes = body.subarray(pos, pos + (header.size ?? 0));
    if (bytes.length !== header.size) throw new Error('batch stream ends inside a file');
    pos += bytes.length;
    frames.push({ path: header.path, sha256: header.sha256 as string, bytes });
  }
  return frames;
}

describe('POST /v1/batch with hostile scopes and paths', () => {
  it('never 5xx, never escapes, only loadable bytes; another team looks like a missing team', async () => {
    storeCalls.length = 0;
    const realPaths = [...new Set([...data.files.keys()].map((k) => k.slice(k.indexOf('/') + 1)))];
    const paths = fc.array(fc.oneof(hostileSuffix, fc.constantFrom(...realPaths)), { minLength: 1, maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(hostileScope, fc.constantFrom('account', 'team_payments', 'team_search', 'team_storage')),
        paths,
        fc.constantFrom('personal' as const, 'team' as const),
        async (scope, list, who) => {
          current = who;
          const res = await rawRequest(port, {
            method: 'POST',
            target: '/v1/batch',
            headers: { authorization: `Bearer ${who === 'personal' ? personal.token : team.token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ scope, paths: list }),
          });
          const label = `${who} ${JSON.stringify({ scope, list })}`;
          checkAnswer(res, who, label);
          if (res.status !== 200) return;
          expect(ALLOWED[who].has(scope), label).toBe(true);
          for (const frame of parseBatch(res.body)) {
            expect(list, label).toContain(frame.path);
            if (frame.bytes === undefined) continue;
            expect(frame.bytes.equals(data.files.get(`${scope}/${frame.path}`) ?? Buffer.alloc(1)), `${label}: ${frame.path}`).toBe(true);
            expect(frame.sha256).toBe(createHash('sha256').update(frame.bytes).digest('hex'));
          }
        },
      ),
      { numRuns: RUNS },
    );
    expect(deniedScopeTouched()).toEqual([]);
    // A personal session's batch for another team is the answer for a team that does not exist.
    const ask = (scope: string) =>
      rawRequest(port, {
        method: 'POST',
        target: '/v1/batch',
        headers: { authorization: `Bearer ${personal.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ scope, paths: ['DUTY.md', 'postmortems/secret-outage.md'] }),
      });
    const mask = ['team_storage', 'team_ghost'];
    expect(fingerprint(await ask('team_storage'), mask)).toBe(fingerprint(await ask('team_ghost'), mask));
  });
});

describe('POST /v1/read with hostile paths and bodies', () => {
  it('never 5xx, never escapes, never mounts or reads what the session may not load', async () => {
    storeCalls.length = 0;
    const body = fc.oneof(
      { weight: 5, arbitrary: fc.tuple(hostileScope, hostileSuffix, fc.boolean()).map(([s, p, mount]) => JSON.stringify({ path: `${s}/${p}`, mount })) },
      { weight: 1, arbitrary: fc.string({ maxLength: 64 }) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          '{"path": null}',
          '{"path": ["account/DUTY.md"]}',
          '{"path": "account/DUTY.md", "mount": "yes"}',
          '{"path": {"toString": "x"}}',
          '{"__proto__": {"path": "team_storage/DUTY.md"}}',
          '{"path": "team_storage/DUTY.md", "path": "account/DUTY.md"}',
          '[]',
          'null',
          '',
        ),
      },
    );
    const succeeded = { personal: new Set<string>(), team: new Set<string>() };
    await fc.assert(
      fc.asyncProperty(body, fc.constantFrom('personal' as const, 'team' as const), async (json, who) => {
        current = who;
        const res = await rawRequest(port, {
          method: 'POST',
          target: '/v1/read',
          headers: { authorization: `Bearer ${who === 'personal' ? personal.token : team.token}`, 'content-type': 'application/json' },
          body: json,
        });
        checkAnswer(res, who, json);
        if (res.status === 200) {
          const r = JSON.parse(res.body.toString('utf8')) as { path: string; contentBase64: string; sha256: string };
          const bytes = Buffer.from(r.contentBase64, 'base64');
          expect(ALLOWED[who].has(r.path.split('/')[0] ?? ''), `read ${r.path}`).toBe(true);
          const expected = data.files.get(r.path);
          expect(expected, `read ${r.path}: 200 for a path that is no pack file`).toBeDefined();
          expect(bytes.equals(expected ?? Buffer.alloc(0)), `read ${r.path}`).toBe(true);
          succeeded[who].add(r.path);
        }
      }),
      { numRuns: RUNS },
    );
    // The registry's read set holds successful reads only (a denied or missing path never enters it).
    for (const [who, session] of [['personal', personal], ['team', team]] as const) {
      const readSet = (cp.cp.sessions.cached(session.sessionId)?.readSet ?? []).map((e) => e.path);
      expect(readSet.filter((path) => !succeeded[who].has(path)), `${who} read set`).toEqual([]);
    }
    expect(deniedScopeTouched()).toEqual([]);
    const view = await get(personal.token, '/v1/session');
    const mounted = (JSON.parse(view.body.toString('utf8')) as { mounted: string[] }).mounted;
    expect(mounted.every((t) => t === 'search'), `mounted: ${mounted.join(',')}`).toBe(true);
    const teamView = JSON.parse((await get(team.token, '/v1/session')).body.toString('utf8')) as { mounted: string[] };
    expect(teamView.mounted).toEqual([]);
  });
});
