// session-record: what both session states do with a record: tokens (kfs_ +
// 32 random bytes base64url, only the sha256 kept, compared in constant
// time), a fresh record, and a read applied to the read set and mounts.

import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_READ_SET, TOKEN_PREFIX, applyRead, hashToken, holdsToken, newSession, newToken } from '../src/server/state/session-record.js';
import type { SessionRecord } from '../src/server/state/session-state.js';

describe('tokens', () => {
  it('are kfs_ and 32 random bytes in base64url, each new', () => {
    const a = newToken();
    expect(TOKEN_PREFIX).toBe('kfs_');
    expect(a).toMatch(/^kfs_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(a.slice(4), 'base64url')).toHaveLength(32);
    expect(newToken()).not.toBe(a);
  });

  it('are kept as their sha256 in hex, of the UTF-8 text', () => {
    expect(hashToken('kfs_é')).toBe(createHash('sha256').update(Buffer.from('kfs_é', 'utf8')).digest('hex'));
  });

  it('holdsToken: the same hash only; a different or shorter one is not', () => {
    const { record, token } = newSession({ kind: 'personal', creator: 'alice' }, '2026-01-01T00:00:00.000Z');
    expect(holdsToken(record, hashToken(token))).toBe(true);
    expect(holdsToken(record, hashToken(`${token}x`))).toBe(false);
    expect(holdsToken(record, hashToken(token).slice(0, 62))).toBe(false);
    expect(holdsToken(record, '')).toBe(false);
  });
});

describe('newSession', () => {
  it('a fresh record: random id, the token hash, not revoked, nothing mounted or read', () => {
    const { record, token } = newSession({ kind: 'team', creator: 'bob', team: 'payments' }, '2026-01-02T03:04:05.000Z');
    expect(record).toEqual({
      id: expect.stringMatching(/^ses_[0-9a-f]{24}$/),
      kind: 'team',
      creator: 'bob',
      team: 'payments',
      tokenHash: hashToken(token),
      revoked: false,
      mounted: [],
      readSet: [],
      createdAt: '2026-01-02T03:04:05.000Z',
    });
    expect(newSession({ kind: 'team', creator: 'bob', team: 'payments' }, '').record.id).not.toBe(record.id);
  });

  it('without a team has no team key at all', () => {
    const { record } = newSession({ kind: 'personal', creator: 'alice' }, '2026-01-01T00:00:00.000Z');
    expect('team' in record).toBe(false);
  });
});

describe('applyRead', () => {
  const fresh = (): SessionRecord => newSession({ kind: 'personal', creator: 'alice' }, '').record;

  it('adds the read, replaces an older read of the same path at the end, mounts a team once', () => {
    const r = fresh();
    applyRead(r, { path: 'account/a.md', sha256: '1' }, undefined);
    applyRead(r, { path: 'team_x/b.md', sha256: '2' }, 'x');
    expect(r.mounted).toEqual(['x']);
    applyRead(r, { path: 'account/a.md', sha256: '3' }, 'x');
    applyRead(r, { path: 'team_y/c.md', sha256: '4' }, 'y');
    expect(r.mounted).toEqual(['x', 'y']);
    expect(r.readSet).toEqual([
      { path: 'team_x/b.md', sha256: '2' },
      { path: 'account/a.md', sha256: '3' },
      { path: 'team_y/c.md', sha256: '4' },
    ]);
  });

  it('keeps the newest MAX_READ_SET reads, forgetting the oldest', () => {
    const r = fresh();
    r.readSet = Array.from({ length: MAX_READ_SET }, (_, i) => ({ path: `account/${i}.md`, sha256: 'a' }));
    applyRead(r, { path: 'account/new.md', sha256: 'b' }, undefined);
    expect(MAX_READ_SET).toBe(10_000);
    expect(r.readSet).toHaveLength(MAX_READ_SET);
    expect(r.readSet[0]?.path).toBe('account/1.md');
    expect(r.readSet.at(-1)).toEqual({ path: 'account/new.md', sha256: 'b' });
    const under = fresh();
    under.readSet = Array.from({ length: MAX_READ_SET - 1 }, (_, i) => ({ path: `account/${i}.md`, sha256: 'a' }));
    applyRead(under, { path: 'account/new.md', sha256: 'b' }, undefined);
    expect(under.readSet).toHaveLength(MAX_READ_SET);
    expect(under.readSet[0]?.path).toBe('account/0.md');
  });
});
