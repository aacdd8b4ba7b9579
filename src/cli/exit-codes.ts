// Exit codes shared by every command, so scripts and agent harnesses can
// branch on them without parsing text.

import type { ErrorCode } from '../core/errors.js';

export const EXIT = {
  ok: 0,
  notFound: 1,
  usage: 2,
  denied: 3,
  unavailable: 4,
  failure: 5,
  /** A stop (SIGTERM/SIGINT) did not finish within its deadline; the process exited without a clean shutdown. */
  stopTimedOut: 6,
} as const;

export const EXIT_FOR_CODE = {
  not_found: EXIT.notFound,
  denied: EXIT.denied,
  invalid_argument: EXIT.usage,
  unauthorized: EXIT.failure,
  forbidden: EXIT.failure,
  read_only: EXIT.failure,
  unavailable: EXIT.unavailable,
  membership_unavailable: EXIT.unavailable,
  integrity: EXIT.unavailable,
  too_large: EXIT.failure,
  config: EXIT.usage,
  internal: EXIT.failure,
} as const satisfies Record<ErrorCode, number>;
