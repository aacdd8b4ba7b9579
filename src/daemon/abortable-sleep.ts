// A pause that a stop cuts short: background loops (sync, prefetch) wait
// with it so stopping the daemon never waits out a backoff or a Retry-After.

/** Resolves after `ms`, or at once when `signal` aborts (or has). */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
