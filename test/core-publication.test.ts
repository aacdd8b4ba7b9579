// The publication format (src/core/publication.ts) on its own: object keys,
// the pointer and index documents written and read back, and every way a
// malformed pointer or index is refused whole, each with the key and the
// reason. The store reading them from a bucket is tested in store-*.test.ts.

import { describe, expect, it } from 'vitest';
import {
  blobKey,
  directoryKey,
  historyKey,
  indexKey,
  parseIndex,
  parsePointer,
  pointerFor,
  pointerKeys,
  POINTER_KEY,
  PublicationError,
  samePublication,
  serializeIndex,
  serializePointer,
} from '../src/core/publication.js';
import { snapshotScope } from '../src/core/session/plan.js';
import { sha256Hex } from '../src/core/sha256.js';

const h = (s: string) => sha256Hex(s);
const D = h('directory');

function refusal(fn: () => unknown): PublicationError {
  try {
    fn();
  } catch (err) {
    if (err instanceof PublicationError) return err;
    throw err;
  }
  throw new Error('expected a PublicationError');
}

describe('publication keys', () => {
  it('names blobs, indexes, directories, history copies and what a pointer keeps', () => {
    expect(blobKey('ab')).toBe('blobs/ab');
    expect(indexKey('team_x', 'v1')).toBe('indexes/team_x/v1.json');
    expect(directoryKey('cd')).toBe('directories/cd.json');
    const p = pointerFor(D, [{ scope: 'team_b', version: h('b') }, { scope: 'account', version: h('a') }], '2026-12-01T10:20:30.123Z');
    expect(historyKey(p)).toBe(`publications/20261201T102030.123Z-${sha256Hex(serializePointer(p))}.json`);
    expect(pointerKeys(p)).toEqual([`directories/${D}.json`, `indexes/account/${h('a')}.json`, `indexes/team_b/${h('b')}.json`]);
  });
});

describe('the pointer', () => {
  const p = pointerFor(D, [{ scope: 'team_b', version: h('b') }, { scope: 'account', version: h('a') }, { scope: 'team_a', version: h('c') }], '2026-12-01T00:00:00Z');

  it('lists scopes account first, and reads back as written', () => {
    expect(p).toEqual({ format: 1, publishedAt: '2026-12-01T00:00:00Z', directory: D, scopes: { account: h('a'), team_a: h('c'), team_b: h('b') } });
    expect(Object.keys(p.scopes)).toEqual(['account', 'team_a', 'team_b']);
    const bytes = serializePointer(p);
    expect(bytes.toString('utf8')).toBe(`${JSON.stringify(p, null, 2)}\n`);
    expect(parsePointer(bytes)).toEqual(p);
  });

  it('is the same publication whatever its time, and not with another directory or scope set', () => {
    expect(samePublication(p, { ...p, publishedAt: 'later' })).toBe(true);
    expect(samePublication(p, { ...p, directory: h('other') })).toBe(false);
    expect(samePublication(p, { ...p, scopes: { ...p.scopes, team_b: h('x') } })).toBe(false);
    expect(samePublication(p, { ...p, scopes: { ...p.scopes, team_c: h('x') } })).toBe(false);
    const { team_b: _b, ...fewer } = p.scopes;
    expect(samePublication(p, { ...p, scopes: fewer })).toBe(false);
    expect(samePublication({ ...p, scopes: fewer }, p)).toBe(false);
  });

  it('refuses a malformed pointer whole, naming the key and the reason', () => {
    const bad = (doc: unknown, key?: string) => {
      const e = refusal(() => parsePointer(Buffer.from(typeof doc === 'string' ? doc : JSON.stringify(doc)), key));
      expect(e.code).toBe('unavailable');
      expect(e.name).toBe('PublicationError');
      return e;
    };
    const good = JSON.parse(serializePointer(p).toString('utf8')) as Record<string, unknown>;
    expect(bad('{"format":').message).toMatch(/^current\.json: not valid JSON \(.+\)$/);
    expect(bad('\u0001\u00ff{', 'x.json').message).toMatch(/^x\.json: not valid JSON \([\x20-\x7e]+\)$/);
    expect(bad('{', 'k').key).toBe('k');
    expect(bad([1]).message).toBe('current.json: expected an object with "format", "directory" and "scopes"');
    expect(bad(null).message).toBe('current.json: expected an object with "format", "directory" and "scopes"');
    expect(bad({ ...good, format: 2 }).message).toBe('current.json: unsupported format 2 (this version reads format 1)');
    expect(bad({ ...good, format: undefined }).message).toBe('current.json: unsupported format undefined (this version reads format 1)');
    expect(bad({ ...good, publishedAt: 5 }).message).toBe('current.json: "publishedAt" must be a string');
    expect(bad({ ...good, directory: 'abc' }).message).toBe('current.json: "directory" must be a sha256 (64 lowercase hex digits)');
    expect(bad({ ...good, scopes: [] }).message).toBe('current.json: "scopes" must map scope names to versions');
    expect(bad({ ...good, scopes: { Team: h('a') } }).message).toBe('current.json: scopes: "Team" is not a scope name (account or team_<id>)');
    expect(bad({ ...good, scopes: { account: 'v' } }).message).toBe('current.json: scopes.account: expected a version (64 lowercase hex digits)');
    expect(POINTER_KEY).toBe('current.json');
  });
});

