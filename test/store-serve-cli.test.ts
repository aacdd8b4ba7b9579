// `knowledgefs serve --store` (dist/, in a child process) against a real
// S3-protocol server (s3rver): what it says it serves, and its exit codes for
// an unreachable or empty store and for flags that do not go together. What
// it serves is in store-serve.test.ts, in-process.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishTo } from './helpers/bucket.js';
import { BIN } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, type DataDirSpec } from './helpers/data-dir.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

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

describe('knowledgefs serve --store (CLI)', () => {
  const run = async (args: string[], env: Record<string, string>) => {
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'serve', '--listen', '127.0.0.1:0', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes('listening on')) child.kill('SIGTERM');
      });
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
  };

  it('starts on a publication, says what it serves; exit 4 when the store is unreachable, 2 for bad flags', async () => {
    const p = prefix();
    await publishTo(s3, p, dir);
    const tmp = await mkdtemp(`${tmpdir()}/kfs-serve-`);
    const env = { ...s3.env, KNOWLEDGEFS_ADMIN_TOKEN: 'kfsadmin_0123456789abcdef' };
    const files = ['--state', `${tmp}/state.json`, '--audit-log', `${tmp}/audit.log`];
    try {
      const ok = await run(['--store', `s3://${s3.bucket}/${p}`, ...files], env);
      expect(ok.code).toBe(0);
      expect(ok.stderr).toMatch(new RegExp(`serving s3://${s3.bucket}/${p} at http://127\\.0\\.0\\.1:\\d+ \\(published \\S+\\): 3 scopes, 6 files, 0 sessions in \\S+; new publications looked for every 500ms; blob cache 256\\.0 MiB in memory`));
      const down = await run(['--store', `s3://${s3.bucket}/${p}`, '--s3-endpoint', 'http://127.0.0.1:1', ...files], env);
      expect(down.code).toBe(4);
      expect(down.stderr).toMatch(/current\.json: cannot reach http:\/\/127\.0\.0\.1:1/);
      const empty = await run(['--store', `s3://${s3.bucket}/nothing-here`, ...files], env);
      expect(empty.code).toBe(4);
      expect(empty.stderr).toMatch(/current\.json: missing: there is no publication \(run knowledgefs publish/);
      const both = await run(['--store', `s3://${s3.bucket}/${p}`, '--data', dir, ...files], env);
      expect(both.code).toBe(2);
      expect(both.stderr).toMatch(/--data and --store exclude each other/);
      const noState = await run(['--store', `s3://${s3.bucket}/${p}`], env);
      expect(noState.code).toBe(2);
      expect(noState.stderr).toMatch(/with --store, --state and --audit-log must be given/);
      const noToken = await run(['--store', `s3://${s3.bucket}/${p}`, ...files], s3.env);
      expect(noToken.code).toBe(2);
      expect(noToken.stderr).toMatch(/with --store, the admin token must come from --admin-token-file or \$KNOWLEDGEFS_ADMIN_TOKEN/);
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  });
});
