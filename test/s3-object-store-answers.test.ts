// The S3 client against a scripted S3 endpoint: what it makes of answers a
// real server would not give (garbage listings, a HEAD without a date, a
// DeleteObjects 200 that reports failures), what it sends (the delete body,
// escaped, with its Content-MD5), and XML entities in listed keys.

import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ObjectStoreError } from '../src/store/objects/object-store.js';
import { MAX_DELETE_KEYS, S3ObjectStore } from '../src/store/objects/s3-object-store.js';
import { resolveS3Config } from '../src/store/objects/store-config.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
type Answer = (req: Seen, res: ServerResponse) => void;

let server: Server;
let port = 0;
let answer: Answer = (_req, res) => res.writeHead(500).end();
const seen: Seen[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(s);
      answer(s, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  seen.length = 0;
});

function store(prefix = 'pfx'): S3ObjectStore {
  const env = { AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`, AWS_ACCESS_KEY_ID: 'AK', AWS_SECRET_ACCESS_KEY: 'SK', AWS_REGION: 'us-east-1' };
  return new S3ObjectStore(resolveS3Config({ store: `s3://bkt${prefix === '' ? '' : `/${prefix}`}`, timeoutMs: 3_000, env }));
}

const xml = (res: ServerResponse, status: number, body: string) => res.writeHead(status, { 'content-type': 'application/xml' }).end(body);
const listing = (contents: string, tail = '<IsTruncated>false</IsTruncated>') => `<?xml version="1.0"?><ListBucketResult>${contents}${tail}</ListBucketResult>`;
const entry = (key: string, size = '5', date = '2026-01-02T03:04:05.000Z') => `<Contents><Key>${key}</Key><Size>${size}</Size><LastModified>${date}</LastModified></Contents>`;

async function failure(p: Promise<unknown>): Promise<ObjectStoreError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ObjectStoreError);
  return err as ObjectStoreError;
}

