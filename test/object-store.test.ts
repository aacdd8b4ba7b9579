// The object store seam's own parts: which stores gc may sweep, and the one
// error every store failure is (code `unavailable`, so a 503 or exit 4).

import { describe, expect, it } from 'vitest';
import { isKnowledgeError } from '../src/core/errors.js';
import { isObjectStoreError, isSweepable, ObjectStoreError, type ObjectStore } from '../src/store/objects/object-store.js';

const reader: ObjectStore = {
  description: 's3://bkt/pfx',
  get: async () => null,
  put: async () => undefined,
  has: async () => false,
  list: async function* () {},
  close: async () => undefined,
};
const sweeping = {
  listObjects: async function* () {},
  deleteMany: async () => undefined,
  lastModified: async () => null,
};

describe('isSweepable', () => {
  it('only a store that lists with sizes, deletes and tells ages', () => {
    expect(isSweepable({ ...reader, ...sweeping })).toBe(true);
    expect(isSweepable(reader)).toBe(false);
    for (const missing of Object.keys(sweeping)) {
      const partial: Record<string, unknown> = { ...reader, ...sweeping };
      delete partial[missing];
      expect(isSweepable(partial as unknown as ObjectStore), `without ${missing}`).toBe(false);
      expect(isSweepable({ ...partial, [missing]: 'not a function' } as unknown as ObjectStore), `${missing} not a function`).toBe(false);
    }
  });
});

describe('ObjectStoreError', () => {
  it('is an `unavailable` KnowledgeError with its failure kind, message and cause', () => {
    const cause = new Error('ECONNREFUSED');
    const err = new ObjectStoreError('unreachable', 's3://bkt/pfx/current.json: cannot connect', { cause });
    expect(err).toBeInstanceOf(Error);
    expect(isKnowledgeError(err)).toBe(true);
    expect(isObjectStoreError(err)).toBe(true);
    expect(err.code).toBe('unavailable');
    expect(err.failure).toBe('unreachable');
    expect(err.name).toBe('ObjectStoreError');
    expect(err.message).toBe('s3://bkt/pfx/current.json: cannot connect');
    expect(err.cause).toBe(cause);
    expect(new ObjectStoreError('garbage', 'x').cause).toBeUndefined();
  });

  it('other errors are not store errors', () => {
    expect(isObjectStoreError(new Error('x'))).toBe(false);
    expect(isObjectStoreError({ failure: 'status', code: 'unavailable' })).toBe(false);
    expect(isObjectStoreError(undefined)).toBe(false);
  });
});
