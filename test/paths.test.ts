import { describe, expect, it } from 'vitest';
import { assertPackPath, packPathProblem, splitScopePath } from '../src/core/paths.js';

describe('packPathProblem', () => {
  it.each(['DUTY.md', 'runbooks/db-failover.md', 'a/b/c/d.txt', 'café/naïve.md', '.hidden/notes.md'])(
    'accepts %j',
    (path) => {
      expect(packPathProblem(path)).toBeNull();
    },
  );

  it.each([
    ['', 'empty path'],
    ['/etc/passwd', 'absolute path'],
    ['../secrets', '".." segment'],
    ['a/../../b', '".." segment'],
    ['a/./b', '"." segment'],
    ['a//b', 'empty path segment'],
    ['a/', 'empty path segment'],
    ['a\\..\\b', 'backslash in name'],
    ['a\u0000b', 'control character in name'],
    ['line\nbreak', 'control character in name'],
    ['bad\ud800half', 'name is not valid UTF-8'],
    ['x'.repeat(256), 'name longer than 255 bytes'],
    [`${'é'.repeat(128)}`, 'name longer than 255 bytes'],
    [Array.from({ length: 20 }, () => 'y'.repeat(250)).join('/'), 'path longer than 4096 bytes'],
  ])('rejects %j: %s', (path, problem) => {
    expect(packPathProblem(path)).toBe(problem);
    expect(() => assertPackPath(path)).toThrow(`invalid path: ${problem}`);
  });
});

describe('splitScopePath', () => {
  it('splits at the first slash', () => {
    expect(splitScopePath('team_search/runbooks/a.md')).toEqual({ scope: 'team_search', rest: 'runbooks/a.md' });
    expect(splitScopePath('account')).toEqual({ scope: 'account', rest: '' });
  });
});
