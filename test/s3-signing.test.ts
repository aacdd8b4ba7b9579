// Signature V4 of every request the S3 client sends, checked by an
// independent implementation of the AWS algorithm (itself checked against
// AWS's published example), since s3rver accepts any V4 signature. The
// requests go to a local HTTP server that records them and answers like S3.

import { createHash, createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore } from '../src/store/objects/s3-object-store.js';
import { resolveS3Config } from '../src/store/objects/store-config.js';

const sha = (b: string | Buffer) => createHash('sha256').update(b).digest('hex');
const hmac = (k: string | Buffer, s: string) => createHmac('sha256', k).update(s).digest();
const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

/** The signature AWS computes for a request as it arrived (path and query as sent). */
function expectedSignature(req: Received, secret: string): { signature: string; given: string } {
  const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(req.headers['authorization'] ?? '');
  if (auth === null) throw new Error(`no V4 authorization header: ${req.headers['authorization']}`);
  const [, , date, region, signedHeaders, given] = auth as unknown as string[];
  const [path, query = ''] = req.url.split('?') as [string, string?];
  const canonicalQuery = query === '' ? '' : query
    .split('&')
    .map((pair) => pair.split('=').map((x) => rfc3986(decodeURIComponent(x))) as [string, string])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1))
    .map(([k, v = '']) => `${k}=${v}`)
    .join('&');
  const names = (signedHeaders as string).split(';');
  const canonicalHeaders = names.map((n) => `${n}:${(req.headers[n] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const payload = req.headers['x-amz-content-sha256'] as string;
  const canonical = [req.method, path, canonicalQuery, canonicalHeaders, signedHeaders, payload].join('\n');
  const amzDate = req.headers['x-amz-date'] as string;
  const scope = `${date}/${region}/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha(canonical)].join('\n');
  let key = hmac(`AWS4${secret}`, date as string);
  key = hmac(key, region as string);
  key = hmac(key, 's3');
  key = hmac(key, 'aws4_request');
  return { signature: createHmac('sha256', key).update(toSign).digest('hex'), given: given as string };
}

let server: Server;
let endpoint: string;
const received: Received[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : (v ?? '')]));
      received.push({ method: req.method as string, url: req.url as string, headers, body: Buffer.concat(chunks) });
      if (req.url?.includes('list-type=2')) {
        res.writeHead(200, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0"?><ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>kfs/blobs/a</Key></Contents></ListBucketResult>');
      } else if (req.method === 'GET') {
        res.writeHead(200, { etag: '"x"' });
        res.end('body');
      } else {
        res.writeHead(200);
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

describe('Signature V4', () => {
  it('the checker agrees with the example AWS publishes (GET /test.txt, 2013-05-24)', () => {
    const example: Received = {
      method: 'GET',
      url: '/test.txt',
      body: Buffer.alloc(0),
      headers: {
        authorization: 'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
        host: 'examplebucket.s3.amazonaws.com',
        range: 'bytes=0-9',
        'x-amz-content-sha256': sha(''),
        'x-amz-date': '20130524T000000Z',
      },
    };
    const { signature, given } = expectedSignature(example, 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY');
    expect(signature).toBe(given);
  });

  it('every request the client sends is signed as AWS verifies it: GET, conditional GET, PUT, HEAD, LIST, odd keys, session tokens', async () => {
    const secret = 'test/Secret+Key';
    const store = new S3ObjectStore(
      resolveS3Config({
        store: "s3://my-bucket/kfs/a!b'(c)*",
        timeoutMs: 5_000,
        env: { AWS_ACCESS_KEY_ID: 'AKIDTEST', AWS_SECRET_ACCESS_KEY: secret, AWS_SESSION_TOKEN: 'token/with+chars', AWS_REGION: 'eu-west-3', AWS_ENDPOINT_URL_S3: endpoint },
      }),
    );
    received.length = 0;
    try {
      await store.get('blobs/abc', { maxBytes: 100 });
      await store.get('current.json', { maxBytes: 100, ifNoneMatch: '"etag"' });
      await store.put('indexes/team_x/v 1.json', Buffer.from('{"format": 1}'), 'application/json');
      await store.has('blobs/abc');
      for await (const _ of store.list('blobs/')) void _;
    } finally {
      await store.close();
    }
    expect(received.map((r) => r.method)).toEqual(['GET', 'GET', 'PUT', 'HEAD', 'GET']);
    for (const r of received) {
      const { signature, given } = expectedSignature(r, secret);
      expect(given, `${r.method} ${r.url}`).toBe(signature);
      expect(r.headers['authorization']).toContain('/eu-west-3/s3/aws4_request');
      expect(r.headers['x-amz-security-token']).toBe('token/with+chars');
      expect(r.headers['x-amz-content-sha256']).toBe(sha(r.body));
    }
    // Path-style, with the key encoded the way it was signed.
    expect(received[2]?.url).toBe('/my-bucket/kfs/a%21b%27%28c%29%2A/indexes/team_x/v%201.json');
    expect(received[4]?.url).toMatch(/^\/my-bucket\?/);
  });
});
