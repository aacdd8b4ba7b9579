// docs/STORAGE.md says what it can prove: every test it names exists, its
// example pointer and index are valid (the index hashes to its version), its
// flag tables match --help, and its example `publish` output is what a real
// publish prints for the edit it describes.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseIndex, parsePointer } from '../src/core/publication.js';
import { parseDuration, parseSize } from '../src/core/text/units.js';
import { BIN, REPO_ROOT } from './helpers/control-plane.js';
import { missingTests, namedTests } from './helpers/doc-claims.js';
import { makeDataDir, removeDataDir, writeDataFile } from './helpers/data-dir.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

const doc = readFileSync(join(REPO_ROOT, 'docs', 'STORAGE.md'), 'utf8');

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout }));
  });
}

/** The rows of the markdown table that follows `heading` text. */
function tableAfter(marker: string): { flag: string; dflt: string }[] {
  const rest = doc.slice(doc.indexOf(marker));
  const table = rest.slice(rest.indexOf('| flag |')).split('\n\n')[0] as string;
  return table
    .split('\n')
    .slice(2)
    .map((row) => row.split(' | '))
    .map((cells) => ({ flag: /`(--[a-z0-9-]+)/.exec(cells[0] ?? '')?.[1] ?? '', dflt: (cells[1] ?? '').replace(/`/g, '').trim() }));
}

function sameValue(docValue: string, help: string): boolean {
  if (docValue === help) return true;
  for (const parse of [parseSize, parseDuration]) {
    try {
      if (parse(docValue) === parse(help)) return true;
    } catch {
      // not this kind of value
    }
  }
  return false;
}

describe('docs/STORAGE.md', () => {
  it('every test it names exists', () => {
    const named = namedTests(doc);
    expect(named.length).toBeGreaterThan(20);
    expect(missingTests(named)).toEqual([]);
  });

  it('its example pointer and index are valid, and the index hashes to its version', () => {
    const blocks = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    const pointer = parsePointer(Buffer.from(blocks[0] as string));
    const version = pointer.scopes['team_payments'] as string;
    const index = parseIndex(Buffer.from(blocks[1] as string), 'team_payments', version, 64 * 1024 * 1024);
    expect(index.files.map((f) => f.path)).toEqual(['DUTY.md', 'runbooks/db.md']);
    expect(doc).toContain(`indexes/team_payments/${version.slice(0, 8)}…`);
  });

  for (const [command, marker] of [['publish', '`knowledgefs publish --data DIR'], ['serve', '`serve --store s3://BUCKET/PREFIX` starts'], ['gc', '**The schema.**']] as const) {
    it(`its ${command} flag table matches ${command} --help`, async () => {
      const help = (await run([command, '--help'])).stdout.replace(/\n\s+/g, ' ');
      const rows = tableAfter(marker);
      expect(rows.length).toBeGreaterThan(3);
      for (const { flag, dflt } of rows) {
        expect(help, `${command} --help lacks ${flag}`).toContain(flag);
        const shown = new RegExp(`${flag} [^(]*?\\(default: "?([^")]*)"?\\)`).exec(help)?.[1];
        if (shown !== undefined && !/\s/.test(shown)) expect(sameValue(dflt, shown), `${flag}: doc ${dflt}, --help ${shown}`).toBe(true);
      }
    });
  }
});

describe('the example publish output', () => {
  let s3: TestS3;
  let data: string;
  beforeAll(async () => {
    s3 = await startS3();
    data = await makeDataDir({
      teams: { payments: 'Payments' },
      files: {
        'account/DUTY.md': '# Account\n',
        'account/guide.md': 'guide\n',
        'teams/payments/DUTY.md': '# Payments\n',
        'teams/payments/old.md': 'old\n',
        'teams/payments/db.md': 'db v1\n',
      },
    });
  });
  afterAll(async () => {
    await s3?.close();
    if (data) await removeDataDir(data);
  });

  it('is what publish prints after adding, changing and removing one file each', async () => {
    const store = `s3://${s3.bucket}/doc`;
    expect((await run(['publish', '--data', data, '--store', store], s3.env)).code).toBe(0);
    await writeDataFile(data, 'teams/payments/new.md', 'new\n');
    await writeDataFile(data, 'teams/payments/db.md', 'db v2\n');
    await rm(join(data, 'teams/payments/old.md'));
    const out = await run(['publish', '--data', data, '--store', store], s3.env);
    const example = /```\n(published s3:[\s\S]*?)```/.exec(doc)?.[1] as string;
    const normalise = (text: string) => text.replace(/s3:\/\/\S+ at \S+:/, 's3://… at TIME:');
    expect(normalise(out.stdout)).toBe(normalise(example));
  });
});
