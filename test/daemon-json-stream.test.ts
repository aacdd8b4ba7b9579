// The incremental JSON parser used for plans: for any JSON text, cut into
// chunks anywhere (inside strings, escapes, multi-byte characters, numbers,
// literals), the value equals JSON.parse's; any text JSON.parse refuses is
// refused, wherever it is cut.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonStreamParser, MAX_JSON_DEPTH, MAX_TOKEN_BYTES } from '../src/daemon/control-plane/json-stream.js';

function parseChunks(buf: Buffer, cuts: readonly number[]): unknown {
  const p = new JsonStreamParser();
  let at = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    p.write(buf.subarray(at, cut));
    at = cut;
  }
  p.write(buf.subarray(at));
  return p.end();
}

/** Every way of cutting `text` in two, plus byte by byte. */
function everySplit(text: string): unknown[] {
  const buf = Buffer.from(text);
  const results: unknown[] = [];
  for (let cut = 0; cut <= buf.length; cut++) results.push(parseChunks(buf, [cut]));
  results.push(parseChunks(buf, Array.from({ length: buf.length }, (_, i) => i)));
  return results;
}

const SAMPLE = JSON.stringify({
  sessionId: 'ses_1',
  version: 'a'.repeat(64),
  threshold: 1073741824,
  mode: 'all-loadable',
  mounted: [],
  scopes: [
    {
      scope: 'team_payments',
      totalBytes: 0,
      files: [
        { path: 'runbooks/ünïcödé 🚀.md', size: 0, mtimeMs: 1732912345678, sha256: 'b'.repeat(64) },
        { path: 'quote"and\\backslash\n\u0001.md', size: 12, mtimeMs: 1732912345678.5, sha256: 'c'.repeat(64) },
      ],
    },
  ],
  numbers: [0, -0, -1, 1.5, 1e21, 1.7976931348623157e308, 5e-324, 12345678901234567890, 123456789012345, -9007199254740993],
  literals: [true, false, null, [], {}, [[]], { a: {} }],
});

describe('JsonStreamParser', () => {
  it('gives what JSON.parse gives for a plan-like text cut at every byte', () => {
    const expected = JSON.parse(SAMPLE) as unknown;
    for (const got of everySplit(SAMPLE)) expect(got).toEqual(expected);
    const pretty = JSON.stringify(expected, null, '\t\r\n ');
    for (const got of everySplit(`\n ${pretty} \t`)) expect(got).toEqual(expected);
  });

  it('gives what JSON.parse gives for any JSON value, any chunking', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ stringUnit: 'binary' }),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.boolean(),
        (value, rawCuts, pretty) => {
          const text = pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value);
          const buf = Buffer.from(text);
          const cuts = rawCuts.map((c) => c % (buf.length + 1));
          expect(parseChunks(buf, cuts)).toEqual(JSON.parse(text));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('refuses what JSON.parse refuses, wherever it is cut', () => {
    const invalid = [
      '', ' ', '{', '[', '}', '[1,]', '{"a":1,}', '{"a":1 "b":2}', '[1 2]', '{"a" 1}', '{1:2}', '{"a"}', '01', '-01', '1.', '.5', '+1',
      '-', '1e', '1e+', '0x10', 'NaN', 'Infinity', "'a'", '"abc', '"a\u0001b"', '"\\x"', '"\\u12"', 'tru', 'nul', 'truth', '[]]',
      '{} {}', '1 2', '[1]x', '"a"b', '{"a":tru}', '[,1]', '{,}', '\u00a0 1',
    ];
    for (const text of invalid) {
      expect(() => JSON.parse(text), text).toThrow();
      const buf = Buffer.from(text);
      for (let cut = 0; cut <= buf.length; cut++) expect(() => parseChunks(buf, [cut]), `${JSON.stringify(text)} cut at ${cut}`).toThrow(SyntaxError);
    }
  });

  it('"__proto__" is an own property, as with JSON.parse, never the prototype', () => {
    const text = '{"__proto__":{"polluted":true},"a":1}';
    const got = parseChunks(Buffer.from(text), [5]) as Record<string, unknown>;
    expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
    expect(Object.keys(got)).toEqual(['__proto__', 'a']);
    expect(got).toEqual(JSON.parse(text));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('duplicate keys: the last wins, as with JSON.parse', () => {
    expect(parseChunks(Buffer.from('{"a":1,"a":2}'), [3])).toEqual({ a: 2 });
  });

  it('refuses nesting deeper than MAX_JSON_DEPTH and a cut token longer than MAX_TOKEN_BYTES', () => {
    const ok = `${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`;
    expect(() => parseChunks(Buffer.from(ok), [])).not.toThrow();
    expect(() => parseChunks(Buffer.from(`[${ok}]`), [])).toThrow(/nested deeper/);
    const long = Buffer.from(`["${'x'.repeat(MAX_TOKEN_BYTES + 200_000)}"]`);
    expect(() => parseChunks(long, [])).not.toThrow(); // whole in one chunk: fine
    expect(() => parseChunks(long, Array.from({ length: 40 }, (_, i) => (i + 1) * 65536))).toThrow(/token longer/);
  });
});
