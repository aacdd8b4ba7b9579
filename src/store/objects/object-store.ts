// The object store seam: a flat key space under one bucket prefix. The S3
// implementation (s3-object-store.ts) is the real one; tests wrap it to count
// requests or inject faults, so nothing above this file knows about HTTP.
//
// Keys are relative to the store's prefix (`blobs/<sha256>`, `current.json`).
// Every failure is an ObjectStoreError naming the bucket and key, with the
// stable code `unavailable` (503 with a retry hint when serving, exit 4 from
// the CLI): an unreachable, slow or misbehaving store is never a wrong answer.

import { KnowledgeError } from '../../core/errors.js';

export interface StoredObject {
  readonly bytes: Buffer;
  /** The store's entity tag, quotes included, for conditional GETs. */
  readonly etag: string | undefined;
}

export interface GetOptions {
  /** Refuse (ObjectStoreError `too_large`) an object larger than this many bytes. */
  readonly maxBytes: number;
  /** A previously seen etag: an unchanged object answers `'not-modified'`. */
  readonly ifNoneMatch?: string | undefined;
}

export interface ObjectStore {
  /** `s3://bucket/prefix` (and the endpoint): for messages. */
  readonly description: string;
  /** The object, `null` when there is none, `'not-modified'` when `ifNoneMatch` still matches. */
  get(key: string, options: GetOptions): Promise<StoredObject | null | 'not-modified'>;
  /** Writes the whole object (a single PUT: object stores make it visible atomically). */
  put(key: string, body: Buffer, contentType?: string): Promise<void>;
  /** True when the object exists. */
  has(key: string): Promise<boolean>;
  /** Every key under `prefix` (relative to the store's prefix), in the store's order. */
  list(prefix: string): AsyncIterable<string>;
  /** Releases connections. */
  close(): Promise<void>;
}

/** One entry of a listing with what `gc` needs to decide about it. */
export interface ListedObject {
  /** Relative to the store's prefix. */
  readonly key: string;
  readonly size: number;
  /** The store's LastModified, in ms since the epoch. */
  readonly lastModified: number;
}

/** What `gc` needs beyond reading: listing with sizes and ages, and deleting (only gc deletes). */
export interface SweepableStore extends ObjectStore {
  listObjects(prefix: string): AsyncIterable<ListedObject>;
  /** Deletes up to 1 000 keys in one request; keys that do not exist are not an error. */
  deleteMany(keys: readonly string[]): Promise<void>;
  /** The object's LastModified (ms since the epoch, one HEAD), null when there is none. */
  lastModified(key: string): Promise<number | null>;
}

export function isSweepable(store: ObjectStore): store is SweepableStore {
  const s = store as Partial<SweepableStore>;
  return typeof s.listObjects === 'function' && typeof s.deleteMany === 'function' && typeof s.lastModified === 'function';
}

export type ObjectStoreFailure = 'unreachable' | 'timeout' | 'status' | 'too_large' | 'garbage';

export class ObjectStoreError extends KnowledgeError {
  constructor(
    readonly failure: ObjectStoreFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('unavailable', message, options);
    this.name = 'ObjectStoreError';
  }
}

export function isObjectStoreError(err: unknown): err is ObjectStoreError {
  return err instanceof ObjectStoreError;
}
