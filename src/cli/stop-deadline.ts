// A stop must always end the daemon. SIGTERM/SIGINT start a clean stop
// (sync loop, control socket, unmount); if that has not ended the process
// within the deadline, because an unmount or a FUSE thread is stuck (a mount
// detached underneath us, a hung fusermount), the process exits anyway with
// its own exit code, so a runner's stop never waits for SIGKILL.

import { EXIT } from './exit-codes.js';

/** Longest a stop may take before the process exits without a clean shutdown. */
export const STOP_DEADLINE_MS = 10_000;

/**
 * Exits with EXIT.stopTimedOut `ms` after now unless the process ended first.
 * The timer does not keep the process alive by itself.
 */
export function armStopDeadline(
  signal: string,
  log: (line: string) => void,
  ms: number = STOP_DEADLINE_MS,
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  setTimeout(() => {
    log(`${signal}: the daemon did not stop within ${ms / 1000} s (an unmount may be stuck); exiting without a clean unmount (exit ${EXIT.stopTimedOut})`);
    exit(EXIT.stopTimedOut);
  }, ms).unref();
}
