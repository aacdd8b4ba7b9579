// The real CLI (`node bin/knowledgefs.js`, built): `serve` start-up output,
// refusal of a malformed directory.json naming the file and field, keeping
// the last good directory.json on a bad edit, the generated admin token, a
// clean exit on SIGINT/SIGTERM; and `session create` output and exit codes.

import { execFile, spawn } from 'node:child_process';
import { stat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDataDir, removeDataDir, writeDirectory, type DataDirSpec } from './helpers/data-dir.js';
import { KnowledgeError } from '../src/core/errors.js';
import { createControlPlaneServer } from '../src/server/control-plane.js';
import { BIN, spawnControlPlane, type SpawnedControlPlane } from './helpers/control-plane.js';
import { scrape, value } from './helpers/metrics-scrape.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search' },
  users: { alice: { teams: ['payments'] } },
  files: { 'account/DUTY.md': '# A\n', 'teams/payments/DUTY.md': '# P\n' },
};

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? null) : 0;
      resolve({ code: typeof code === 'number' ? code : null, stdout, stderr });
    });
  });
}

const dirs: string[] = [];
async function dataDir(s: DataDirSpec = spec): Promise<string> {
  const d = await makeDataDir(s);
  dirs.push(d);
  return d;
}
afterAll(async () => {
  for (const d of dirs) await removeDataDir(d);
});

const badDirectories: [string, string][] = [
  ['{"teams": {"payments": {"name": "P"}}, "users": {"alice": {"teams": ["payments", 7]}}}', 'users.alice.teams[1]: expected a team id string'],
  ['{"teams": {"payments": {"name": "P"}}, "users": {"alice": {"teams": ["search"]}}}', 'users.alice.teams[0]: unknown team "search"'],
  ['{"teams": {"Bad Id": {"name": "P"}}}', 'teams."Bad Id": invalid team id'],
  ['{"teams": {"payments": {"name": 3}}}', 'teams.payments.name: expected a string'],
  ['{"users": {"bob": {"teams": [], "role": "king"}}}', 'users.bob.role: expected one of "member", "admin", "owner"'],
  ['{"users": {"bob": {"teams": "payments"}}}', 'users.bob.teams: expected an array of team ids'],
  ['{"teams": [], "users": {}}', 'teams: expected an object'],
  ['{"teams": {}, ', '(top level): not valid JSON'],
  ['[]', '(top level): expected an object'],
];

