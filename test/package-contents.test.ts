// What the tarball's entry points need, checked against what npm packs
// (scripts/package-contents.mjs, which prepack runs last). Here on this
// checkout's packed list after `npm run build` (the prebuilt addons only
// appear at `npm pack`, so their absence is expected here and nothing else),
// then on lists with one thing missing, each of which must be named.
// test:artifacts runs the same check on the tarball of a clean clone.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { entryPoints, packageContentProblems, packedFileList, PREBUILT_TARGETS, trackedFiles } from '../scripts/package-contents.mjs';
import { REPO_ROOT } from './helpers/mount.js';

type Check = (o: { root: string; files: string[]; tracked?: string[] }) => Promise<string[]>;
const check = packageContentProblems as Check;
const files = (packedFileList as (root: string) => string[])(REPO_ROOT);
const tracked = (trackedFiles as (root: string) => string[] | undefined)(REPO_ROOT);
const prebuilds = (PREBUILT_TARGETS as string[]).map((t) => `prebuilds/${t}/knowledgefs_fuse.node`);
/** The packed list as `npm pack` makes it: with the prebuilt addons prepack writes. */
const packed = [...new Set([...files, ...prebuilds])];

describe('the files npm packs', () => {
  it('the entry points are the CLI, the library and its types (and package.json, which exports names)', () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as object;
    expect((entryPoints as (p: object) => string[])(pkg).sort()).toEqual(['bin/knowledgefs.js', 'dist/client/index.d.ts', 'dist/client/index.js', 'package.json']);
  });

  it('hold everything bin/knowledgefs.js and the package export import, and nothing untracked', async () => {
    expect(files).toContain('dist/bundle/main.js');
    expect(await check({ root: REPO_ROOT, files: packed, tracked })).toEqual([]);
  });

  it('without the CLI bundle, the tarball is refused naming the file and who imports it', async () => {
    const problems = await check({ root: REPO_ROOT, files: packed.filter((f) => !f.startsWith('dist/bundle/')), tracked });
    expect(problems).toContain('dist/bundle/broken-pipe.js (imported by bin/knowledgefs.js) is not in the package');
    expect(problems).toContain('dist/bundle/main.js (imported by bin/knowledgefs.js) is not in the package');
  });

  it('a chunk the bundle loads on demand, a module of the library, a type file and the package.json read by path are each named', async () => {
    const chunk = packed.find((f) => /^dist\/bundle\/mount-[\w-]+\.js$/.test(f));
    expect(chunk).toBeDefined();
    const without = (...gone: string[]) => check({ root: REPO_ROOT, files: packed.filter((f) => !gone.includes(f)), tracked });
    expect((await without(chunk!)).join('\n')).toMatch(new RegExp(`^${chunk!.replace(/[.]/g, '\\.')} \\(imported by dist/bundle/main\\.js\\) is not in the package$`, 'm'));
    expect(await without('dist/client/socket-trust.js')).toContain('dist/client/socket-trust.js (imported by dist/client/socket-transport.js) is not in the package');
    expect(await without('dist/client/errors.d.ts')).toContain('dist/client/errors.d.ts (imported by dist/client/index.d.ts) is not in the package');
    expect(await without('package.json')).toContain('package.json is not in the package (the CLI and the MCP server read their version from it)');
  });

  it('files opened by path are required: the prebuilt addons, the SQL migrations, what a build from source needs', async () => {
    const problems = await check({ root: REPO_ROOT, files: packed.filter((f) => !f.startsWith('prebuilds/') && !f.startsWith('sql/') && !f.startsWith('native/')), tracked });
    expect(problems).toEqual(expect.arrayContaining([
      'prebuilds/linux-x64/knowledgefs_fuse.node is not in the package (the prebuilt libfuse 3 addon for linux-x64)',
      'prebuilds/linux-arm64/knowledgefs_fuse.node is not in the package (the prebuilt libfuse 3 addon for linux-arm64)',
      'sql/migrations/*.sql are not in the package (serve applies them to PostgreSQL state)',
      'native/session.c is not in the package (a build from source compiles it)',
      'native/knowledgefs_fuse.h is not in the package (a build from source compiles it)',
    ]));
  });

  it('a file in the tree that git does not track is refused; generated dist/ and prebuilds/ are not', async () => {
    const problems = await check({ root: REPO_ROOT, files: [...packed, 'docs/scratch-notes.md'], tracked });
    expect(problems).toEqual(['docs/scratch-notes.md would be packed but is not tracked by git: commit it, or remove it from the tree']);
  });

  it('an import of a package that is not a dependency, or outside the package, is named; builtins and optional peers are not', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kfs-pkg-contents-'));
    try {
      mkdirSync(join(root, 'bin'));
      writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'x', bin: { x: 'bin/x.js' }, dependencies: { commander: '1' }, peerDependencies: { 'fuse-native': '2' } }));
      writeFileSync(join(root, 'bin', 'x.js'), [
        "#!/usr/bin/env node",
        "import { Command } from 'commander';",
        "import { readFileSync } from 'node:fs';",
        "import 'fs';",
        "import pad from 'left-pad';",
        "const load = async () => import('../../elsewhere.js');",
        "const require = (await import('node:module')).createRequire(import.meta.url);",
        "require('fuse-native');",
      ].join('\n'));
      const problems = await check({ root, files: ['package.json', 'bin/x.js'] });
      expect(problems.sort()).toEqual([
        'bin/x.js imports ../../elsewhere.js, outside the package',
        'bin/x.js imports left-pad, which is not in dependencies (it would not be installed)',
        ...(PREBUILT_TARGETS as string[]).map((t) => `prebuilds/${t}/knowledgefs_fuse.node is not in the package (the prebuilt libfuse 3 addon for ${t})`),
        'scripts/build-native.mjs is not in the package (builds the addon from source where no prebuilt loads)',
        'sql/migrations/*.sql are not in the package (serve applies them to PostgreSQL state)',
      ].sort());
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
