// `knowledgefs serve` (dist/, in a child process) says how it follows the
// data directory: --watch off and its rescan interval, or how many
// directories it watches. What the watch does is in server-watch.test.ts.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDataDir, removeDataDir, type DataDirSpec } from './helpers/data-dir.js';
import { spawnControlPlane } from './helpers/control-plane.js';

const spec: DataDirSpec = {
  teams: { payments: 'Payments', search: 'Search', ops: 'Ops' },
  users: { alice: { teams: ['payments', 'search', 'ops'] } },
  files: {
    'account/DUTY.md': '# Account\n',
    'teams/payments/DUTY.md': '# Payments\n',
    'teams/payments/runbooks/db.md': 'v1\n',
    'teams/search/DUTY.md': '# Search\n',
  },
};

describe('serve on the command line', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await makeDataDir(spec);
  });
  afterAll(async () => {
    await removeDataDir(dir);
  });

  it('the CLI says which it does: --watch off, or watching N directories', async () => {
    const off = await spawnControlPlane({ dataDir: dir, args: ['--watch', 'off', '--scan-interval', '300ms'] });
    const on = await spawnControlPlane({ dataDir: dir });
    try {
      const deadline = Date.now() + 10_000;
      while (!(off.stderr.includes('serving ') && on.stderr.includes('serving ')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(off.stderr).toMatch(/sessions in [^;]+; full rescan every 300ms\n/);
      expect(on.stderr).toMatch(/sessions in [^;]+; watching \d+ directories, full rescan every 30s\n/);
    } finally {
      await off.kill();
      await on.kill();
    }
  });
});
