// The S3 client against a real S3-protocol server (s3rver, which checks
// Signature V4): reads, writes, conditional GETs, listing across pages, and
// each failure naming the bucket and key.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { ObjectStoreError } from '../src/store/objects/object-store.js';
import { S3ObjectStore } from '../src/store/objects/s3-object-store.js';
import { resolveS3Config } from '../src/store/objects/store-config.js';
import { startS3, type TestS3 } from './helpers/s3rver.js';

let s3: TestS3;

function client(store: string, env: Record<string, string> = s3.env, timeoutMs = 5_000): S3ObjectStore {
  return new S3ObjectStore(resolveS3Config({ store, timeoutMs, env }));
}

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3.close();
});

describe('S3ObjectStore', () => {
  it('puts, gets, heads and answers 404 as null', async () => {
    const store = client(`s3://${s3.bucket}/basic`);
    try {
      expect(await store.get('a/b.txt', { maxBytes: 100 })).toBeNull();
      expect(await store.has('a/b.txt')).toBe(false);
      await store.put('a/b.txt', Buffer.from('hello'), 'text/plain');
      expect(await store.has('a/b.txt')).toBe(true);
      const got = await store.get('a/b.txt', { maxBytes: 100 });
      expect(got).not.toBeNull();
      expect(got !== null && got !== 'not-modified' && got.bytes.toString()).toBe('hello');
      const etag = got !== null && got !== 'not-modified' ? got.etag : undefined;
      expect(etag).toMatch(/^"/);
      expect(await store.get('a/b.txt', { maxBytes: 100, ifNoneMatch: etag })).toBe('not-modified');
      await store.put('a/b.txt', Buffer.from('hello again'));
      const again = await store.get('a/b.txt', { maxBytes: 100, ifNoneMatch: etag });
      expect(again !== null && again !== 'not-modified' && again.bytes.toString()).toBe('hello again');
      // Binary bytes and an empty object come back exactly.
      const binary = Buffer.from([0, 255, 1, 254, 10, 13]);
      await store.put('bin', binary);
      const b = await store.get('bin', { maxBytes: 100 });
      expect(b !== null && b !== 'not-modified' && b.bytes.equals(binary)).toBe(true);
      await store.put('empty', Buffer.alloc(0));
      const e = await store.get('empty', { maxBytes: 0 });
      expect(e !== null && e !== 'not-modified' && e.bytes.length).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('lists keys under a prefix across pages, relative to the store prefix', async () => {
    const store = client(`s3://${s3.bucket}/listing/deep`);
    const other = client(`s3://${s3.bucket}/listing`);
    try {
      const keys = Array.from({ length: 1_050 }, (_, i) => `blobs/${String(i).padStart(5, '0')}`);
      for (let i = 0; i < keys.length; i += 50) {
        await Promise.all(keys.slice(i, i + 50).map((k) => store.put(k, Buffer.from(k))));
      }
      await store.put('indexes/x', Buffer.from('x'));
      await other.put('blobs/not-mine', Buffer.from('y'));
      const listed: string[] = [];
      for await (const k of store.list('blobs/')) listed.push(k);
      expect(listed.sort()).toEqual(keys);
      const all: string[] = [];
      for await (const k of other.list('')) all.push(k);
      expect(all).toContain('blobs/not-mine');
      expect(all).toContain('deep/indexes/x');
    } finally {
      await store.close();
      await other.close();
    }
  });

  it('refuses an object larger than expected, naming the key', async () => {
    const store = client(`s3://${s3.bucket}/big`);
    try {
      await store.put('blob', Buffer.alloc(1000, 1));
      const err = await store.get('blob', { maxBytes: 999 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ObjectStoreError);
      expect((err as ObjectStoreError).failure).toBe('too_large');
      expect((err as Error).message).toContain(`s3://${s3.bucket}/big/blob`);
    } finally {
      await store.close();
    }
  });

  it('refuses a chunked answer without a length as it streams past the cap, reading little more', async () => {
    // A store (or a proxy) answering chunked, no Content-Length: only the count while streaming can stop it.
    let sent = 0;
    let closed!: () => void;
    const done = new Promise<void>((resolve) => { closed = resolve; });
    const server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const small = req.url?.includes('small') === true;
      if (small) return res.end('{"ok": true}');
      const chunk = Buffer.alloc(64 * 1024, ' ');
      const pump = (): void => {
        while (sent < 256 * 1024 * 1024 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', closed);
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const store = client('s3://knowledge/x', { ...s3.env, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}` });
    try {
      expect((await store.get('small.json', { maxBytes: 1024 }))).toMatchObject({ bytes: Buffer.from('{"ok": true}') });
      const err = await store.get('index.json', { maxBytes: 1024 * 1024 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ObjectStoreError);
      expect((err as ObjectStoreError).failure).toBe('too_large');
      expect((err as Error).message).toContain('s3://knowledge/x/index.json');
      await done;
      expect(sent).toBeLessThan(32 * 1024 * 1024);
    } finally {
      await store.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  // s3rver checks the access key id but not Signature V4 itself.
  it('an unknown access key or a missing bucket is an error naming the store and the S3 code', async () => {
    const wrong = client(`s3://${s3.bucket}/x`, { ...s3.env, AWS_ACCESS_KEY_ID: 'UNKNOWN', AWS_SECRET_ACCESS_KEY: 'wrong-secret' });
    const missing = client('s3://no-such-bucket/x');
    try {
      const err = await wrong.put('k', Buffer.from('v')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KnowledgeError);
      expect((err as KnowledgeError).code).toBe('unavailable');
      expect((err as Error).message).toMatch(/s3:\/\/knowledge\/x\/k: .*HTTP 403 InvalidAccessKeyId/);
      expect((err as Error).message).not.toContain('wrong-secret');
      const err2 = await missing.put('k', Buffer.from('v')).catch((e: unknown) => e);
      expect((err2 as Error).message).toMatch(/s3:\/\/no-such-bucket\/x\/k: .* HTTP 404 NoSuchBucket/);
    } finally {
      await wrong.close();
      await missing.close();
    }
  });

  it('an unreachable store and a hanging one fail within the timeout, naming the endpoint', async () => {
    const closedPort = client('s3://knowledge/x', { ...s3.env, AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1' });
    const hanging = client(`s3://${s3.bucket}/x`, s3.env, 300);
    try {
      const err = await closedPort.get('k', { maxBytes: 10 }).catch((e: unknown) => e);
      expect((err as ObjectStoreError).failure).toBe('unreachable');
      expect((err as Error).message).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1 \(ECONNREFUSED\)/);
      s3.pause();
      const started = Date.now();
      const err2 = await hanging.get('k', { maxBytes: 10 }).catch((e: unknown) => e);
      expect((err2 as ObjectStoreError).failure).toBe('timeout');
      expect((err2 as Error).message).toContain('--s3-timeout');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      s3.resume();
      await closedPort.close();
      await hanging.close();
    }
  });
});

describe('resolveS3Config', () => {
  it('reads the endpoint and credentials from the standard environment', () => {
    const c = resolveS3Config({ store: 's3://my-bucket/a/b/', timeoutMs: 1000, env: { AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 's', AWS_DEFAULT_REGION: 'eu-west-1' } });
    expect(c).toMatchObject({ bucket: 'my-bucket', prefix: 'a/b', region: 'eu-west-1', endpoint: 'https://s3.eu-west-1.amazonaws.com' });
    const d = resolveS3Config({ store: 's3://my-bucket', endpoint: 'http://minio:9000/', timeoutMs: 1000, env: { AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 's' } });
    expect(d).toMatchObject({ prefix: '', endpoint: 'http://minio:9000', region: 'us-east-1' });
  });

  it('names what is wrong with a bad store URL, endpoint or missing credentials', () => {
    const env = { AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 's' };
    const bad = (store: string, endpoint?: string, e: Record<string, string> = env) => {
      try {
        resolveS3Config({ store, endpoint, timeoutMs: 1000, env: e });
        return '';
      } catch (err) {
        expect((err as KnowledgeError).code).toBe('config');
        return (err as Error).message;
      }
    };
    expect(bad('/srv/knowledge')).toMatch(/expected s3:\/\/BUCKET/);
    expect(bad('s3://Bad_Bucket/x')).toMatch(/not a valid bucket name/);
    expect(bad('s3://bucket/a/../b')).toMatch(/prefix segment "\.\."/);
    expect(bad('s3://bucket/a', 'ftp://x')).toMatch(/--s3-endpoint: expected http/);
    expect(bad('s3://bucket/a', 'http://user:pw@x')).toMatch(/credentials do not belong in the URL/);
    expect(bad('s3://bucket/a', undefined, {})).toMatch(/s3:\/\/bucket\/a: no credentials: set AWS_ACCESS_KEY_ID/);
  });
});
