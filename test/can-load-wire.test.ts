// The daemon's check of a can-load answer: one answer per scope asked, in
// order, each allowed or refused with a known code. Anything else is garbage
// from the control plane (`unavailable`), never an answer to pass on.

import { describe, expect, it } from 'vitest';
import { exitCodeOf } from '../src/cli/commands/can-load.js';
import type { CanLoadAnswer } from '../src/core/wire.js';
import { checkCanLoadResponse } from '../src/daemon/control-plane/wire-check.js';

const req = { scopes: ['account', 'team_search'], for: 'skill' } as const;
const ok = { for: 'skill', answers: [{ scope: 'account', allowed: true }, { scope: 'team_search', allowed: false, error: { code: 'not_found', message: 'no such scope: team_search' } }] };

describe('checkCanLoadResponse', () => {
  it('passes a well-formed answer through', () => {
    expect(checkCanLoadResponse(ok, req)).toEqual(ok);
  });

  it.each([
    ['another kind', { ...ok, for: 'tool' }],
    ['one answer short', { ...ok, answers: ok.answers.slice(0, 1) }],
    ['answers swapped', { ...ok, answers: [...ok.answers].reverse() }],
    ['a scope not asked', { ...ok, answers: [{ scope: 'team_storage', allowed: true }, ok.answers[1]] }],
    ['allowed not a boolean', { ...ok, answers: [{ scope: 'account', allowed: 'yes' }, ok.answers[1]] }],
    ['a refusal without an error', { ...ok, answers: [ok.answers[0], { scope: 'team_search', allowed: false }] }],
    ['an unknown refusal code', { ...ok, answers: [ok.answers[0], { scope: 'team_search', allowed: false, error: { code: 'internal', message: 'x' } }] }],
    ['not an object', 'allowed'],
  ])('refuses %s as garbage (unavailable)', (_name, body) => {
    expect(() => checkCanLoadResponse(body, req)).toThrow(expect.objectContaining({ code: 'unavailable', message: 'control plane sent an invalid can-load answer' }));
  });
});

describe('the exit code of several answers', () => {
  const refusal = (code: 'not_found' | 'denied' | 'membership_unavailable'): CanLoadAnswer => ({ scope: 'team_x', allowed: false, error: { code, message: '' } });
  const allowed: CanLoadAnswer = { scope: 'account', allowed: true };
  it('is 0 when every scope is allowed, else the gravest refusal: 4, then 3, then 1', () => {
    expect(exitCodeOf([allowed, allowed])).toBe(0);
    expect(exitCodeOf([allowed, refusal('not_found')])).toBe(1);
    expect(exitCodeOf([refusal('not_found'), refusal('denied')])).toBe(3);
    expect(exitCodeOf([refusal('denied'), refusal('membership_unavailable'), refusal('not_found')])).toBe(4);
  });
});
