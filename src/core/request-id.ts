// Request ids tie a runner's request to the control plane's audit lines and
// log lines about it. The mount daemon sends one in `x-request-id` with each
// call (the same id on every retry of that call); the control plane keeps a
// well-formed one, makes one up otherwise, and echoes it in its answer.

import { randomBytes } from 'node:crypto';

export const REQUEST_ID_HEADER = 'x-request-id';

const WELL_FORMED = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** The id a client sent, when it is short and plain enough to log as it is; else null. */
export function acceptRequestId(header: string | string[] | undefined): string | null {
  return typeof header === 'string' && WELL_FORMED.test(header) ? header : null;
}

/** A fresh id: `<prefix>-` and 16 random hex digits. */
export function newRequestId(prefix: string): string {
  return `${prefix}-${randomBytes(8).toString('hex')}`;
}
