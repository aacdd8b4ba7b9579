// searchDir (the MCP server's search_knowledge) over plain directories:
// matches found across the chunks a file streams in, however long the line;
// what a line shows; and the answer's total cap. Its memory on a 40 MiB
// single-line file, in the real MCP process, is in mcp-server.test.ts.

import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../src/client/errors.js';
import { FS_OUTPUT_CAP, listDir, resolveMountDir, searchDir, type MountDir } from '../src/mcp/fs-tools.js';

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
    expect(got).toBe(`${got.slice(0, FS_OUTPUT_CAP)}\n[output cut at ${FS_OUTPUT_CAP} characters: narrow the path]`);
    expect(got.startsWith(`knowledge/a.md:1:${lines[0]?.slice(0, 400)}…\nknowledge/a.md:2:`)).toBe(true);
  });
});

describe('list_knowledge and search_knowledge on awkward trees', () => {
  it('resolves what the agent typed inside the mount, and refuses NUL or a path outside', () => {
    const mount = '/runner/knowledge';
    expect(resolveMountDir('knowledge', '/runner', mount)).toEqual({ abs: mount, display: 'knowledge' });
    expect(resolveMountDir('knowledge/account/x', '/runner', mount)).toEqual({ abs: `${mount}/account/x`, display: 'knowledge/account/x' });
    expect(resolveMountDir('x', `${mount}/account`, mount)).toEqual({ abs: `${mount}/account/x`, display: 'knowledge/account/x' });
    expect(() => resolveMountDir('knowledge/a\0b', '/runner', mount)).toThrow(new InvalidArgumentError('"knowledge/a\\u0000b": NUL character in path'));
    expect(() => resolveMountDir('/etc', '/runner', mount)).toThrow(new InvalidArgumentError(`/etc: outside knowledge/ (the mount at ${mount}); give a path as ls prints it, e.g. knowledge/account`));
  });

  it('sorts entries and matches by name whatever order the directory gives them in', async () => {
    const dir = tree({ 'c.md': 'x\n', 'a.md': 'x\n', 'b/z.md': 'x\n', 'B.md': 'x\n' });
    expect(await listDir(dir, 10)).toBe('knowledge/B.md\nknowledge/a.md\nknowledge/b/\nknowledge/c.md');
    expect(await search(dir, 'x')).toBe('knowledge/B.md:1:x\nknowledge/a.md:1:x\nknowledge/b/z.md:1:x\nknowledge/c.md:1:x');
  });

  it('stops at the match limit across files', async () => {
    const dir = tree({ 'a.md': 'hit\n', 'b.md': 'hit\nhit\n', 'c.md': 'hit\n' });
    expect(await search(dir, 'hit', { maxResults: 2 })).toBe('knowledge/a.md:1:hit\nknowledge/b.md:1:hit\n[stopped at 2 matches: narrow the path or the pattern, or raise max_results]');
    expect(await search(dir, 'hit', { maxResults: 4 })).toBe('knowledge/a.md:1:hit\nknowledge/b.md:1:hit\nknowledge/b.md:2:hit\nknowledge/c.md:1:hit');
  });

  it('counts what it could not read and goes on, as grep does', async () => {
    const dir = tree({ 'a.md': 'hit\n' });
    symlinkSync(join(dir.abs, 'gone'), join(dir.abs, 'dangling.md'));
    symlinkSync('loop', join(dir.abs, 'loop'));
    expect(await search(dir, 'hit')).toBe('knowledge/a.md:1:hit\n[2 files or directories could not be read]');
    expect(await search(dir, 'nowhere')).toBe('no line under knowledge contains "nowhere"\n[2 files or directories could not be read]');
  });

  it('says what is missing or not a directory, and passes other failures on', async () => {
    const dir = tree({ 'a.md': 'x\n' });
    await expect(listDir({ abs: join(dir.abs, 'nope'), display: 'knowledge/nope' }, 10)).rejects.toThrow(new InvalidArgumentError('knowledge/nope: no such file or directory'));
    await expect(listDir({ abs: join(dir.abs, 'a.md'), display: 'knowledge/a.md' }, 10)).rejects.toThrow(new InvalidArgumentError('knowledge/a.md: not a directory'));
    symlinkSync('loop', join(dir.abs, 'loop'));
    await expect(listDir({ abs: join(dir.abs, 'loop'), display: 'knowledge/loop' }, 10)).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(searchDir({ abs: join(dir.abs, 'loop'), display: 'knowledge/loop' }, { pattern: 'x', ignoreCase: false, maxResults: 1 })).rejects.toMatchObject({ code: 'ELOOP' });
  });

  it('takes an answer of exactly the cap whole, and cuts one character more', async () => {
    // Lines of `knowledge/<name>`, the names sized so that the listing is FS_OUTPUT_CAP characters exactly.
    const count = 384;
    const names = (extra: number) => Array.from({ length: count }, (_, i) => `${String(i).padStart(4, '0')}${'n'.repeat(i === 0 ? 23 + extra : 246)}`);
    for (const extra of [0, 1]) {
      const listing = names(extra).map((name) => `knowledge/${name}`).join('\n');
      expect(listing.length).toBe(FS_OUTPUT_CAP + extra);
      const dir = tree(Object.fromEntries(names(extra).map((name) => [name, ''])));
      expect(await listDir(dir, count)).toBe(extra === 0 ? listing : `${listing.slice(0, FS_OUTPUT_CAP)}\n[output cut at ${FS_OUTPUT_CAP} characters: narrow the path]`);
    }
  });

  it('lists exactly max_entries entries with no note, and says how many more there are past it', async () => {
    const dir = tree({ 'a.md': '', 'b.md': '', 'c.md': '' });
    expect(await listDir(dir, 3)).toBe('knowledge/a.md\nknowledge/b.md\nknowledge/c.md');
    expect(await listDir(dir, 2)).toBe('knowledge/a.md\nknowledge/b.md\n[1 more entries not shown: list a subdirectory, or raise max_entries]');
  });

  it('counts an empty first line, and a line that starts a chunk', async () => {
    const dir = tree({ 'a.md': '\nhit\n', 'b.md': `${'x'.repeat(64 * 1024 - 1)}\n\nhit\n` });
    expect(await search(dir, 'hit')).toBe('knowledge/a.md:2:hit\nknowledge/b.md:3:hit');
  });

  it('opens nothing more once the match limit is reached', async () => {
    const dir = tree({ 'a.md': 'hit\nhit\n', 'b/c.md': 'hit\n' });
    symlinkSync(join(dir.abs, 'gone'), join(dir.abs, 'z.md'));
    expect(await search(dir, 'hit', { maxResults: 1 })).toBe('knowledge/a.md:1:hit\n[stopped at 1 matches: narrow the path or the pattern, or raise max_results]');
  });

  it('cuts a long answer before a low surrogate, never between the two halves of a character', async () => {
    // Names of 60 astral characters: find a prefix length that puts the cap inside a pair.
    const name = (i: number, p: number) => `${String(i).padStart(4, '0')}${i === 0 ? 'a'.repeat(p) : ''}${'𝄞'.repeat(60)}`;
    const count = 900;
    const text = (p: number) => Array.from({ length: count }, (_, i) => `knowledge/${name(i, p)}`).join('\n');
    let pad = 0;
    while ((text(pad).charCodeAt(FS_OUTPUT_CAP) & 0xfc00) !== 0xdc00) pad++;
    const files: Record<string, string> = {};
    for (let i = 0; i < count; i++) files[name(i, pad)] = '';
    const dir = tree(files);
    const full = text(pad);
    expect(await listDir(dir, count)).toBe(`${full.slice(0, FS_OUTPUT_CAP - 1)}\n[output cut at ${FS_OUTPUT_CAP - 1} characters: narrow the path]`);
  });
});
