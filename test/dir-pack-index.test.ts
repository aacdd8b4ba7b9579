// dir-pack-index: which of the directories a watch reported a rescan walks
// (the outermost ones only) and where a scope's pack lives in the data dir.

import { describe, expect, it } from 'vitest';
import { indexOf, outermost, scopeDir, SYNC_HASH_BYTES, utf8 } from '../src/store/data-dir/dir-pack-index.js';

describe('outermost', () => {
  it('drops directories inside another of them and duplicates, sorted', () => {
    expect(outermost(['b/c', 'a', 'a/x/y', 'b/c/d', 'b/cd', 'a'])).toEqual(['a', 'b/c', 'b/cd']);
    expect(outermost(['ab', 'a'])).toEqual(['a', 'ab']);
    expect(outermost([])).toEqual([]);
  });

  it("'' is the whole pack and contains all", () => {
    expect(outermost(['x/y', '', 'z'])).toEqual(['']);
  });
});

describe('scopeDir', () => {
  it('account/ for the account, teams/<id>/ for a team, null for what is not a scope', () => {
    expect(scopeDir('/data', 'account')).toBe('/data/account');
    expect(scopeDir('/data', 'team_payments')).toBe('/data/teams/payments');
    expect(scopeDir('/data', 'payments')).toBeNull();
  });
});

describe('utf8', () => {
  it('refuses bytes that are not UTF-8 instead of replacing them', () => {
    expect(utf8.decode(Buffer.from('héllo'))).toBe('héllo');
    expect(() => utf8.decode(Buffer.from([0x68, 0xff, 0x69]))).toThrow(TypeError);
  });
});

describe('indexOf', () => {
  it('a snapshot of the files, and each entry by its path', () => {
    const a = { file: { path: 'account/a.md', sha256: 'a'.repeat(64), size: 1, mtimeMs: 0 }, fp: null };
    const b = { file: { path: 'account/b.md', sha256: 'b'.repeat(64), size: 2, mtimeMs: 0 }, fp: { ino: 1, size: 2, mtimeMs: 3, ctimeMs: 4 } };
    const index = indexOf('account', [b, a]);
    expect(index.byPath.get('account/a.md')).toBe(a);
    expect(index.byPath.get('account/b.md')).toBe(b);
    expect(index.byPath.size).toBe(2);
    expect(index.snapshot.scope).toBe('account');
    expect(SYNC_HASH_BYTES).toBe(256 * 1024);
  });
});
