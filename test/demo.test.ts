// scripts/demo.mjs, run as a user would (needs `npm run build` and FUSE):
// the walkthrough's key lines appear and every step behaves as expected, and
// whatever way the demo ends — --no-wait, Ctrl-C while it waits, Ctrl-C in
// the middle of the walkthrough — nothing stays mounted, neither child
// process survives and the temp data dir is gone.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/control-plane.js';

const DEMO = join(REPO_ROOT, 'scripts', 'demo.mjs');
const work = mkdtempSync(join(tmpdir(), 'kfs-demo-test-'));
const MOUNT = join(work, 'knowledge');

interface Run { code: number | null; stdout: string; stderr: string }

/** Runs the demo; `interruptWhen` sends SIGINT the first time stdout matches it. */
function demo(args: string[], interruptWhen?: RegExp): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DEMO, '--workdir', work, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let sent = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (interruptWhen && !sent && interruptWhen.test(stdout)) {
        sent = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function mounted(): Promise<boolean> {
  return new Promise((resolve) => spawn('mountpoint', ['-q', MOUNT], { stdio: 'ignore' }).on('close', (c) => resolve(c === 0)).on('error', () => resolve(false)));
}

/** Asserts the demo left nothing behind: no mount, no child process, no temp data. */
async function expectCleanedUp(r: Run): Promise<void> {
  const pids = [...r.stdout.matchAll(/\(pid (\d+)\)/g)].map((m) => Number(m[1]));
  expect(pids.length).toBeGreaterThan(0);
  for (const pid of pids) expect(alive(pid), `pid ${pid} still alive`).toBe(false);
  expect(await mounted()).toBe(false);
  const data = /data dir \(a copy of examples\/knowledge-base\): (\S+)/.exec(r.stdout)?.[1];
  expect(data).toBeDefined();
  expect(existsSync(data as string)).toBe(false);
  expect(r.stdout).toContain('cleaned up: nothing mounted, no process left.');
}

const fuseHere = existsSync('/dev/fuse') && process.getuid?.() === 0;

afterAll(async () => {
  await new Promise<void>((resolve) => spawn('fusermount', ['-uz', MOUNT], { stdio: 'ignore' }).on('close', () => resolve()).on('error', () => resolve()));
  rmSync(work, { recursive: true, force: true });
});

describe.skipIf(!fuseHere && process.env.CI !== 'true')('npm run demo', () => {
  it('--no-wait: walks through every step as expected, then cleans up', { timeout: 180_000 }, async () => {
    const r = await demo(['--no-wait']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const o = r.stdout;
    expect(o).not.toContain('!! unexpected');
    expect(o).toContain('$ ls knowledge\naccount\nteam_payments\n');
    expect(o).toContain('$ cat knowledge/team_search/DUTY.md\ncat: knowledge/team_search/DUTY.md: No such file or directory\n');
    expect(o).toContain('$ knowledgefs read knowledge/team_search/DUTY.md | head -n 12\n# Search & Discovery: on-call duty\n');
    expect(o).toContain('$ ls knowledge\naccount\nteam_payments\nteam_search\n');
    expect(o).toContain('knowledge/team_search/runbooks/cluster-red.md\n');
    expect(o).toMatch(/## Mounted teams\n### team_search/);
    expect(o).toMatch(/\$ knowledgefs reminder\nToday's date is \d{4}-\d{2}-\d{2}\.\n\n.*\n- knowledge\/team_payments\/runbooks\/psp-failover\.md\n/);
    expect(o).toContain('$ knowledgefs read knowledge/team_storage/DUTY.md\nknowledgefs: knowledge/team_storage/DUTY.md: no such file\n(exit status 1)\n');
    expect(o).toContain('walkthrough complete: every step behaved as expected.');
    await expectCleanedUp(r);
  });

  it('without --no-wait: leaves the mount up with how to explore it; Ctrl-C cleans up', { timeout: 180_000 }, async () => {
    let upWhileWaiting: boolean | undefined;
    const r = await new Promise<Run>((resolve, reject) => {
      const child = spawn(process.execPath, [DEMO, '--workdir', work], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
        if (upWhileWaiting === undefined && stdout.includes('Press Ctrl-C')) {
          upWhileWaiting = false;
          void mounted().then((m) => {
            upWhileWaiting = m;
            child.kill('SIGINT');
          });
        }
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(upWhileWaiting).toBe(true);
    expect(r.stdout).toMatch(/export KNOWLEDGEFS_SOCKET=\S+control\.sock/);
    expect(r.stdout).toContain(`cd ${work}`);
    expect(r.stdout).toContain('Ctrl-C: unmounting and stopping…');
    expect(r.code).toBe(0);
    await expectCleanedUp(r);
  });

  it('Ctrl-C in the middle of the walkthrough still leaves nothing behind', { timeout: 180_000 }, async () => {
    const r = await demo([], /== 2\. /);
    expect(r.stdout).not.toContain('walkthrough complete');
    await expectCleanedUp(r);
  });
});
