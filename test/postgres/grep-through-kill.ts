// `kill -9` of the replica a mount is using, in the middle of `grep -r`, for
// the suites that run several replicas behind one mount (`--server A,B,C`).
// The mount must be started with EVERY_OPEN_FETCHES so the kill lands on
// requests in flight; grep must then finish as if nothing had happened.

import { expect } from 'vitest';
import type { SpawnedControlPlane } from '../helpers/control-plane.js';
import { run, type MountHandle } from '../helpers/mount.js';
import { checkGrepOutput, grepErrors } from '../faults/corpus.js';

/** Mount flags for which every open asks the control plane and fetches. */
export const EVERY_OPEN_FETCHES = ['--prefetch-content', 'off', '--cache-size', '0', '--grant-ttl', '0', '--sync-interval', '200ms'] as const;

/**
 * `grep -r` over the whole mount with `victim` SIGKILLed 300 ms in: grep
 * does not hang, is still running when the kill lands, exits 0 with no
 * error, and prints `files` files, each whole and one of its `versions`.
 */
export async function grepThroughKill(m: MountHandle, victim: SpawnedControlPlane, versions: ReadonlyMap<string, readonly string[]>, files: number): Promise<void> {
  const started = Date.now();
  const grep = run('grep', ['-r', '-H', '', '.'], { cwd: m.mountpoint, timeoutMs: 60_000 });
  await new Promise((r) => setTimeout(r, 300));
  expect((await victim.kill('SIGKILL')).signal).toBe('SIGKILL');
  const done = await grep;
  const took = Date.now() - started;
  expect(done.timedOut, 'grep hung').toBe(false);
  expect(took, 'the kill landed after grep had finished: nothing exercised').toBeGreaterThan(300);
  expect(grepErrors(done.stderr)).toEqual([]);
  expect(done.code).toBe(0);
  const check = checkGrepOutput(done.stdout, versions);
  expect(check.problems).toEqual([]);
  expect(check.complete.length).toBe(files);
}
