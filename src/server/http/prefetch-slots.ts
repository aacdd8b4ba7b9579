// Foreground first: a bounded number of prefetch requests (batches marked
// `x-kfs-priority: prefetch`, work no agent is waiting for) are served at
// once; the rest are answered at once with 503, Retry-After and `x-kfs-shed`,
// before any pack is read. The daemon waits that long and asks again, so a
// fleet of mounts starting together spreads its prefetch over time instead
// of holding this replica's event loop and CPU while agents' opens, plans and
// sessions wait behind 4 MiB streams (20 mounts × 3 batches each was 60
// streams at once).
//
// A slot is held until the streamed answer ends (sent, cut or abandoned).

import { SHED_HEADER } from '../../core/wire.js';
import { errorResponse, type ApiResponse } from './api.js';

/** Seconds a shed prefetch waits before asking again (the daemon adds jitter). */
export const PREFETCH_RETRY_AFTER_SECONDS = 1;

export class PrefetchSlots {
  private inUse = 0;
  constructor(private readonly slots: number) {}

  get busy(): number {
    return this.inUse;
  }

  /** A release function for a free slot, or undefined when all are taken (answer `shedResponse()`). */
  take(): (() => void) | undefined {
    if (this.inUse >= this.slots) return undefined;
    this.inUse++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inUse--;
    };
  }

  shedResponse(): ApiResponse {
    return errorResponse('unavailable', `serving ${this.slots} prefetch batches already; ask again later (agents' requests go first)`, {
      'retry-after': String(PREFETCH_RETRY_AFTER_SECONDS),
      [SHED_HEADER]: '1',
    });
  }
}

/** `stream`, releasing the slot when it ends however it ends. */
export async function* releasingAtEnd(stream: AsyncIterable<Buffer>, release: () => void): AsyncGenerator<Buffer> {
  try {
    yield* stream;
  } finally {
    release();
  }
}
