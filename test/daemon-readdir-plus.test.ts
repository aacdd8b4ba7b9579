// Directory listings carry each entry's stat (docs/PERFORMANCE.md, `find`):
// the kernel learns every entry's type from the listing, so a walk needs no
// lookup per file. The stats must be exactly what getattr answers, from the
// same tree as the names, and errors must stay those of readdir.

import { constants as osConstants } from 'node:os';
import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { DIR_MODE, FILE_MODE, Tree } from '../src/core/tree/tree.js';
import { ContentCache } from '../src/daemon/content/content-cache.js';
import { ErrnoError, ErrnoMapper } from '../src/daemon/fuse/errno.js';
import { ContentFetcher } from '../src/daemon/content/fetcher.js';
import { KnowledgeFilesystem } from '../src/daemon/filesystem.js';
import { buildOps } from '../src/daemon/fuse/fuse-adapter.js';
import { GrantCache } from '../src/daemon/content/grant-cache.js';
import type { NodeStat } from '../src/core/tree/tree.js';
import { FakeControlClient } from './helpers/fake-control-client.js';

function filesystem(): { fs: KnowledgeFilesystem; setTree: (t: Tree) => void; client: FakeControlClient } {
  const client = new FakeControlClient();
  client.put('account/DUTY.md', '# Account\n', 1_700_000_000_000);
  client.put('account/runbooks/a.md', 'alpha\n', 1_700_000_001_000);
  client.put('account/runbooks/deep/b.md', 'beta beta\n', 1_700_000_002_000);
  client.put('team_x/DUTY.md', '# X\n', 1_700_000_003_000);
  let tree = Tree.fromPlan(client.currentPlan(), undefined, { uid: 7, gid: 8 });
  const fs = new KnowledgeFilesystem({
    tree: () => tree,
    grants: new GrantCache(client, 5000),
    fetcher: new ContentFetcher({ client, cache: new ContentCache({ maxBytes: 1 << 20 }) }),
    requestTimeoutMs: 2000,
  });
  return { fs, client, setTree: (t) => { tree = t; } };
}

const join = (dir: string, name: string) => (dir === '/' ? `/${name}` : `${dir}/${name}`);

describe('readdirPlus', () => {
  it('lists the same names as readdir, each with the stat getattr gives', () => {
    const { fs } = filesystem();
    for (const dir of ['/', '/account', '/account/runbooks', '/account/runbooks/deep', '/team_x']) {
      const { names, stats } = fs.readdirPlus(dir);
      expect(names).toEqual(fs.readdir(dir));
      expect(stats).toHaveLength(names.length);
      names.forEach((name, i) => {
        const expected = fs.getattr(join(dir, name));
        expect({ ...stats[i] }).toEqual({ ...expected });
      });
    }
    const { names, stats } = fs.readdirPlus('/account/runbooks');
    expect(names).toEqual(['a.md', 'deep']);
    expect(stats.map((s) => s.mode)).toEqual([FILE_MODE, DIR_MODE]);
    expect(stats[0]).toMatchObject({ size: 6, mtime: 1_700_000_001_000, uid: 7, gid: 8 });
  });

  it('answers from the current tree after a sync', () => {
    const { fs, client, setTree } = filesystem();
    client.put('account/runbooks/c.md', 'gamma gamma gamma\n', 1_700_000_009_000);
    client.remove('account/runbooks/a.md');
    setTree(Tree.fromPlan(client.currentPlan(), undefined, { uid: 7, gid: 8 }));
    const { names, stats } = fs.readdirPlus('/account/runbooks');
    expect(names).toEqual(['c.md', 'deep']);
    expect(stats[0]).toMatchObject({ mode: FILE_MODE, size: 18, mtime: 1_700_000_009_000 });
  });

  it('keeps readdir errors: missing is not_found, a file is ENOTDIR', () => {
    const { fs } = filesystem();
    expect(() => fs.readdirPlus('/team_nope')).toThrow(KnowledgeError);
    let errno = 0;
    try {
      fs.readdirPlus('/account/DUTY.md');
    } catch (err) {
      errno = err instanceof ErrnoError ? err.errno : -1;
    }
    expect(errno).toBe(osConstants.errno.ENOTDIR);
  });
});

describe('FUSE readdir callback', () => {
  it('passes . and .., then names, with one stat per name, or an errno', () => {
    const { fs } = filesystem();
    const ops = buildOps(fs, new ErrnoMapper(() => undefined));
    const answers: { code: number; names?: readonly string[]; stats?: readonly NodeStat[] }[] = [];
    ops.readdir('/account', (code, names, stats) => answers.push({ code, names, stats }));
    ops.readdir('/team_nope', (code) => answers.push({ code }));
    expect(answers[0]?.code).toBe(0);
    expect(answers[0]?.names).toEqual(['.', '..', 'DUTY.md', 'runbooks']);
    expect(answers[0]?.stats?.map((s) => s.mode)).toEqual([DIR_MODE, DIR_MODE, FILE_MODE, DIR_MODE]);
    expect(answers[1]?.code).toBe(-osConstants.errno.ENOENT);
  });
});
