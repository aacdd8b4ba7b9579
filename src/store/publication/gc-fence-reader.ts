// publish's side of the fence (core/gc-fence.ts, rule 1): reads gc.json,
// and waits, polling, while a gc is deleting in the bucket, saying once
// which gc it waits for and until when at most (a fence gc stopped renewing
// expires, and is then taken as idle).

import { GC_FENCE_KEY, MAX_GC_FENCE_BYTES, fenceIsIdle, parseGcFence, type FenceSeen } from '../../core/gc-fence.js';
import { PublicationError } from '../../core/publication.js';
import type { ObjectStore } from '../objects/object-store.js';
import { withRetry } from './publish-uploads.js';

export class FenceReader {
  private told = new Set<string>();

  constructor(
    private readonly store: ObjectStore,
    private readonly log: (line: string) => void,
    private readonly pollMs: number,
  ) {}

  async read(): Promise<FenceSeen> {
    const got = await withRetry(() => this.store.get(GC_FENCE_KEY, { maxBytes: MAX_GC_FENCE_BYTES }));
    if (got === null || got === 'not-modified') return null;
    const bytes = got.bytes.toString('utf8');
    try {
      return { bytes, fence: parseGcFence(got.bytes) };
    } catch (err) {
      if (!(err instanceof PublicationError)) throw err;
      return { bytes, fence: null };
    }
  }

  /** The fence once it is idle (or absent, or expired). */
  async whenIdle(): Promise<FenceSeen> {
    for (;;) {
      const seen = await this.read();
      if (fenceIsIdle(seen, Date.now())) return seen;
      const what = seen?.fence != null ? `gc run ${seen.fence.run}, its fence expires at ${seen.fence.expiresAt} unless renewed` : `${GC_FENCE_KEY} is not what gc writes: remove it if no gc runs`;
      if (!this.told.has(what)) {
        this.told.add(what);
        this.log(`waiting for gc to finish deleting in ${this.store.description} before switching the pointer (${what})`);
      }
      await new Promise((resolve) => setTimeout(resolve, this.pollMs));
    }
  }
}
