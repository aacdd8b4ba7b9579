// Property-based path fuzzing of the read tool through the mount daemon's
// control socket (what `knowledgefs read` sends), on a real mount over the
// canary-planted data dir. Paths come as the agent might type them:
// `knowledge/…`, absolute under the mount, absolute anywhere (the canaries'
// real paths included), relative to odd working directories, with every
// traversal spelling. For every input:
//   - never a 5xx and never an `internal` error;
//   - never a canary, never a byte of a file the session may not load;
//   - a success names a `knowledge/…` path and carries that file's exact bytes;
//   - team_storage (creator not a member) is never mounted, and asking for
//     it answers exactly like asking for a team that does not exist.

import { request } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { BIN, fuseSuite, run, startMount, type MountHandle } from '../helpers/mount.js';
import { canaryIn, makeHostileData, type HostileData } from './hostile-data.js';
import { hostileSuffix } from './hostile-paths.js';

const RUNS = Number(process.env['KFS_FUZZ_RUNS'] ?? 250);
const LOADABLE = new Set(['account', 'team_payments', 'team_search']);

interface SocketAnswer {
  status: number;
  body: { ok: boolean; path?: string; content?: string; error?: { code: string; message: string } };
  raw: string;
}

function post(socketPath: string, payload: unknown): Promise<SocketAnswer> {
  const body = JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, method: 'POST', path: '/read', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(raw) as SocketAnswer['body'], raw });
          } catch {
            reject(new Error(`control socket answered non-JSON (${res.statusCode}): ${raw.slice(0, 200)}`));
          }
        });
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error('control socket did not answer within 30 s')));
    req.on('error', reject);
    req.end(body);
  });
}