describe('the index', () => {
  const files = [
    { path: 'b/c.md', size: 3, mtimeMs: 2.5, sha256: h('c') },
    { path: 'DUTY.md', size: 10, mtimeMs: 1, sha256: h('d') },
  ];
  const snap = snapshotScope('team_x', files);
  const doc = JSON.parse(serializeIndex(snap).toString('utf8')) as { files: Record<string, unknown>[] } & Record<string, unknown>;
  const parse = (d: unknown, max = 1000) => parseIndex(Buffer.from(JSON.stringify(d)), 'team_x', snap.version, max);
  const bad = (d: unknown, max = 1000) => refusal(() => parse(d, max)).message.replace(`indexes/team_x/${snap.version}.json: `, '');
  const withFile = (i: number, f: Record<string, unknown>) => ({ ...doc, files: doc.files.map((x, j) => (j === i ? f : x)) });

  it('writes the files sorted with only their fields, and reads back with the total size', () => {
    expect(doc).toEqual({ format: 1, scope: 'team_x', version: snap.version, files: [files[1], files[0]] });
    const extra = snapshotScope('team_x', files.map((f) => ({ ...f, extra: 1 }) as never));
    expect(JSON.parse(serializeIndex(extra).toString('utf8')).files[0]).toEqual(files[1]);
    expect(parse(doc)).toEqual({ scope: 'team_x', version: snap.version, totalBytes: 13, files: [files[1], files[0]] });
    expect(parse(doc, 10).totalBytes).toBe(13);
  });

  it('refuses an index that is not of its key, or malformed anywhere', () => {
    expect(bad('x' as never)).toBe('expected an index of format 1');
    expect(bad({ ...doc, format: 2 })).toBe('expected an index of format 1');
    expect(bad({ ...doc, scope: 'team_y' })).toBe(`names scope "team_y" version ${JSON.stringify(snap.version)}, not the ones its key names`);
    expect(bad({ ...doc, version: h('v') })).toBe(`names scope "team_x" version ${JSON.stringify(h('v'))}, not the ones its key names`);
    expect(bad({ ...doc, files: {} })).toBe('"files" must be an array');
    expect(bad(withFile(1, 'f' as never))).toBe('files[1]: expected {path, size, mtimeMs, sha256}');
    expect(bad(withFile(0, { ...doc.files[0], path: 7 }))).toBe('files[0].path: expected a string');
    expect(bad(withFile(0, { ...doc.files[0], path: 'a/../b' }))).toBe('files[0].path "a/../b": ".." segment');
    expect(bad(withFile(0, { ...doc.files[0], path: `/${'x'.repeat(300)}` }))).toBe(`files[0].path ${JSON.stringify(`/${'x'.repeat(199)}`)}: absolute path`);
    expect(bad({ ...doc, files: [doc.files[1], doc.files[0]] })).toBe('files[1].path "DUTY.md": not sorted after "b/c.md" (or a duplicate)');
    expect(bad({ ...doc, files: [doc.files[0], doc.files[0]] })).toBe('files[1].path "DUTY.md": not sorted after "DUTY.md" (or a duplicate)');
    for (const size of ['3', -1, 1.5, Number.MAX_SAFE_INTEGER + 1]) expect(bad(withFile(1, { ...doc.files[1], size })), String(size)).toBe('files[1].size: expected a byte count');
    expect(bad(doc, 9)).toBe('files[0].size: 10 bytes is above --max-file-size (9)');
    expect(bad(withFile(0, { ...doc.files[0], mtimeMs: '1' }))).toBe('files[0].mtimeMs: expected a number');
    expect(bad(withFile(0, { ...doc.files[0], mtimeMs: null }))).toBe('files[0].mtimeMs: expected a number');
    expect(bad(withFile(0, { ...doc.files[0], sha256: h('d').toUpperCase() }))).toBe('files[0].sha256: expected 64 lowercase hex digits');
    expect(bad(withFile(0, { ...doc.files[0], sha256: h('other') }))).toBe('its files do not hash to the version it is named by');
  });

  it('takes an empty scope and a zero-byte file', () => {
    const empty = snapshotScope('account', []);
    expect(parseIndex(serializeIndex(empty), 'account', empty.version, 0)).toEqual({ scope: 'account', version: empty.version, totalBytes: 0, files: [] });
    const zero = snapshotScope('account', [{ path: 'e', size: 0, mtimeMs: 0, sha256: h('') }]);
    expect(parseIndex(serializeIndex(zero), 'account', zero.version, 0).files).toHaveLength(1);
  });
});

