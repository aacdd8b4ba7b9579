// docs/AGENTS.md, run as written: the MCP configurations start a server the
// SDK's client can use; the hook commands print the manifest and the
// reminder; the TypeScript example type-checks against the built package and
// does what the page says when a harness runs it (a separate Node process
// importing 'knowledgefs'); the CLI lines of the plain loop print what the
// page says they print. `knowledgefs` is found on PATH (a shim running the
// built CLI); the documented socket path is swapped for the test daemon's, a
// real control socket over an in-memory backend.

import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMemoryDaemon, type MemoryDaemon } from './helpers/memory-daemon.js';
import { BIN, REPO_ROOT, run } from './helpers/mount.js';

const DOC = readFileSync(join(REPO_ROOT, 'docs', 'AGENTS.md'), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'kfs-agents-doc-'));
let daemon: MemoryDaemon;
const DOC_SOCKET = '/run/knowledgefs/control.sock';
const shimDir = join(dir, 'bin');
const PATH = `${shimDir}:${process.env.PATH ?? '/usr/bin:/bin'}`;
const withSocket = (text: string) => text.split(DOC_SOCKET).join(daemon.socketPath);

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
  mkdirSync(shimDir);
  writeFileSync(join(shimDir, 'knowledgefs'), `#!/bin/sh\nexec '${process.execPath}' '${BIN}' "$@"\n`);
  chmodSync(join(shimDir, 'knowledgefs'), 0o755);
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
  it('the MCP configurations start a server that serves read_knowledge', async () => {
    const [json] = blocks('MCP: `knowledgefs mcp`', 'json');
    const [toml] = blocks('MCP: `knowledgefs mcp`', 'toml');
    const server = (JSON.parse(json ?? '') as { mcpServers: Record<string, { command: string; args: string[] }> }).mcpServers.knowledgefs;
    expect(server?.args).toContain(DOC_SOCKET);
    // The TOML says the same.
    expect(toml).toContain(`command = ${JSON.stringify(server?.command)}`);
    expect(toml).toContain(`args = ${JSON.stringify(server?.args).replace(/,/g, ', ')}`);

    const transport = new StdioClientTransport({ command: server?.command ?? '', args: (server?.args ?? []).map(withSocket), env: { PATH }, stderr: 'pipe', cwd: dir });
    // As a current client connects: it probes with server/discover, and gets the revision the page names.
    const client = new Client({ name: 'docs', version: '0' }, { versionNegotiation: { mode: 'auto' } });
    await client.connect(transport);
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
      expect(DOC).toContain('It speaks MCP 2026-07-28');
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['read_knowledge']);
      const r = await client.callTool({ name: 'read_knowledge', arguments: { path: 'knowledge/account/DUTY.md' } });
      expect(r.content).toEqual([{ type: 'text', text: '# Account\n' }]);
    } finally {
      await client.close();
    }
  });

  it('the hook commands print the manifest at session start (and after compaction) and the reminder each turn', async () => {
    const [json] = blocks('Hooks: the manifest at session start, the reminder on each turn', 'json');
    type Hook = { matcher?: string; hooks: { type: string; command: string }[] };
    const { hooks } = JSON.parse(json ?? '') as { hooks: { SessionStart: Hook[]; UserPromptSubmit: Hook[] } };
    expect(hooks.SessionStart[0]?.matcher?.split('|')).toEqual(expect.arrayContaining(['startup', 'compact']));
    const runHook = async (h: Hook | undefined) => {
      const r = await run('sh', ['-c', withSocket(h?.hooks[0]?.command ?? 'false')], { cwd: dir, env: { PATH }, timeoutMs: 20_000 });
      expect(r.code, r.stderr).toBe(0);
      return r.stdout;
    };
    daemon.backend.manifestText = '# Knowledge\n\nthe manifest\n';
    expect(await runHook(hooks.SessionStart[0])).toBe('# Knowledge\n\nthe manifest\n');
    daemon.backend.pendingChanged = ['team_payments/DUTY.md'];
    expect(await runHook(hooks.UserPromptSubmit[0])).toBe("Today's date is 2025-01-01.\nChanged since you read them: team_payments/DUTY.md\n");
    expect(await runHook(hooks.UserPromptSubmit[0])).toBe("Today's date is 2025-01-01.\n");
    daemon.backend.manifestText = 'MANIFEST\n';
  });

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
    const tsc = await run(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: dir, timeoutMs: 150_000 });
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
  }, 180_000);

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
