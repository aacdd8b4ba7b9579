import { describe, expect, it } from 'vitest';
import { formatBytes, formatDurationFlag, formatSizeFlag, parseDuration, parseSize } from '../src/core/text/units.js';
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
    expect(() => parseSize(text)).toThrow(`invalid size "${text}" (examples: 4096, 64KiB, 256MiB, 1GB)`);
  });

  it('takes spaces around the number and unit, and rounds to a whole byte', () => {
    expect(parseSize('  2 KiB  ')).toBe(2048);
    expect(parseSize('1.0005k')).toBe(1001);
    expect(() => parseSize('1.')).toThrow('invalid size "1."');
    expect(() => parseSize('1.5.5k')).toThrow('invalid size');
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
    expect(() => parseDuration(text)).toThrow(`invalid duration "${text}" (examples: 0, 500ms, 2s, 5m)`);
  });
});

describe('formatBytes', () => {
  it('keeps small sizes exact and scales large ones', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(64 * 1024)).toBe('64.0 KiB');
    expect(formatBytes(37 * 1024 ** 2)).toBe('37.0 MiB');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.0 KiB');
    expect(formatBytes(1536 * 1024 ** 3)).toBe('1.5 TiB');
    expect(formatBytes(2048 * 1024 ** 4)).toBe('2048.0 TiB'); // no unit past TiB
  });
});

describe('formatSizeFlag and formatDurationFlag', () => {
  it.each([
    [0, '0'],
    [1000, '1000'],
    [1024, '1KiB'],
    [1536, '1536'],
    [3 * 1024 ** 2, '3MiB'],
    [1024 ** 3, '1GiB'],
    [1024 ** 4 * 2, '2TiB'],
    [1024 ** 3 + 1024, '1048577KiB'],
  ])('size %d → %s, which parses back', (bytes, flag) => {
    expect(formatSizeFlag(bytes)).toBe(flag);
    expect(parseSize(flag)).toBe(bytes);
  });

  it.each([
    [0, '0ms'],
    [250, '250ms'],
    [1000, '1s'],
    [1500, '1500ms'],
    [120_000, '2m'],
    [90_000, '90s'],
    [3_600_000, '1h'],
    [86_400_000 * 30, '30d'],
    [86_400_000 + 3_600_000, '25h'],
  ])('duration %d → %s, which parses back', (ms, flag) => {
    expect(formatDurationFlag(ms)).toBe(flag);
    expect(parseDuration(flag)).toBe(ms);
  });
});
