// The 'knowledgefs' package entry as a harness sees it: a separate Node
// process importing 'knowledgefs' by name (the built dist/), and tsc
// type-checking a consumer against the built .d.ts. The library's behaviour
// itself is tested in this process in client-library.test.ts.

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMemoryDaemon, type MemoryDaemon } from './helpers/memory-daemon.js';
import { REPO_ROOT, run } from './helpers/mount.js';

const dir = mkdtempSync(join(tmpdir(), 'kfs-client-pkg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let daemon: MemoryDaemon;
beforeEach(async () => { daemon = await startMemoryDaemon(); });
afterEach(async () => { await daemon.close(); });

describe("the 'knowledgefs' package", () => {
  let consumer = '';
  beforeAll(() => {
    // A harness project with knowledgefs installed: node_modules/knowledgefs → this repository (built).
    consumer = join(dir, 'harness');
    mkdirSync(join(consumer, 'node_modules'), { recursive: true });
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'harness', type: 'module', private: true }));
    symlinkSync(REPO_ROOT, join(consumer, 'node_modules', 'knowledgefs'));
    symlinkSync(join(REPO_ROOT, 'node_modules', '@types'), join(consumer, 'node_modules', '@types'));
  });

  it('is importable by name from another process, and an idle connection does not keep that process alive', async () => {
    writeFileSync(join(consumer, 'use.mjs'), `
      import { KnowledgeClient, NotFoundError, isTemporary } from 'knowledgefs';
      const kfs = new KnowledgeClient({ socketPath: process.argv[2], cwd: '/' });
      const r = await kfs.read('knowledge/account/DUTY.md');
      let hidden;
      try { await kfs.read('knowledge/team_storage/DUTY.md'); } catch (e) { hidden = { notFound: e instanceof NotFoundError, code: e.code, temporary: isTemporary(e) }; }
      console.log(JSON.stringify({ content: r.content, hidden, manifest: (await kfs.manifest()).text }));
    `);
    const r = await run(process.execPath, ['use.mjs', daemon.socketPath], { cwd: consumer, timeoutMs: 20_000 });
    expect(r.timedOut).toBe(false);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ content: '# Account\n', hidden: { notFound: true, code: 'not_found', temporary: false }, manifest: 'MANIFEST\n' });
  });

  it('ships types: a TypeScript consumer type-checks, and a misuse does not', async () => {
    const tsconfig = { compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, types: ['node'] }, files: ['good.ts', 'bad.ts'] };
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify(tsconfig));
    writeFileSync(join(consumer, 'good.ts'), `
      import { KnowledgeClient, NotFoundError, type ReadResult, type Manifest, type ErrorCode } from 'knowledgefs';
      const kfs = new KnowledgeClient({ socketPath: '/run/knowledgefs/control.sock', timeoutMs: 5000 });
      export async function tool(path: string): Promise<string> {
        try {
          const r: ReadResult = await kfs.read(path, { offset: 0, limit: 1000 });
          const next: number | null = r.nextOffset;
          const mounted: boolean = r.mounted;
          return r.content + String(next) + String(mounted);
        } catch (err) {
          if (err instanceof NotFoundError) { const code: ErrorCode = err.code; return code; }
          throw err;
        }
      }
      export const m: Promise<Manifest> = kfs.manifest();
    `);
    writeFileSync(join(consumer, 'bad.ts'), `
      import { KnowledgeClient } from 'knowledgefs';
      export const n: number = (await new KnowledgeClient().read('x')).content;
    `);
    const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: consumer, timeoutMs: 60_000 });
    // The only error is the deliberate one in bad.ts: good.ts resolved every name and type.
    expect(r.stdout.trim().split('\n')).toEqual([expect.stringMatching(/^bad\.ts\(3,\d+\): error TS2322: Type 'string' is not assignable to type 'number'\.$/)]);
  });
});