fuseSuite('read tool with hostile paths', () => {
  let data: HostileData;
  let cp: TestControlPlane;
  let mount: MountHandle;
  let token: string;
  let sessionId: string;

  beforeAll(async () => {
    data = await makeHostileData();
    cp = await startControlPlane({ dataDir: data.dataDir });
    const session = await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' });
    token = session.token;
    sessionId = session.sessionId;
    mount = await startMount({ serverUrl: cp.url, token: session.token, args: ['--prefetch-threshold', '1', '--grant-ttl', '0', '--sync-interval', '200ms'] });
  });

  afterAll(async () => {
    await mount?.stop();
    await cp?.close();
    await data?.cleanup();
  });

  function check(answer: SocketAnswer, label: string, sliced = false): void {
    expect(answer.status, label).toBeLessThan(500);
    expect(answer.body.error?.code, label).not.toBe('internal');
    expect(canaryIn(answer.raw, data.markers), label).toBeNull();
    if (answer.body.ok) {
      const path = answer.body.path ?? '';
      expect(path.startsWith('knowledge/'), `${label} → ${path}`).toBe(true);
      const scopePath = path.slice('knowledge/'.length);
      expect(LOADABLE.has(scopePath.split('/')[0] ?? ''), `${label} → ${path}`).toBe(true);
      const expected = data.files.get(scopePath);
      expect(expected, `${label} → ${path}: not a pack file`).toBeDefined();
      const text = expected?.toString('utf8') ?? '';
      if (sliced) expect(text.includes(answer.body.content ?? '\u0000'), label).toBe(true);
      else expect(answer.body.content, label).toBe(text);
    }
  }

  it('never 5xx, never escapes, never loads what the session may not load', async () => {
    const mp = mount.mountpoint;
    const realPaths = [...data.files.keys()];
    const typed = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...realPaths).map((p) => `knowledge/${p}`) },
      { weight: 2, arbitrary: fc.constantFrom(...realPaths).map((p) => `${mp}/${p}`) },
      { weight: 4, arbitrary: hostileSuffix.map((s) => `knowledge/${s}`) },
      { weight: 2, arbitrary: hostileSuffix.map((s) => `${mp}/${s}`) },
      { weight: 2, arbitrary: fc.tuple(fc.constantFrom('account', 'team_payments', 'team_search', 'team_storage', 'team_ghost'), hostileSuffix).map(([scope, s]) => `knowledge/${scope}/${s}`) },
      { weight: 1, arbitrary: hostileSuffix },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          `${data.root}/CANARY.txt`,
          `${data.dataDir}/CANARY.txt`,
          `${data.dataDir}/directory.json`,
          `${data.dataDir}/account/DUTY.md`,
          `${data.dataDir}/.knowledgefs/state.json`,
          `${data.root}/secretdir/secret.md`,
          '/etc/passwd',
          `${mp}/../CANARY.txt`,
          `${mp}/account/../../CANARY.txt`,
          'knowledge/../CANARY.txt',
          'knowledge/account/../../data/CANARY.txt',
          'knowledge/account/link.md',
          'knowledge/account/linkdir/secret.md',
          'knowledge',
          'knowledge/',
          'knowledge/account',
          '../knowledge/account/DUTY.md',
          `${mp}`,
          '~/knowledge/account/DUTY.md',
          'file:///etc/passwd',
        ),
      },
    );
    const cwd = fc.constantFrom(mount.dir, mp, `${mp}/account`, `${mp}/team_payments/runbooks`, '/', data.dataDir, `${data.dataDir}/account`, 'relative/dir', '');
    const limits = fc.record({ offset: fc.option(fc.oneof(fc.nat(), fc.constantFrom(-1, 1e12, 0.5)), { nil: undefined }), limit: fc.option(fc.oneof(fc.nat(), fc.constantFrom(-5, 0, 1e9)), { nil: undefined }) });
    const tally = new Map<string, number>();
    const succeeded = new Set<string>();
    await fc.assert(
      fc.asyncProperty(typed, cwd, limits, async (path, dirNow, { offset, limit }) => {
        const payload: Record<string, unknown> = { path, cwd: dirNow };
        if (offset !== undefined) payload['offset'] = offset;
        if (limit !== undefined) payload['limit'] = limit;
        const answer = await post(mount.socketPath, payload);
        const label = JSON.stringify(payload);
        check(answer, label, offset !== undefined || limit !== undefined);
        if (answer.body.ok) succeeded.add((answer.body.path ?? '').slice('knowledge/'.length));
        const key = answer.body.ok ? 'ok' : (answer.body.error?.code ?? '?');
        tally.set(key, (tally.get(key) ?? 0) + 1);
      }),
      { numRuns: RUNS },
    );
    // The property must have reached the control plane, not only the local path checks.
    expect(tally.get('ok') ?? 0, JSON.stringify([...tally])).toBeGreaterThan(0);
    expect(tally.get('not_found') ?? 0, JSON.stringify([...tally])).toBeGreaterThan(0);
    // The control plane's read set holds successful reads only, and some.
    const readSet = (cp.cp.sessions.cached(sessionId)?.readSet ?? []).map((e) => e.path);
    expect(readSet.length).toBeGreaterThan(0);
    expect(readSet.filter((path) => !succeeded.has(path))).toEqual([]);
    const view = (await (await fetch(`${cp.url}/v1/session`, { headers: { authorization: `Bearer ${token}` } })).json()) as { mounted: string[] };
    expect(view.mounted).not.toContain('storage');
    expect(view.mounted.every((t) => t === 'search')).toBe(true);
  }, 240_000);

  it('malformed requests to the socket are 4xx, not 5xx', async () => {
    for (const payload of [null, [], 'x', { path: 5, cwd: '/' }, { cwd: '/' }, { path: 'knowledge/account/DUTY.md' }, { path: 'knowledge/account/DUTY.md', cwd: 7 }, { path: 'knowledge/account/DUTY.md', cwd: '/', offset: 'a' }]) {
      const answer = await post(mount.socketPath, payload);
      expect(answer.status, JSON.stringify(payload)).toBeGreaterThanOrEqual(400);
      expect(answer.status, JSON.stringify(payload)).toBeLessThan(500);
    }
  });

  it('another team reads exactly like a team that does not exist (CLI output and exit code)', async () => {
    const kfs = (p: string, json = false) =>
      run(process.execPath, [BIN, 'read', p, '--socket', mount.socketPath, ...(json ? ['--json'] : [])], { cwd: mount.dir });
    for (const suffix of ['DUTY.md', 'postmortems/secret-outage.md', 'nope.md']) {
      for (const json of [false, true]) {
        const real = await kfs(`knowledge/team_storage/${suffix}`, json);
        const ghost = await kfs(`knowledge/team_ghost/${suffix}`, json);
        expect(real.code).toBe(1);
        expect(ghost.code).toBe(1);
        expect(real.stdout.replaceAll('team_storage', 'T')).toBe(ghost.stdout.replaceAll('team_ghost', 'T'));
        expect(real.stderr.replaceAll('team_storage', 'T')).toBe(ghost.stderr.replaceAll('team_ghost', 'T'));
      }
    }
    const ls = await run('ls', [mount.mountpoint]);
    expect(ls.stdout.split('\n')).not.toContain('team_storage');
  });
});
