// searchDir (the MCP server's search_knowledge) over plain directories:
// matches found across the chunks a file streams in, however long the line;
// what a line shows; and the answer's total cap. Its memory on a 40 MiB
// single-line file, in the real MCP process, is in mcp-server.test.ts.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FS_OUTPUT_CAP, searchDir, type MountDir } from '../src/mcp/fs-tools.js';

const root = mkdtempSync(join(tmpdir(), 'kfs-fs-tools-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
/** A fresh directory holding `files`, as searchDir sees a mount's directory. */
function tree(files: Record<string, string | Buffer>): MountDir {
  const abs = join(root, `t${++n}`);
  for (const [p, body] of Object.entries(files)) {
    mkdirSync(join(abs, p, '..'), { recursive: true });
    writeFileSync(join(abs, p), body);
  }
  return { abs, display: 'knowledge' };
}

const search = (dir: MountDir, pattern: string, more: { ignoreCase?: boolean; maxResults?: number } = {}) =>
  searchDir(dir, { pattern, ignoreCase: more.ignoreCase ?? false, maxResults: more.maxResults ?? 100 });

describe('search_knowledge streams files', () => {
  it('finds a match that straddles two chunks, in a multi-byte line, with the right line numbers', async () => {
    const chunk = 64 * 1024;
    // Line 2 is over 3 chunks long; the needle starts 3 bytes before the first chunk boundary, after 'é's (2 bytes each).
    const filler = 'é'.repeat((chunk - 'first\nxyz'.length - 3) / 2);
    const line2 = `${filler}xyzNEEDLE-ÜBER${'z'.repeat(3 * chunk)}`;
    const dir = tree({ 'a.md': Buffer.from(`first\n${line2}\nthird Needle-über\n`) });
    expect(Buffer.byteLength(`first\n${filler}xyzNEE`)).toBe(chunk);
    expect(await search(dir, 'NEEDLE-ÜBER')).toBe(`knowledge/a.md:2:${line2.slice(0, 400)}…`);
    expect(await search(dir, 'needle-über', { ignoreCase: true })).toBe(
      `knowledge/a.md:2:${line2.slice(0, 400)}…\nknowledge/a.md:3:third Needle-über`,
    );
    expect(await search(dir, 'NEEDLE-ÜBERz')).toBe(`knowledge/a.md:2:${line2.slice(0, 400)}…`);
    expect(await search(dir, 'nowhere')).toBe('no line under knowledge contains "nowhere"');
  });

  it('shows 400 characters of a line, never half a surrogate pair; a line of exactly 400 is whole', async () => {
    const astral = '𝄞'.repeat(500);
    const exact = `${'b'.repeat(399)}X`;
    const dir = tree({ 'a.md': `${astral} X\n${exact}\nno newline at the end X` });
    expect((await search(dir, 'X')).split('\n')).toEqual([
      `knowledge/a.md:1:${'𝄞'.repeat(400)}…`,
      `knowledge/a.md:2:${exact}`,
      'knowledge/a.md:3:no newline at the end X',
    ]);
  });

  it('cuts the answer at the output cap with a note', async () => {
    // 1000 matching lines of 450 characters: about 420 000 characters of matches against the 100 000 cap.
    const lines = Array.from({ length: 1000 }, (_, i) => `match ${String(i).padStart(4, '0')} ${'w'.repeat(440)}`);
    const dir = tree({ 'a.md': `${lines.join('\n')}\n` });
    const got = await search(dir, 'match', { maxResults: 1000 });
    expect(got.length).toBeLessThanOrEqual(FS_OUTPUT_CAP + 60);
    expect(got).toMatch(/\n\[output cut at \d+ characters: narrow the path\]$/);
    expect(got.startsWith(`knowledge/a.md:1:${lines[0]?.slice(0, 400)}…\nknowledge/a.md:2:`)).toBe(true);
  });
});
