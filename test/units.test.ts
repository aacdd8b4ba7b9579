import { describe, expect, it } from 'vitest';
import { formatBytes, parseDuration, parseSize } from '../src/core/text/units.js';
import { KnowledgeError } from '../src/core/errors.js';

describe('parseSize', () => {
  it.each([
    ['4096', 4096],
    ['64KiB', 64 * 1024],
    ['256MiB', 256 * 1024 ** 2],
    ['1GB', 1e9],
    ['1.5 mib', Math.round(1.5 * 1024 ** 2)],
    ['0', 0],
  ])('%s → %d bytes', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(['', 'abc', '-1', '10 parsecs', '1e6', 'MiB'])('rejects %j with a message naming the value', (text) => {
    expect(() => parseSize(text)).toThrow(KnowledgeError);
    expect(() => parseSize(text)).toThrow(`invalid size "${text}"`);
  });
});

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['250', 250],
    ['500ms', 500],
    ['2s', 2000],
    ['1.5s', 1500],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['30d', 2_592_000_000],
  ])('%s → %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['soon', '2 weeks', '-5s', ''])('rejects %j', (text) => {
    expect(() => parseDuration(text)).toThrow(`invalid duration "${text}"`);
  });
});

describe('formatBytes', () => {
  it('keeps small sizes exact and scales large ones', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(64 * 1024)).toBe('64.0 KiB');
    expect(formatBytes(37 * 1024 ** 2)).toBe('37.0 MiB');
  });
});
