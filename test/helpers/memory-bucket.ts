// An object store in memory, for in-process tests of what sits above the
// seam (gc, pack sources): objects carry their own LastModified, each answer
// an etag (conditional GETs answer 'not-modified'), and the size cap of a GET
// is kept as the S3 store keeps it.

import { createHash } from 'node:crypto';
import { ObjectStoreError, type GetOptions, type ListedObject, type StoredObject, type SweepableStore } from '../../src/store/objects/object-store.js';

export interface MemoryBucketOptions {
  readonly description?: string;
  /** The LastModified of objects `set` without one. */
  readonly setAt?: number;
  /** The LastModified of objects written through `put`. */
  readonly putAt?: number;
}

export class MemoryBucket implements SweepableStore {
  readonly description: string;
  readonly objects = new Map<string, { bytes: Buffer; lastModified: number }>();
  /** Every deleteMany call's keys. */
  readonly deletes: string[][] = [];
  private readonly setAt: number;
  private readonly putAt: number;

  constructor(options: MemoryBucketOptions = {}) {
    this.description = options.description ?? 's3://memory/bucket';
    this.setAt = options.setAt ?? 0;
    this.putAt = options.putAt ?? 0;
  }

  set(key: string, bytes: Buffer | string, lastModified = this.setAt): void {
    this.objects.set(key, { bytes: Buffer.from(bytes), lastModified });
  }

  async get(key: string, options?: GetOptions): Promise<StoredObject | null | 'not-modified'> {
    const o = this.objects.get(key);
    if (o === undefined) return null;
    const etag = `"${createHash('md5').update(o.bytes).digest('hex')}"`;
    if (options?.ifNoneMatch === etag) return 'not-modified';
    if (options !== undefined && o.bytes.length > options.maxBytes) {
      throw new ObjectStoreError('too_large', `${this.description}/${key}: ${o.bytes.length} bytes, more than ${options.maxBytes}`);
    }
    return { bytes: o.bytes, etag };
  }

  async put(key: string, body: Buffer): Promise<void> {
    this.set(key, body, this.putAt);
  }

  async has(key: string): Promise<boolean> {
    return this.objects.has(key);
  }

  async *list(prefix: string): AsyncIterable<string> {
    for await (const o of this.listObjects(prefix)) yield o.key;
  }

  async *listObjects(prefix: string): AsyncIterable<ListedObject> {
    for (const key of [...this.objects.keys()].sort()) {
      const o = this.objects.get(key);
      if (key.startsWith(prefix) && o !== undefined) yield { key, size: o.bytes.length, lastModified: o.lastModified };
    }
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    this.deletes.push([...keys]);
    for (const k of keys) this.objects.delete(k);
  }

  async lastModified(key: string): Promise<number | null> {
    return this.objects.get(key)?.lastModified ?? null;
  }

  async close(): Promise<void> {}
}
