// Verified file bytes for the filesystem and the prefetcher.
//
// Order: memory cache → disk cache (verified) → the control plane. Every
// body from the network is checked against the plan's size and sha256
// before it is cached or returned, so no reader ever sees a byte that does
// not belong to the version the tree shows. Concurrent requests for one
// sha256 share one fetch (coalescing); the in-flight map is bounded by the
// number of distinct files being opened at once.
//
// A body that hashes to the server's own x-kfs-sha256 but not to the plan's
// means the file changed after the plan was fetched: the new bytes are
// cached under their own hash (they are valid content, just not this
// version), the sync loop is asked to refresh, and this open fails with EIO
// rather than serving bytes whose size the kernel does not know yet. Any
// other mismatch is an `integrity` error (EIO, logged); a sync is asked for
// then too, since a file that grew past the plan's size looks the same.

import { KnowledgeError, isKnowledgeError } from '../core/errors.js';
import type { ContentCache } from './content-cache.js';
import { sha256Hex } from './content-cache.js';
import type { ControlClient } from './control-client.js';

export interface FileRef {
  readonly scope: string;
  /** Path inside the scope. */
  readonly scopePath: string;
  readonly sha256: string;
  readonly size: number;
}

export interface FetcherOptions {
  readonly client: ControlClient;
  readonly cache: ContentCache;
  readonly log?: (line: string) => void;
  /** The control plane has a newer version of `ref` than the tree. */
  readonly onStale?: (ref: FileRef) => void;
}

export class ContentFetcher {
  private readonly inflight = new Map<string, Promise<Buffer>>();
  private readonly log: (line: string) => void;
  fetches = 0;

  constructor(private readonly opts: FetcherOptions) {
    this.log = opts.log ?? (() => undefined);
  }

  /** Memory hit or undefined; never waits. */
  cached(sha256: string): Buffer | undefined {
    return this.opts.cache.getMemory(sha256);
  }

  isCached(sha256: string): boolean {
    return this.opts.cache.hasMemory(sha256);
  }

  get(ref: FileRef): Promise<Buffer> {
    const hit = this.opts.cache.getMemory(ref.sha256);
    if (hit !== undefined) return Promise.resolve(hit);
    let pending = this.inflight.get(ref.sha256);
    if (pending === undefined) {
      pending = this.load(ref).finally(() => this.inflight.delete(ref.sha256));
      this.inflight.set(ref.sha256, pending);
    }
    return pending;
  }

  private async load(ref: FileRef): Promise<Buffer> {
    const fromDisk = await this.opts.cache.get(ref.sha256);
    if (fromDisk !== undefined) return fromDisk;
    this.fetches++;
    let reply: Awaited<ReturnType<ControlClient['file']>>;
    try {
      reply = await this.opts.client.file(ref.scope, ref.scopePath, ref.size);
    } catch (err) {
      // More bytes than the plan says: most likely the file grew since the plan.
      if (isKnowledgeError(err) && err.code === 'integrity') this.opts.onStale?.(ref);
      throw err;
    }
    const { body, sha256: claimed } = reply;
    const actual = sha256Hex(body);
    if (actual === ref.sha256 && body.length === ref.size) {
      this.opts.cache.put(actual, body);
      return body;
    }
    const where = `${ref.scope}/${ref.scopePath}`;
    if (claimed !== undefined && claimed === actual) {
      this.opts.cache.put(actual, body);
      this.opts.onStale?.(ref);
      throw new KnowledgeError('unavailable', `${where} changed on the control plane since the last plan; refreshing`);
    }
    this.opts.onStale?.(ref);
    this.log(`integrity: ${where}: received ${body.length} bytes with sha256 ${actual.slice(0, 12)}…, expected ${ref.size} bytes with ${ref.sha256.slice(0, 12)}…; refused`);
    throw new KnowledgeError('integrity', `${where}: bytes from the control plane do not match the plan's sha256`);
  }
}
