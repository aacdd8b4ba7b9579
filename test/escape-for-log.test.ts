import { describe, expect, it } from 'vitest';
import { escapeForLog } from '../src/core/text/escape-for-log.js';

describe('escapeForLog', () => {
  it('leaves ordinary names alone, including non-Latin letters and emoji', () => {
    expect(escapeForLog('teams/payments/Дежурство 😀 é.md')).toBe('teams/payments/Дежурство 😀 é.md');
  });
  it('escapes line breaks of every kind, control characters, bidi controls and backslashes', () => {
    expect(escapeForLog('a\nb\rc\td')).toBe('a\\nb\\rc\\td');
    expect(escapeForLog('x\u0085y\u2028z\u2029')).toBe('x\\u0085y\\u2028z\\u2029');
    expect(escapeForLog('\u0000\u001b[31m\u007f')).toBe('\\u0000\\u001b[31m\\u007f');
    expect(escapeForLog('evil\u202egnp.md')).toBe('evil\\u202egnp.md');
    expect(escapeForLog('a\\nb')).toBe('a\\\\nb');
  });
  it('escapes lone surrogates but keeps pairs', () => {
    expect(escapeForLog('\ud800x\udc00')).toBe('\\ud800x\\udc00');
    expect(escapeForLog('\ud83d\ude00')).toBe('😀');
  });
  it('never leaves a character that splits a line', () => {
    const all = Array.from({ length: 0x3000 }, (_, i) => String.fromCharCode(i)).join('');
    expect(escapeForLog(all)).not.toMatch(/[\n\r\u000b\u000c\u0085\u2028\u2029]/);
  });
});
