// The manifest builder: guidance, advertised scopes, the mount section,
// determinism, and the DUTY.md cap on a character boundary.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DUTY_CAP_BYTES, buildManifest, truncateUtf8 } from '../src/core/session/manifest.js';

const base = {
  scopes: [
    { scope: 'account', duty: '# Account\nShared runbooks.\n' },
    { scope: 'team_payments', duty: '# Payments\nCards and payouts.' },
  ],
  mounted: [] as { scope: string; duty: string | null }[],
};

describe('buildManifest', () => {
  it('carries the guidance, each advertised scope with its DUTY.md body, and an empty mount section', () => {
    const { text, sha256 } = buildManifest(base);
    expect(sha256).toBe(createHash('sha256').update(text).digest('hex'));
    expect(text).toContain('`knowledge/account/`');
    expect(text).toContain('DUTY.md');
    expect(text).toMatch(/`ls`, `find`, `grep -r`, `cat`/);
    expect(text).toContain('knowledgefs read knowledge/team_<id>/');
    expect(text).toMatch(/Other teams are not listed/);
    expect(text).toContain('### account (`knowledge/account/`)');
    expect(text).toContain('# Account\nShared runbooks.\n');
    expect(text).toContain('# Payments\nCards and payouts.\n>>> end of knowledge/team_payments/DUTY.md');
    expect(text.indexOf('### account')).toBeLessThan(text.indexOf('### team_payments'));
    expect(text).toMatch(/## Mounted teams[\s\S]*None yet\.\n$/);
  });

  it('is these bytes exactly: the prefix a prompt cache keys on changes only when the code means it to', () => {
    // A change to test/golden/manifest.txt is a change to every agent's prompt: review it as one.
    const m = buildManifest({
      scopes: [
        { scope: 'account', duty: '# Account\nShared runbooks.\n' },
        { scope: 'team_payments', duty: '# Payments\nCards and payouts.' },
        { scope: 'account', duty: 'listed twice' },
      ],
      mounted: [
        { scope: 'team_search', duty: '' },
        { scope: 'team_payments', duty: 'mounted and bound' },
        { scope: 'team_storage', duty: null },
      ],
    });
    expect(m.text).toBe(readFileSync(new URL('golden/manifest.txt', import.meta.url), 'utf8'));
    expect(m.sha256).toBe(createHash('sha256').update(Buffer.from(m.text, 'utf8')).digest('hex'));
  });

  it('is deterministic and has no dates or absolute paths', () => {
    const a = buildManifest(base);
    const b = buildManifest(structuredClone(base));
    expect(a).toEqual(b);
    expect(a.text).not.toMatch(/\d{4}-\d{2}-\d{2}/);
    expect(a.text).not.toMatch(/(^|[\s(`])\/[a-z]/m);
  });

  it('appends mounted teams in mount order, after the advertised scopes', () => {
    const one = buildManifest({ ...base, mounted: [{ scope: 'team_search', duty: '# Search\n' }, { scope: 'team_storage', duty: '# Storage\n' }] });
    const mountAt = one.text.indexOf('## Mounted teams');
    expect(one.text.indexOf('### team_search')).toBeGreaterThan(mountAt);
    expect(one.text.indexOf('### team_search')).toBeLessThan(one.text.indexOf('### team_storage'));
    expect(one.text).not.toContain('None yet.');
    const swapped = buildManifest({ ...base, mounted: [{ scope: 'team_storage', duty: '# Storage\n' }, { scope: 'team_search', duty: '# Search\n' }] });
    expect(swapped.text).not.toBe(one.text);
    // The advertised part is a byte-identical prefix: mounting only appends.
    const prefix = buildManifest(base).text.slice(0, buildManifest(base).text.indexOf('## Mounted teams'));
    expect(one.text.startsWith(prefix)).toBe(true);
  });

  it('lists a scope once even if it is both bound and mounted, and handles a missing DUTY.md', () => {
    const m = buildManifest({ scopes: [{ scope: 'account', duty: null }], mounted: [{ scope: 'account', duty: 'x' }, { scope: 'team_a', duty: null }, { scope: 'team_a', duty: null }] });
    expect(m.text.split('### account').length).toBe(2);
    expect(m.text.split('### team_a').length).toBe(2);
    expect(m.text).toContain('This scope has no `DUTY.md`');
  });

  it('caps a long DUTY.md at 32 KiB and points at the full file', () => {
    const duty = 'é'.repeat(DUTY_CAP_BYTES); // 64 KiB of UTF-8
    const { text } = buildManifest({ scopes: [{ scope: 'team_big', duty }], mounted: [] });
    const body = text.slice(text.indexOf('<<< knowledge/team_big/DUTY.md\n') + '<<< knowledge/team_big/DUTY.md\n'.length, text.indexOf('\n\n[knowledge/team_big/DUTY.md'));
    expect(Buffer.byteLength(body)).toBe(DUTY_CAP_BYTES);
    expect(body).toBe('é'.repeat(DUTY_CAP_BYTES / 2));
    expect(text).toContain('read the full file at knowledge/team_big/DUTY.md');
    // Exactly at the cap: nothing is cut.
    const exact = buildManifest({ scopes: [{ scope: 'team_big', duty: 'a'.repeat(DUTY_CAP_BYTES) }], mounted: [] });
    expect(exact.text).not.toContain('read the full file');
  });
});

describe('truncateUtf8', () => {
  it('never splits a multi-byte character or a surrogate pair', () => {
    for (const ch of ['a', 'é', '€', '😀']) {
      for (let cap = 0; cap < 12; cap++) {
        const { text, truncated } = truncateUtf8(ch.repeat(5), cap);
        expect(Buffer.byteLength(text)).toBeLessThanOrEqual(cap);
        expect(text.isWellFormed()).toBe(true);
        // As many whole characters as fit: never fewer.
        expect(text).toBe(ch.repeat(Math.min(5, Math.floor(cap / Buffer.byteLength(ch)))));
        expect(truncated).toBe(Buffer.byteLength(ch) * 5 > cap);
      }
    }
  });

  it('repairs lone surrogates so the result is valid UTF-8', () => {
    expect(truncateUtf8('a\ud800b', 10).text).toBe('a\ufffdb');
  });
});
