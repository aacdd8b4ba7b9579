// What an operator's data directory can hold that the scan must survive and
// report without serving the wrong thing: a path past PATH_MAX inside a pack,
// a symlinked teams/, hard links, and names that would break a log line.
// Against a real control plane over HTTP.

import { link, mkdir, symlink, writeFile } from 'node:fs/promises';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Plan } from '../../src/core/session/plan.js';
import { startControlPlane, type TestControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataFile, writeDataFile } from '../helpers/data-dir.js';
import { run, waitFor } from '../helpers/mount.js';

const SPEC = {
  teams: { payments: 'Payments', search: 'Search' },
  users: { alice: { teams: ['payments', 'search'] } },
  files: { 'account/DUTY.md': '# Account\n', 'teams/payments/DUTY.md': '# Payments\n', 'teams/search/DUTY.md': '# Search\n' },
};

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c().catch(() => undefined);
});

async function dataDir(): Promise<string> {
  const dir = await makeDataDir(SPEC);
  // rm -rf copes with paths past PATH_MAX (it walks with openat).
  cleanups.push(() => run('rm', ['-rf', dir]));
  return dir;
}

async function controlPlane(dir: string, watch = false): Promise<TestControlPlane> {
  const cp = await startControlPlane({ dataDir: dir, scanIntervalMs: 100, watch });
  cleanups.unshift(() => cp.close());
  return cp;
}

async function planPaths(cp: TestControlPlane): Promise<string[]> {
  const s = await cp.createSession({ kind: 'personal', creator: 'alice' });
  const res = await fetch(`${cp.url}/v1/plan?threshold=1000000`, { headers: { authorization: `Bearer ${s.token}` } });
  const p = (await res.json()) as Plan;
  return p.scopes.flatMap((sc) => sc.files.map((f) => `${sc.scope}/${f.path}`)).sort();
}

/**
 * Creates `teams/payments/<dirs…>/<name>` whose path inside the pack is legal
 * (< 4096 bytes) but whose absolute path is past PATH_MAX: built with
 * relative `cd`s, since no absolute call can reach it.
 */
async function overLongFile(dir: string, name: string, kind: 'file' | 'dir' = 'file'): Promise<string> {
  const base = join(dir, 'teams/payments');
  const dirs: string[] = [];
  let length = base.length;
  while (length < 4080 - 201) {
    dirs.push('d'.repeat(200));
    length += 201;
  }
  dirs.push('e'.repeat(4080 - length - 1));
  const rel = `${dirs.join('/')}/${name}`;
  expect(base.length + 1 + rel.length).toBeGreaterThanOrEqual(4096);
  expect(Buffer.byteLength(rel)).toBeLessThan(4096);
  const script = `cd "$1" && for d in ${dirs.map((d) => `'${d}'`).join(' ')}; do mkdir -p "$d" && cd "$d" || exit 1; done && ${kind === 'file' ? 'echo deep > "$2"' : 'mkdir "$2"'}`;
  const r = await run('sh', ['-c', script, 'sh', base, name]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return rel;
}

describe.each([['off', false], ['on', true]])('a path past PATH_MAX inside a pack (--watch %s)', (_name, watch) => {
  it('serve starts; the entry is skipped with one log line; the rest of the pack keeps being served and updated', async () => {
    const dir = await dataDir();
    await overLongFile(dir, 'over-long-at-start.md');
    await overLongFile(dir, 'over-long-directory', 'dir');
    const cp = await controlPlane(dir, watch);
    expect(await planPaths(cp)).toEqual(['account/DUTY.md', 'team_payments/DUTY.md', 'team_search/DUTY.md']);
    await overLongFile(dir, 'over-long-while-running.md');
    await writeDataFile(dir, 'teams/payments/new.md', 'new\n');
    await removeDataFile(dir, 'teams/payments/DUTY.md');
    const paths = await waitFor(async () => {
      const p = await planPaths(cp);
      return p.includes('team_payments/new.md') && !p.includes('team_payments/DUTY.md') ? p : undefined;
    }, 10_000);
    expect(paths).toEqual(['account/DUTY.md', 'team_payments/new.md', 'team_search/DUTY.md']);
    await cp.rescan();
    await cp.rescan();
    for (const name of ['over-long-at-start.md', 'over-long-while-running.md']) {
      const lines = cp.logs.filter((l) => l.includes(name));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^skipping .*: cannot be read \(ENAMETOOLONG\)$/);
    }
    expect(cp.logs.filter((l) => l.includes('over-long-directory'))).toEqual([
      expect.stringMatching(/^skipping .*over-long-directory: cannot list directory \(ENAMETOOLONG\)$/),
    ]);
    expect(cp.logs.filter((l) => l.startsWith('rescan failed') || l.startsWith('watching'))).toEqual([]);
  });
});

describe('a symlinked teams/', () => {
  it('is not followed by the scan (reads never follow it either): one log line, no team listed', async () => {
    const dir = await dataDir();
    const elsewhere = mkdtempSync(join(tmpdir(), 'kfs-elsewhere-'));
    cleanups.push(() => run('rm', ['-rf', elsewhere]));
    await writeDataFile(elsewhere, 'payments/SECRET.md', 'not part of the data directory\n');
    await run('rm', ['-rf', join(dir, 'teams')]);
    await symlink(elsewhere, join(dir, 'teams'));
    const cp = await controlPlane(dir);
    expect(await planPaths(cp)).toEqual(['account/DUTY.md']);
    await cp.rescan();
    const lines = cp.logs.filter((l) => l.includes(`${join(dir, 'teams')}:`));
    expect(lines).toEqual([`skipping ${join(dir, 'teams')}: symlink (not followed): no team packs are served`]);
  });
});

describe('hard links in a pack', () => {
  it('are served, and logged once (across rescans) as a hard link that may share content outside the pack', async () => {
    const dir = await dataDir();
    const outside = join(dir, 'outside.md');
    await writeFile(outside, 'shared\n');
    await link(outside, join(dir, 'teams/payments/linked.md'));
    const cp = await controlPlane(dir);
    expect(await planPaths(cp)).toContain('team_payments/linked.md');
    await cp.rescan();
    await cp.rescan();
    const lines = cp.logs.filter((l) => l.includes('linked.md'));
    expect(lines).toEqual([`serving ${join(dir, 'teams/payments/linked.md')}: a hard link (2 names share its content, possibly outside the pack)`]);
  });
});

describe('names that would break a log line', () => {
  it('reach the log escaped: U+0085, U+2028, U+2029, ESC, bidi override', async () => {
    const dir = await dataDir();
    const nasty = ['nel\u0085skipping forged.md', 'ls\u2028x', 'ps\u2029x', 'esc\u001b[2Jx', 'bidi\u202egnp.md'];
    await mkdir(join(dir, 'teams/payments/links'), { recursive: true });
    for (const n of nasty) await symlink('/etc/passwd', join(dir, 'teams/payments/links', n));
    const cp = await controlPlane(dir);
    await cp.rescan();
    const lines = cp.logs.filter((l) => l.includes('/links/'));
    expect(lines).toHaveLength(nasty.length);
    for (const l of lines) expect(l).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202e]/);
    expect(lines.some((l) => l.includes('nel\\u0085skipping forged.md: control character in name'))).toBe(true);
    expect(lines.some((l) => l.includes('ls\\u2028x: symlink'))).toBe(true);
    expect(lines.some((l) => l.includes('esc\\u001b[2Jx: control character in name'))).toBe(true);
    expect(lines.some((l) => l.includes('bidi\\u202egnp.md: symlink'))).toBe(true);
  });
});
