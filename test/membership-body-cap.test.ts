// The membership client reads a body only for a 200 and never more than
// MAX_MEMBERSHIP_BODY_BYTES: a service answering a huge body cannot grow the
// control plane, and an over-size answer is a membership failure (the
// policy then denies other teams: fail closed). Against a real HTTP service.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MEMBERSHIP_BODY_BYTES, httpMembership } from '../src/server/access/membership.js';
import { startFaultMembership, type FaultMembership } from './helpers/fault-membership.js';

let service: FaultMembership;
beforeAll(async () => {
  service = await startFaultMembership({ alice: ['payments'] });
});
afterAll(async () => {
  await service?.close();
});

const membership = () => httpMembership(service.url, 10_000);

describe('membership body cap', () => {
  it('a body just under the cap is read and accepted', async () => {
    await service.setMode({ kind: 'huge', bytes: MAX_MEMBERSHIP_BODY_BYTES - 1000 });
    expect(await membership().teamsOf('alice')).toEqual({ status: 'ok', teams: ['payments'] });
    expect(service.hugeBytesSent()).toBe(MAX_MEMBERSHIP_BODY_BYTES - 1000);
  });

  it('64 MiB of whitespace before a valid answer is a failure, and reading stops near the cap', async () => {
    await service.setMode({ kind: 'huge', bytes: 64 * 1024 * 1024 });
    const answer = await membership().teamsOf('alice');
    expect(answer).toEqual({ status: 'error', error: `membership service answered more than ${MAX_MEMBERSHIP_BODY_BYTES} bytes` });
    // What the kernel's socket buffers took in, not what was sent in total.
    await new Promise((r) => setTimeout(r, 200));
    expect(service.hugeBytesSent()).toBeLessThan(16 * 1024 * 1024);
  });

  it('a declared Content-Length over the cap is refused before reading', async () => {
    await service.setMode({ kind: 'huge', bytes: 64 * 1024 * 1024, declare: true });
    expect(await membership().teamsOf('alice')).toMatchObject({ status: 'error', error: expect.stringMatching(/more than 1048576 bytes/) });
  });

  it('the status is looked at first: a huge 500 or 404 body is not read', async () => {
    await service.setMode({ kind: 'huge', bytes: 64 * 1024 * 1024, status: 500 });
    expect(await membership().teamsOf('alice')).toEqual({ status: 'error', error: 'membership service answered HTTP 500' });
    await new Promise((r) => setTimeout(r, 200));
    expect(service.hugeBytesSent()).toBeLessThan(16 * 1024 * 1024);
    await service.setMode({ kind: 'huge', bytes: 64 * 1024 * 1024, status: 404 });
    expect(await membership().teamsOf('alice')).toEqual({ status: 'unknown-user' });
  });
});
