// The mount daemon's young-generation cap, in fresh Node processes (it is
// process-wide): set, a burst of surviving allocations (what a large plan
// is) leaves V8's new space at its initial size; not set, the same burst
// grows it; an operator's own semi-space flag is left alone.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT, run } from './helpers/mount.js';

const HEAP = pathToFileURL(join(REPO_ROOT, 'dist', 'daemon', 'heap.js')).href;

/** Node script: optionally the cap, then ~30 MB of objects that all survive; prints {set, newSpaceMiB}. */
const script = (applyCap: boolean) => `
import { getHeapSpaceStatistics } from 'node:v8';
import { keepYoungGenerationSmall } from ${JSON.stringify(HEAP)};
const set = ${applyCap} ? keepYoungGenerationSmall(process.execArgv, process.env.NODE_OPTIONS) : false;
const kept = [];
for (let i = 0; i < 200000; i++) kept.push({ path: 'dir/' + i + '.md', size: i, sha256: String(i).padStart(64, '0') });
const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
process.stdout.write(JSON.stringify({ set, kept: kept.length, newSpaceMiB: space.space_size / 1048576 }));
`;

async function measure(applyCap: boolean, nodeArgs: string[] = []): Promise<{ set: boolean; newSpaceMiB: number }> {
  const r = await run(process.execPath, [...nodeArgs, '--input-type=module', '-e', script(applyCap)], { timeoutMs: 60_000 });
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as { set: boolean; newSpaceMiB: number };
}

describe('keepYoungGenerationSmall', () => {
  it('keeps the new space at its initial size through a burst of surviving objects', async () => {
    const capped = await measure(true);
    expect(capped.set).toBe(true);
    expect(capped.newSpaceMiB).toBeLessThanOrEqual(4);
    const uncapped = await measure(false);
    expect(uncapped.newSpaceMiB).toBeGreaterThan(4); // the burst does grow it when not capped
  });

  it('leaves an operator-chosen semi-space size alone', async () => {
    const chosen = await measure(true, ['--max-semi-space-size=16']);
    expect(chosen.set).toBe(false);
  });
});
