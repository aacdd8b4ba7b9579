// The `knowledgefs publish` command line (dist/, in a child process) against
// a real S3-protocol server (s3rver): what it prints and its exit codes. What
// publish uploads, and in which order, is in publish.test.ts, in-process.

import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir, writeDataFile, type DataDirSpec } from './helpers/data-dir.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments' },
  users: { alice: { teams: ['payments'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'account/same.md': 'shared bytes\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/copy-of-same.md': 'shared bytes\n',
    'teams/payments/runbooks/db.md': 'db v1\n',
  },
};

let s3: TestS3;
let n = 0;
const prefix = () => `pub${++n}`;

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3?.close();
});

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('knowledgefs publish (CLI)', () => {
  it('prints what changed, then "nothing changed"; --json gives the result', async () => {
    const data = await makeDataDir(spec);
    const store = `s3://${s3.bucket}/${prefix()}`;
    try {
      const first = await run(['publish', '--data', data, '--store', store], s3.env);
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(new RegExp(`^published ${store} at \\S+: 2 scopes, 5 files\\n`));
      expect(first.stdout).toMatch(/ {2}team_payments +added \(3 files\)\n/);
      expect(first.stdout).toMatch(/uploaded 4 blobs \(40 B\), 2 indexes, 1 directory\.json; 0 of 4 blobs were already stored\n$/);
      const again = await run(['publish', '--data', data, '--store', store], s3.env);
      expect(again.stdout).toMatch(new RegExp(`^nothing changed: ${store} already holds this publication`));
      await writeDataFile(data, 'account/DUTY.md', '# Account v2\n');
      const json = await run(['publish', '--data', data, '--store', store, '--json'], s3.env);
      const parsed = JSON.parse(json.stdout) as { store: string; changed: boolean; scopes: { scope: string; status: string; modified?: number }[] };
      expect(parsed).toMatchObject({ store, changed: true });
      expect(parsed.scopes[0]).toMatchObject({ scope: 'account', status: 'changed', modified: 1 });
    } finally {
      await removeDataDir(data);
    }
  });

  it('exit 4 naming the store when it is unreachable; exit 2 for a bad flag or missing credentials', async () => {
    const data = await makeDataDir(spec);
    try {
      const down = await run(['publish', '--data', data, '--store', 's3://knowledge/x', '--s3-endpoint', 'http://127.0.0.1:1'], s3.env);
      expect(down.code).toBe(4);
      expect(down.stderr).toMatch(/s3:\/\/knowledge\/x\/current\.json: cannot reach http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/);
      const bad = await run(['publish', '--data', data, '--store', '/srv/x'], s3.env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--store "\/srv\/x": expected s3:\/\/BUCKET/);
      const noCreds = await run(['publish', '--data', data, '--store', 's3://knowledge/x'], { AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '' });
      expect(noCreds.code).toBe(2);
      expect(noCreds.stderr).toMatch(/no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
    } finally {
      await removeDataDir(data);
    }
  });
});