describe('knowledgefs serve: bad input', () => {
  // Every case in-process (fast), two through the real CLI (exit code and output).
  it.each(badDirectories)('directory.json %s → refused, naming the file and field', async (json, message) => {
    const d = await dataDir({ ...spec, directoryJson: json });
    const err = await createControlPlaneServer({ dataDir: d, adminToken: 'x'.repeat(32), log: () => undefined }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('config');
    expect((err as KnowledgeError).message.startsWith(`${join(d, "directory.json")}: ${message}`), (err as Error).message).toBe(true);
  });

  it.each(badDirectories.slice(0, 2))('the CLI exits 2 on directory.json %s', async (json, message) => {
    const d = await dataDir({ ...spec, directoryJson: json });
    const r = await run(['serve', '--data', d, '--listen', '127.0.0.1:0'], { KNOWLEDGEFS_ADMIN_TOKEN: 'x'.repeat(32) });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`${join(d, 'directory.json')}: ${message}`);
  });

  it('a missing directory.json or data dir, and bad flag values, exit 2 with one clear line', async () => {
    const d = await dataDir();
    const { rm } = await import('node:fs/promises');
    await rm(join(d, 'directory.json'));
    const env = { KNOWLEDGEFS_ADMIN_TOKEN: 'x'.repeat(32) };
    const missing = await run(['serve', '--data', d, '--listen', '127.0.0.1:0'], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/directory\.json: missing/);
    expect((await run(['serve', '--data', join(d, 'nope'), '--listen', '127.0.0.1:0'], env)).stderr).toMatch(/not a directory/);
    for (const args of [['--listen', 'nowhere'], ['--scan-interval', 'soon'], ['--watch', 'maybe'], ['--watch-scan-interval', 'later'], ['--max-file-size', 'big'], ['--membership-url', 'ftp://x'], ['--metrics-listen', 'anywhere']]) {
      const r = await run(['serve', '--data', d, ...args], env);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n').filter((l) => !l.startsWith('(run with')).length, r.stderr).toBe(1);
    }
  });
});

describe('knowledgefs serve --metrics-listen', () => {
  it('serves token-less metrics on its own address and says where', async () => {
    const d = await dataDir();
    const cp = await spawnControlPlane({ dataDir: d, args: ['--metrics-listen', '127.0.0.1:0'] });
    try {
      const url = /metrics on (http:\/\/127\.0\.0\.1:\d+\/metrics) \(no token\)/.exec(cp.stderr)?.[1];
      expect(url, cp.stderr).toBeDefined();
      const s = await scrape(url as string);
      expect(value(s, 'knowledgefs_scopes')).toBe(2);
      // On --listen the same route still takes the admin token.
      expect((await fetch(`${cp.url}/metrics`)).status).toBe(401);
      expect(value(await scrape(`${cp.url}/metrics`, cp.adminToken), 'knowledgefs_scopes')).toBe(2);
    } finally {
      await cp.kill('SIGTERM');
    }
  });

  it('an address in use exits 2 naming --metrics-listen', async () => {
    const d = await dataDir();
    const { createServer } = await import('node:net');
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    try {
      const port = (busy.address() as { port: number }).port;
      const r = await run(['serve', '--data', d, '--listen', '127.0.0.1:0', '--metrics-listen', `127.0.0.1:${port}`], { KNOWLEDGEFS_ADMIN_TOKEN: 'x'.repeat(32) });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--metrics-listen 127.0.0.1:${port}`);
      expect(r.stdout).toBe('');
    } finally {
      busy.close();
    }
  });
});

describe('knowledgefs serve: running', () => {
  let cp: SpawnedControlPlane;
  let d: string;
  beforeAll(async () => {
    d = await dataDir();
    cp = await spawnControlPlane({ dataDir: d });
  });
  afterAll(async () => {
    await cp?.kill('SIGKILL');
  });

  it('prints exactly one stdout line, the URL it listens on', () => {
    expect(cp.stdout).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\n$/);
  });

  it('keeps the last good directory.json when an edit is invalid, and logs it once', async () => {
    await writeDirectory(d, '{"teams": {"payments": {"name": "P"}}, "users": {"alice": {"teams": [42]}}}');
    const deadline = Date.now() + 10_000;
    while (!cp.stderr.includes('users.alice.teams[0]') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(cp.stderr).toContain(`${join(d, 'directory.json')}: users.alice.teams[0]: expected a team id string (keeping the last good version)`);
    await new Promise((r) => setTimeout(r, 600)); // several rescans
    expect(cp.stderr.split('users.alice.teams[0]').length - 1).toBe(1);
    // Still serving with the old directory: alice is a known user.
    const s = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    expect(s.token).toMatch(/^kfs_/);
    // Fixed again: the new version is used (bob appears).
    await writeDirectory(d, { ...spec, users: { ...spec.users, bob: { teams: ['search'] } } });
    const until = Date.now() + 10_000;
    let created = false;
    while (!created && Date.now() < until) {
      try {
        await cp.createSession({ kind: 'personal', creator: 'bob' });
        created = true;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(created).toBe(true);
  });

  it('SIGINT stops it cleanly with exit 0', async () => {
    const r = await cp.kill('SIGINT');
    expect(r.code).toBe(0);
    await cp.restart();
    expect((await cp.kill('SIGTERM')).code).toBe(0);
  });
});

describe('knowledgefs serve: admin token', () => {
  it('without flag or env, generates DATA/.knowledgefs/admin-token (0600), says where, and reuses it', async () => {
    const d = await dataDir();
    const start = () =>
      new Promise<{ url: string; stderr: string; stop: () => Promise<number | null> }>((resolve, reject) => {
        const env = { ...process.env };
        delete env['KNOWLEDGEFS_ADMIN_TOKEN'];
        const p = spawn(process.execPath, [BIN, 'serve', '--data', d, '--listen', '127.0.0.1:0'], { env });
        let out = '';
        let err = '';
        p.stderr.on('data', (c: Buffer) => (err += c.toString()));
        p.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m?.[1]) {
            resolve({
              url: m[1],
              stderr: err,
              stop: () => new Promise((res) => { p.once('exit', (code) => res(code)); p.kill('SIGTERM'); }),
            });
          }
        });
        p.once('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
      });
    const file = join(d, '.knowledgefs', 'admin-token');
    const first = await start();
    expect(first.stderr).toContain(`admin token: ${file}`);
    const token = (await readFile(file, 'utf8')).trim();
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await first.stop()).toBe(0);
    const second = await start();
    expect((await readFile(file, 'utf8')).trim()).toBe(token);
    const res = await fetch(`${second.url}/v1/admin/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify({ kind: 'personal', creator: 'alice' }),
    });
    expect(res.status).toBe(201);
    expect(await second.stop()).toBe(0);
  });
});

