// docs/AGENTS.md, run as written: the TypeScript example type-checks against
// the built package and does what the page says when a harness runs it (a
// separate Node process importing 'knowledgefs'), and the CLI lines of the
// plain loop print what the page says they print. The daemon is the real
// control socket over an in-memory backend.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMemoryDaemon, type MemoryDaemon } from './helpers/memory-daemon.js';
import { BIN, REPO_ROOT, run } from './helpers/mount.js';

const DOC = readFileSync(join(REPO_ROOT, 'docs', 'AGENTS.md'), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'kfs-agents-doc-'));
let daemon: MemoryDaemon;

/** The fenced code blocks of `lang` under the heading `heading`. */
function blocks(heading: string, lang: string): string[] {
  const start = DOC.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/AGENTS.md has no "## ${heading}"`);
  const next = DOC.indexOf('\n## ', start + 4);
  const section = DOC.slice(start, next < 0 ? undefined : next);
  return [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1] ?? '');
}

beforeAll(async () => {
  daemon = await startMemoryDaemon();
  daemon.backend.files.set('team_payments/big.md', 'x'.repeat(100_005));
  daemon.backend.tree.add('team_payments/big.md');
  mkdirSync(join(dir, 'node_modules'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'harness', type: 'module', private: true }));
  symlinkSync(REPO_ROOT, join(dir, 'node_modules', 'knowledgefs'));
  symlinkSync(join(REPO_ROOT, 'node_modules', '@types'), join(dir, 'node_modules', '@types'));
});
afterAll(async () => {
  await daemon?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('docs/AGENTS.md', () => {
  it('the TypeScript library example type-checks and works as described', async () => {
    const [example] = blocks('The TypeScript library', 'ts');
    expect(example).toContain("from 'knowledgefs'");
    // What a harness would do next with the example's functions.
    const harness = `${example}
console.log(JSON.stringify({
  duty: await readKnowledge('knowledge/account/DUTY.md'),
  mountedTeam: await readKnowledge('knowledge/team_search/DUTY.md'),
  hidden: await readKnowledge('knowledge/team_storage/DUTY.md'),
  big: (await readKnowledge('knowledge/team_payments/big.md')).slice(100_000),
  manifest, sha256, reminder,
}));
`;
    writeFileSync(join(dir, 'example.ts'), harness);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, types: ['node'] }, files: ['example.ts'] }));
    const tsc = await run(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: dir, timeoutMs: 60_000 });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.code).toBe(0);

    const js = ts.transpileModule(harness, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
    writeFileSync(join(dir, 'example.mjs'), js);
    const r = await run(process.execPath, ['example.mjs'], { cwd: dir, timeoutMs: 20_000, env: { KNOWLEDGEFS_SOCKET: daemon.socketPath } });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      duty: '# Account\n',
      mountedTeam: '# Search ünïcødé 😀\n\n[team_search is now mounted: ls and grep -r see it]',
      hidden: 'knowledge/team_storage/DUTY.md: no such file',
      big: '\n[truncated: call again with offset=100000]',
      manifest: 'MANIFEST\n',
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      reminder: "Today's date is 2025-01-01.\n",
    });
  });

  it('the plain loop\'s CLI lines print what the page says', async () => {
    const [sh] = blocks('A plain loop for a custom harness', 'sh');
    const commands = (sh ?? '').split('\n').filter((l) => l.startsWith('knowledgefs ')).map((l) => l.replace(/\s+#.*$/, '').split(' ').slice(1));
    expect(commands).toEqual([['manifest', '--json'], ['reminder'], ['read', 'knowledge/team_search/DUTY.md', '--json']]);
    const out = [];
    for (const args of commands) {
      const r = await run(process.execPath, [BIN, ...args], { cwd: dir, timeoutMs: 20_000, env: { KNOWLEDGEFS_SOCKET: daemon.socketPath } });
      expect(r.code, r.stderr).toBe(0);
      out.push(r.stdout);
    }
    expect(Object.keys(JSON.parse(out[0] ?? ''))).toEqual(['ok', 'text', 'sha256']);
    expect(out[1]).toBe("Today's date is 2025-01-01.\n");
    expect(Object.keys(JSON.parse(out[2] ?? ''))).toEqual(['ok', 'path', 'content', 'sha256', 'size', 'offset', 'totalChars', 'truncated', 'nextOffset', 'mounted']);
    const hidden = await run(process.execPath, [BIN, 'read', 'knowledge/team_storage/DUTY.md', '--json'], { cwd: dir, env: { KNOWLEDGEFS_SOCKET: daemon.socketPath } });
    expect(hidden.code).toBe(1);
    expect(JSON.parse(hidden.stdout)).toEqual({ ok: false, error: { code: 'not_found', message: 'knowledge/team_storage/DUTY.md: no such file' } });
  });
});