async function all<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('S3ObjectStore against answers a real store would not give', () => {
  it('HEAD: 200, 404 and another status; a date it can read, or garbage', async () => {
    const s = store();
    try {
      answer = (req, res) => {
        if (req.url.endsWith('/there')) res.writeHead(200, { 'last-modified': 'Fri, 02 Jan 2026 03:04:05 GMT' }).end();
        else if (req.url.endsWith('/undated')) res.writeHead(200).end();
        else if (req.url.endsWith('/baddate')) res.writeHead(200, { 'last-modified': 'yesterday-ish' }).end();
        else if (req.url.endsWith('/gone')) res.writeHead(404).end();
        else res.writeHead(503).end();
      };
      expect(await s.has('there')).toBe(true);
      expect(await s.has('gone')).toBe(false);
      expect(await s.lastModified('there')).toBe(Date.parse('2026-01-02T03:04:05Z'));
      expect(await s.lastModified('gone')).toBeNull();
      expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual(['HEAD /bkt/pfx/there', 'HEAD /bkt/pfx/gone', 'HEAD /bkt/pfx/there', 'HEAD /bkt/pfx/gone']);
      for (const key of ['undated', 'baddate']) {
        const err = await failure(s.lastModified(key));
        expect(err.failure).toBe('garbage');
        expect(err.message).toBe(`HEAD s3://bkt/pfx/${key}: http://127.0.0.1:${port} answered without a valid Last-Modified`);
      }
      const has = await failure(s.has('busy'));
      expect([has.failure, has.message]).toEqual(['status', `HEAD s3://bkt/pfx/busy: http://127.0.0.1:${port} answered HTTP 503`]);
      const at = await failure(s.lastModified('busy'));
      expect([at.failure, at.message]).toEqual(['status', `HEAD s3://bkt/pfx/busy: http://127.0.0.1:${port} answered HTTP 503`]);
    } finally {
      await s.close();
    }
  });

  it('LIST: keys decoded from XML entities, relative to the prefix, others skipped; every page followed', async () => {
    const s = store('p/q');
    try {
      answer = (req, res) => {
        const q = new URL(req.url, 'http://x').searchParams;
        expect(q.get('list-type')).toBe('2');
        expect(q.get('prefix')).toBe('p/q/blobs/');
        if (q.get('continuation-token') === null) {
          xml(res, 200, listing(entry('p/q/blobs/a&amp;b&lt;c&gt;&quot;&apos;') + entry('elsewhere/x') + entry('p/q/blobs/&#38;&#x26;&#x1F600;', '0'), '<IsTruncated>true</IsTruncated><NextContinuationToken>t&amp;2</NextContinuationToken>'));
        } else {
          expect(q.get('continuation-token')).toBe('t&2');
          xml(res, 200, listing(entry('p/q/blobs/last', '7', '2026-02-03T00:00:00Z')));
        }
      };
      expect(await all(s.listObjects('blobs/'))).toEqual([
        { key: `blobs/a&b<c>"'`, size: 5, lastModified: Date.parse('2026-01-02T03:04:05Z') },
        { key: 'blobs/&&\u{1F600}', size: 0, lastModified: Date.parse('2026-01-02T03:04:05Z') },
        { key: 'blobs/last', size: 7, lastModified: Date.parse('2026-02-03T00:00:00Z') },
      ]);
      expect(seen).toHaveLength(2);
      answer = (_req, res) => xml(res, 200, listing(entry('p/q/blobs/k')));
      expect(await all(s.list('blobs/'))).toEqual(['blobs/k']);
    } finally {
      await s.close();
    }
  });

  it('LIST: not a listing, an entry without a valid size or date, a truncated page without a token, a refusal', async () => {
    const s = store('');
    try {
      const cases: [string, string, RegExp][] = [
        ['<html>hello</html>', 'garbage', /^LIST s3:\/\/bkt\/x\*: .* answered something that is not a ListObjectsV2 result$/],
        [listing(entry('x1', '-1')), 'garbage', /^LIST s3:\/\/bkt\/x\*: an entry without a valid Size or LastModified \(x1\)$/],
        [listing(entry('x2', '1.5')), 'garbage', /an entry without a valid Size or LastModified \(x2\)/],
        [listing(entry('x3', 'many')), 'garbage', /\(x3\)/],
        [listing(entry('x4', '3', 'not a date')), 'garbage', /\(x4\)/],
        [listing(entry('x5'), '<IsTruncated>true</IsTruncated>'), 'garbage', /^LIST s3:\/\/bkt\/x\*: truncated answer without a continuation token$/],
      ];
      for (const [body, failed, message] of cases) {
        answer = (_req, res) => xml(res, 200, body);
        const err = await failure(all(s.listObjects('x')));
        expect(err.failure).toBe(failed);
        expect(err.message).toMatch(message);
      }
      answer = (_req, res) => xml(res, 403, '<Error><Code>AccessDenied</Code></Error>');
      const err = await failure(all(s.listObjects('x')));
      expect(err.failure).toBe('status');
      expect(err.message).toMatch(/^LIST s3:\/\/bkt\/x\*: .*HTTP 403 AccessDenied/);
    } finally {
      await s.close();
    }
  });

  it('DeleteObjects: one escaped body with its Content-MD5; none for no keys; too many refused unsent; a 200 that reports a failure', async () => {
    const s = store();
    try {
      answer = (_req, res) => xml(res, 200, '<DeleteResult></DeleteResult>');
      await s.deleteMany([]);
      expect(seen).toHaveLength(0);
      const tooMany = await failure(s.deleteMany(Array.from({ length: MAX_DELETE_KEYS + 1 }, (_, i) => `k${i}`)));
      expect([tooMany.failure, tooMany.message]).toEqual(['too_large', `DELETE: ${MAX_DELETE_KEYS + 1} keys in one request, at most ${MAX_DELETE_KEYS}`]);
      expect(seen).toHaveLength(0);
      await s.deleteMany(Array.from({ length: MAX_DELETE_KEYS }, (_, i) => `k${i}`)); // exactly the limit is one request
      expect(seen).toHaveLength(1);
      seen.length = 0;
      await s.deleteMany([`a&b<c>"'`, 'plain']);
      const [req] = seen;
      expect(`${req?.method} ${req?.url}`).toBe('POST /bkt?delete=');
      expect(req?.body).toBe(
        '<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>true</Quiet>' +
          '<Object><Key>pfx/a&#38;b&#60;c&#62;&#34;&#39;</Key></Object><Object><Key>pfx/plain</Key></Object></Delete>',
      );
      expect(req?.headers['content-md5']).toBe(createHash('md5').update(req?.body ?? '').digest('base64'));
      expect(req?.headers['content-type']).toBe('application/xml');

      answer = (_req, res) => xml(res, 200, '<DeleteResult><Error><Key>pfx/plain</Key><Code>AccessDenied</Code></Error></DeleteResult>');
      const reported = await failure(s.deleteMany(['a', 'plain']));
      expect([reported.failure, reported.message]).toEqual(['status', `DELETE s3://bkt/pfx/plain: http://127.0.0.1:${port} refused it (AccessDenied)`]);
      answer = (_req, res) => xml(res, 200, '<DeleteResult><Error></Error></DeleteResult>');
      expect((await failure(s.deleteMany(['a']))).message).toBe(`DELETE s3://bkt/pfx/?: http://127.0.0.1:${port} refused it (no code)`);
      answer = (_req, res) => xml(res, 500, '<Error><Code>InternalError</Code></Error>');
      const refused = await failure(s.deleteMany(['a', 'b', 'c']));
      expect(refused.failure).toBe('status');
      expect(refused.message).toMatch(/^DELETE s3:\/\/bkt\/pfx\/a and 2 more: .*HTTP 500 InternalError/);
    } finally {
      await s.close();
    }
  });
});