describe('knowledgefs session create', () => {
  let cp: SpawnedControlPlane;
  let tokenFile: string;
  beforeAll(async () => {
    const d = await dataDir();
    cp = await spawnControlPlane({ dataDir: d });
    tokenFile = join(d, 'admin.token');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(tokenFile, `${cp.adminToken}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    await cp?.kill('SIGKILL');
  });

  it('prints the CreateSessionResponse JSON and the token works', async () => {
    const r = await run(['session', 'create', '--server', cp.url, '--admin-token-file', tokenFile, '--kind', 'team', '--creator', 'alice', '--team', 'payments', '--json']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    const created = JSON.parse(r.stdout) as { sessionId: string; token: string; kind: string; creator: string; team: string };
    expect(created).toMatchObject({ kind: 'team', creator: 'alice', team: 'payments' });
    const res = await fetch(`${cp.url}/v1/session`, { headers: { authorization: `Bearer ${created.token}` } });
    expect(await res.json()).toMatchObject({ sessionId: created.sessionId });
    const pretty = await run(['session', 'create', '--server', cp.url, '--kind', 'personal', '--creator', 'alice'], { KNOWLEDGEFS_ADMIN_TOKEN: cp.adminToken });
    expect(pretty.code).toBe(0);
    expect(JSON.parse(pretty.stdout)).toMatchObject({ kind: 'personal', creator: 'alice' });
  });

  it('unknown team or user → the server message on one line, exit 2', async () => {
    for (const [args, message] of [
      [['--kind', 'team', '--creator', 'alice', '--team', 'ghosts'], 'unknown team "ghosts"'],
      [['--kind', 'personal', '--creator', 'mallory'], 'unknown user "mallory"'],
    ] as const) {
      const r = await run(['session', 'create', '--server', cp.url, '--admin-token-file', tokenFile, ...args]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(message);
    }
  });

  it('server unreachable → clear message, exit 4; wrong admin token → exit 5', async () => {
    const down = await run(['session', 'create', '--server', 'http://127.0.0.1:9', '--admin-token-file', tokenFile, '--kind', 'personal', '--creator', 'alice']);
    expect(down.code).toBe(4);
    expect(down.stderr).toMatch(/cannot reach the control plane at http:\/\/127\.0\.0\.1:9/);
    const wrong = await run(['session', 'create', '--server', cp.url, '--kind', 'personal', '--creator', 'alice'], { KNOWLEDGEFS_ADMIN_TOKEN: 'not-the-token' });
    expect(wrong.code).toBe(5);
    expect(wrong.stderr).toMatch(/admin token/);
  });

  it('a team session without --team is a usage error (exit 2)', async () => {
    const r = await run(['session', 'create', '--server', cp.url, '--admin-token-file', tokenFile, '--kind', 'team', '--creator', 'alice']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/needs --team/);
  });
});
