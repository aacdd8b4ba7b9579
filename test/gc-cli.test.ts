// The `knowledgefs gc` command line (dist/, in a child process) against a real
// S3-protocol server (s3rver): what it prints, its exit codes and its flag
// checks. What gc keeps and deletes is in gc.test.ts, in-process.

import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { GC_SPEC, threePublications } from './helpers/gc-fixture.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';


let s3: TestS3;
let n = 0;
const prefix = () => `gc${++n}`;

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3?.close();
});


function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, KNOWLEDGEFS_STATE_URL: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('knowledgefs gc (CLI)', () => {
  it('a dry run prints counts and bytes and progress; --delete without --state is refused (exit 2)', async () => {
    const p = prefix();
    const data = await makeDataDir(GC_SPEC);
    try {
      await threePublications(s3, p, data);
      const store = `s3://${s3.bucket}/${p}`;
      // Everything is seconds old: a grace of 0s lets the dry run count it.
      const dry = await cli(['gc', '--store', store, '--keep', '1', '--grace', '0s'], s3.env);
      expect(dry.code).toBe(0);
      expect(dry.stderr).toMatch(/gc: no --state: publications replicas serve are not known/);
      expect(dry.stderr).toMatch(/gc: listed 1\d objects…/);
      expect(dry.stdout).toMatch(new RegExp(`^gc ${store}: 1 publication kept, grace 0ms\\n`));
      expect(dry.stdout).toMatch(/\nwould delete 6 objects, [\d.]+ (B|KiB): 2 blobs \(12 B\), 2 indexes \(.*\), 2 publications \(.*\)\n/);
      expect(dry.stdout).toMatch(/dry run: nothing was deleted; run again with --delete/);
      const refused = await cli(['gc', '--store', store, '--grace', '0s', '--delete'], s3.env);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--delete needs --state postgres:\/\/…/);
      const again = await cli(['gc', '--store', store, '--keep', '1', '--grace', '0s', '--json'], s3.env);
      expect(JSON.parse(again.stdout)).toMatchObject({ deleted: false, swept: { objects: 6 } });
      const file = await cli(['gc', '--store', store, '--state', '/var/lib/knowledgefs/state.json'], s3.env);
      expect(file.code).toBe(2);
      expect(file.stderr).toMatch(/--state: expected the replicas' PostgreSQL/);
      const bad = await cli(['gc', '--store', store, '--keep', '0'], s3.env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--keep.*expected a number of publications from 1/);
    } finally {
      await removeDataDir(data);
    }
  });
});
