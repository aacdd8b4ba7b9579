// The read tool's path resolution: every form ls/find print resolves to the
// same scope path; anything escaping the mount, the mount root, scope
// directories and directory-looking paths are refused with a clear error.

import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { KnowledgeError } from '../src/core/errors.js';
import { noSuchFileMessage, resolveKnowledgePath } from '../src/core/local/knowledge-path.js';

const MNT = '/runner/knowledge';

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof KnowledgeError) return err.code;
    throw err;
  }
  return 'ok';
}

describe('resolveKnowledgePath', () => {
  it('resolves knowledge/… relative to the mount\'s parent, wherever cwd is', () => {
    for (const cwd of ['/runner', '/', '/home/agent', '/runner/knowledge/team_x']) {
      expect(resolveKnowledgePath('knowledge/team_x/a/b.md', cwd, MNT)).toEqual({
        scopePath: 'team_x/a/b.md',
        display: 'knowledge/team_x/a/b.md',
      });
    }
  });

  it('resolves absolute paths under the mount point', () => {
    expect(resolveKnowledgePath('/runner/knowledge/account/DUTY.md', '/tmp', MNT).scopePath).toBe('account/DUTY.md');
    expect(resolveKnowledgePath('//runner//knowledge/./account/x/../DUTY.md', '/tmp', MNT).scopePath).toBe('account/DUTY.md');
  });

  it('resolves paths relative to cwd', () => {
    expect(resolveKnowledgePath('DUTY.md', '/runner/knowledge/team_search', MNT).scopePath).toBe('team_search/DUTY.md');
    expect(resolveKnowledgePath('./runbooks/x.md', '/runner/knowledge/team_search', MNT).scopePath).toBe('team_search/runbooks/x.md');
    expect(resolveKnowledgePath('../team_a/x.md', '/runner/knowledge/team_b', MNT).scopePath).toBe('team_a/x.md');
    expect(resolveKnowledgePath('team_a/x.md', '/runner/knowledge', MNT).scopePath).toBe('team_a/x.md');
    expect(resolveKnowledgePath('./knowledge/team_a/x.md', '/runner', MNT).scopePath).toBe('team_a/x.md');
  });

  it('uses the mount\'s own basename when it is not "knowledge"', () => {
    const mnt = '/tmp/t1/kmnt';
    expect(resolveKnowledgePath('kmnt/team_a/x.md', '/elsewhere', mnt)).toEqual({ scopePath: 'team_a/x.md', display: 'kmnt/team_a/x.md' });
    expect(resolveKnowledgePath('knowledge/team_a/x.md', '/elsewhere', mnt).scopePath).toBe('team_a/x.md');
    expect(resolveKnowledgePath('/tmp/t1/kmnt/account/DUTY.md', '/', `${mnt}/`).scopePath).toBe('account/DUTY.md');
  });

  it('normalises .. lexically inside the mount', () => {
    expect(resolveKnowledgePath('knowledge/team_a/../team_b/x.md', '/', MNT).scopePath).toBe('team_b/x.md');
    // A name that looks like a symlink is just a name; `..` after it is lexical.
    expect(resolveKnowledgePath('knowledge/team_a/link -> ../b/../c.md', '/', MNT).scopePath).toBe('team_a/link -> ../c.md');
    expect(resolveKnowledgePath('knowledge/team_a/link/../../team_b/c.md', '/', MNT).scopePath).toBe('team_b/c.md');
    expect(code(() => resolveKnowledgePath('knowledge/team_a/link/../../../etc/passwd', '/', MNT))).toBe('invalid_argument');
    expect(resolveKnowledgePath('knowledge/team_a/link@', '/', MNT).scopePath).toBe('team_a/link@');
  });

  it('rejects anything that escapes the mount', () => {
    for (const p of [
      'knowledge/../etc/passwd',
      'knowledge/team_a/../../etc/passwd',
      'knowledge/team_a/../../../../../etc/shadow',
      '/etc/passwd',
      '/runner/knowledge-other/team_a/x.md',
      '/runner/knowledgeX/team_a/x.md',
      '/runner',
      '../../etc/passwd',
    ]) {
      expect(code(() => resolveKnowledgePath(p, '/runner/knowledge/team_a', MNT)), p).toBe('invalid_argument');
    }
    // cwd outside the mount and a plain relative path: outside too.
    expect(code(() => resolveKnowledgePath('team_a/x.md', '/home/agent', MNT))).toBe('invalid_argument');
  });

  it('refuses the mount root and scope directories with a clear message', () => {
    expect(() => resolveKnowledgePath('knowledge', '/', MNT)).toThrow(/directory itself, not a file/);
    expect(() => resolveKnowledgePath('knowledge/', '/', MNT)).toThrow(/directory itself, not a file/);
    expect(() => resolveKnowledgePath('/runner/knowledge/', '/', MNT)).toThrow(/directory itself/);
    expect(() => resolveKnowledgePath('knowledge/team_a', '/', MNT)).toThrow(/scope directory, not a file; its entry file is knowledge\/team_a\/DUTY.md/);
    expect(() => resolveKnowledgePath('knowledge/team_a/', '/', MNT)).toThrow(/scope directory/);
    expect(() => resolveKnowledgePath('.', '/runner/knowledge/account', MNT)).toThrow(/scope directory/);
  });

  it('refuses trailing slashes on files', () => {
    expect(() => resolveKnowledgePath('knowledge/team_a/runbooks/', '/', MNT)).toThrow(/ends with "\/"/);
    expect(() => resolveKnowledgePath('knowledge/team_a/x.md//', '/', MNT)).toThrow(/ends with "\/"/);
  });

  it('treats a top-level name that is not a scope as a missing file, echoing only the typed path', () => {
    expect(() => resolveKnowledgePath('knowledge/secrets/x.md', '/', MNT)).toThrow(new KnowledgeError('not_found', noSuchFileMessage('knowledge/secrets/x.md')));
    expect(code(() => resolveKnowledgePath('knowledge/team_/x.md', '/', MNT))).toBe('not_found');
    expect(code(() => resolveKnowledgePath('knowledge/Team_A/x.md', '/', MNT))).toBe('not_found');
  });

  it('rejects bad segments and empty input', () => {
    expect(code(() => resolveKnowledgePath('', '/', MNT))).toBe('invalid_argument');
    expect(code(() => resolveKnowledgePath('knowledge/team_a/a\\b.md', '/', MNT))).toBe('invalid_argument');
    expect(code(() => resolveKnowledgePath('knowledge/team_a/a\u0001b.md', '/', MNT))).toBe('invalid_argument');
    expect(code(() => resolveKnowledgePath('knowledge/team_a/a\0b.md', '/', MNT))).toBe('invalid_argument');
    expect(code(() => resolveKnowledgePath('knowledge/team_a/\ud800.md', '/', MNT))).toBe('invalid_argument');
    expect(code(() => resolveKnowledgePath(`knowledge/team_a/${'x'.repeat(300)}`, '/', MNT))).toBe('invalid_argument');
    expect(code(() => resolveKnowledgePath('x.md', 'relative/cwd', MNT))).toBe('invalid_argument');
  });

  it('property: whatever is typed, a result is always inside the mount and made of valid segments', () => {
    const seg = fc.constantFrom('knowledge', 'team_a', 'account', '..', '.', '', 'x.md', 'runner', 'etc', 'a b', 'kmnt');
    fc.assert(
      fc.property(fc.array(seg, { maxLength: 8 }), fc.boolean(), fc.array(seg, { maxLength: 4 }), (segs, absolute, cwdSegs) => {
        const input = (absolute ? '/' : '') + segs.join('/');
        const cwd = `/${cwdSegs.join('/')}`;
        let res;
        try {
          res = resolveKnowledgePath(input, cwd, MNT);
        } catch (err) {
          expect(err).toBeInstanceOf(KnowledgeError);
          return;
        }
        const parts = res.scopePath.split('/');
        expect(parts.length).toBeGreaterThanOrEqual(2);
        expect(parts).not.toContain('..');
        expect(parts).not.toContain('.');
        expect(parts).not.toContain('');
        expect(['account', 'team_a']).toContain(parts[0]);
        expect(res.display).toBe(`knowledge/${res.scopePath}`);
      }),
      { numRuns: 2000 },
    );
  });
});
