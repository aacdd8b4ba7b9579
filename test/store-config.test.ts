// store-config: `s3://BUCKET/PREFIX`, the endpoint and the AWS environment,
// each refusal a config error naming the flag or variable, and credentials
// never in a message.

import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { formatStoreUrl, parseEndpoint, parseStoreUrl, resolveS3Config, type S3ConfigInput } from '../src/store/objects/store-config.js';

const env = { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI' };

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('config');
    return (err as Error).message;
  }
  throw new Error('accepted');
}

const resolve = (input: Partial<S3ConfigInput>) => resolveS3Config({ store: 's3://knowledge/p', timeoutMs: 1000, env, ...input });

describe('parseStoreUrl', () => {
  it('takes a bucket and a prefix without its trailing slashes', () => {
    expect(parseStoreUrl('s3://knowledge')).toEqual({ bucket: 'knowledge', prefix: '' });
    expect(parseStoreUrl('s3://knowledge/')).toEqual({ bucket: 'knowledge', prefix: '' });
    expect(parseStoreUrl('s3://kno.wl-edge/a/b//')).toEqual({ bucket: 'kno.wl-edge', prefix: 'a/b' });
    expect(parseStoreUrl("s3://abc/A-z_0.9!*'()")).toEqual({ bucket: 'abc', prefix: "A-z_0.9!*'()" });
    expect(parseStoreUrl(`s3://${'a'.repeat(63)}/p`).bucket).toHaveLength(63);
  });

  it('refuses what is not s3://, naming the flag', () => {
    expect(refusal(() => parseStoreUrl('/srv/knowledge'))).toBe('--store "/srv/knowledge": expected s3://BUCKET or s3://BUCKET/PREFIX');
    expect(refusal(() => parseStoreUrl('x s3://knowledge', '--from'))).toBe('--from "x s3://knowledge": expected s3://BUCKET or s3://BUCKET/PREFIX');
    expect(refusal(() => parseStoreUrl('s3:/knowledge'))).toMatch(/expected s3:\/\/BUCKET/);
    expect(refusal(() => parseStoreUrl('s3://knowledge/p\nrm -rf'))).toMatch(/expected s3:\/\/BUCKET/);
  });

  it('refuses bucket names S3 refuses', () => {
    const message = (b: string) => `--store "s3://${b}/p": "${b}" is not a valid bucket name (3-63 characters: a-z, 0-9, "." and "-")`;
    for (const b of ['ab', 'a'.repeat(64), 'Knowledge', '-abc', 'abc-', '.abc', 'abc.', 'a..b', 'a_b', '']) {
      expect(refusal(() => parseStoreUrl(`s3://${b}/p`))).toBe(message(b));
    }
    expect(parseStoreUrl('s3://a.b/p').bucket).toBe('a.b');
  });

  it('refuses empty, "." and ".." prefix segments and characters outside the safe set', () => {
    const message = (s: string) => `--store "s3://knowledge/${s === '' ? 'a//b' : s}": prefix segment "${s}" is not allowed (use letters, digits and !_.*'()-, no empty, "." or ".." segments)`;
    expect(refusal(() => parseStoreUrl('s3://knowledge/a//b'))).toBe(message(''));
    expect(refusal(() => parseStoreUrl('s3://knowledge/.'))).toBe(message('.'));
    expect(refusal(() => parseStoreUrl('s3://knowledge/..'))).toBe(message('..'));
    expect(refusal(() => parseStoreUrl('s3://knowledge/a b'))).toBe(message('a b'));
    expect(refusal(() => parseStoreUrl('s3://knowledge/x/a%b'))).toMatch(/prefix segment "a%b" is not allowed/);
    expect(refusal(() => parseStoreUrl('s3://knowledge/é'))).toMatch(/prefix segment "é" is not allowed/);
    expect(parseStoreUrl('s3://knowledge/...').prefix).toBe('...');
  });
});

describe('formatStoreUrl', () => {
  it('is s3://bucket, with /prefix when there is one', () => {
    expect(formatStoreUrl({ bucket: 'b', prefix: '' })).toBe('s3://b');
    expect(formatStoreUrl({ bucket: 'b', prefix: 'x/y' })).toBe('s3://b/x/y');
  });
});

describe('parseEndpoint', () => {
  it('keeps scheme, host and port only', () => {
    expect(parseEndpoint('http://127.0.0.1:9000', '--s3-endpoint')).toBe('http://127.0.0.1:9000');
    expect(parseEndpoint('https://minio.example/', '--s3-endpoint')).toBe('https://minio.example');
  });

  it('names the flag for what is not only scheme, host and port', () => {
    expect(refusal(() => parseEndpoint('minio:9000x', 'E'))).toBe('E: expected http:// or https://, got minio:');
    expect(refusal(() => parseEndpoint('not a url', 'E'))).toBe('E: not a URL: not a url');
    expect(refusal(() => parseEndpoint('ftp://minio', 'E'))).toBe('E: expected http:// or https://, got ftp:');
    expect(refusal(() => parseEndpoint('http://user@minio', 'E'))).toBe('E: credentials do not belong in the URL; use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
    expect(refusal(() => parseEndpoint('http://:pw@minio', 'E'))).toBe('E: credentials do not belong in the URL; use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
    expect(refusal(() => parseEndpoint('http://minio/knowledge', 'E'))).toBe('E: expected only scheme, host and port (the bucket comes from --store), got http://minio/knowledge');
    expect(refusal(() => parseEndpoint('http://minio/?x=1', 'E'))).toMatch(/^E: expected only scheme, host and port/);
  });
});

describe('resolveS3Config', () => {
  it('region: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1; blank counts as unset', () => {
    expect(resolve({ env: { ...env, AWS_REGION: 'eu-west-1', AWS_DEFAULT_REGION: 'ap-south-1' } }).region).toBe('eu-west-1');
    expect(resolve({ env: { ...env, AWS_REGION: '  ', AWS_DEFAULT_REGION: ' ap-south-1 ' } }).region).toBe('ap-south-1');
    expect(resolve({}).region).toBe('us-east-1');
    expect(refusal(() => resolve({ env: { ...env, AWS_REGION: 'EU WEST' } }))).toBe('AWS_REGION "EU WEST": not a region name');
    expect(refusal(() => resolve({ env: { ...env, AWS_REGION: 'x'.repeat(41) } }))).toMatch(/not a region name/);
    expect(refusal(() => resolve({ env: { ...env, AWS_REGION: 'eu/west' } }))).toMatch(/not a region name/);
  });

  it('endpoint: the flag, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the regional one', () => {
    const both = { ...env, AWS_ENDPOINT_URL_S3: 'http://s3only:1', AWS_ENDPOINT_URL: 'http://any:2' };
    expect(resolve({ endpoint: 'http://flag:3', env: both }).endpoint).toBe('http://flag:3');
    expect(resolve({ env: both }).endpoint).toBe('http://s3only:1');
    expect(resolve({ env: { ...env, AWS_ENDPOINT_URL: 'http://any:2' } }).endpoint).toBe('http://any:2');
    expect(resolve({ env: { ...env, AWS_REGION: 'eu-north-1' } }).endpoint).toBe('https://s3.eu-north-1.amazonaws.com');
    expect(refusal(() => resolve({ endpoint: 'ftp://x' }))).toBe('--s3-endpoint: expected http:// or https://, got ftp:');
    expect(refusal(() => resolve({ env: { ...env, AWS_ENDPOINT_URL: 'ftp://x' } }))).toBe('AWS_ENDPOINT_URL_S3: expected http:// or https://, got ftp:');
  });

  it('credentials: both keys, the session token when set; never in a message', () => {
    const c = resolve({ env: { ...env, AWS_SESSION_TOKEN: ' tok ' } });
    expect(c.credentials).toEqual({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI', sessionToken: 'tok' });
    expect(resolve({}).credentials).toEqual({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI' });
    expect('sessionToken' in resolve({ env: { ...env, AWS_SESSION_TOKEN: '' } }).credentials).toBe(false);
    const none = 's3://knowledge/p: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials)';
    expect(refusal(() => resolve({ env: { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE' } }))).toBe(none);
    expect(refusal(() => resolve({ env: { AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI', AWS_ACCESS_KEY_ID: ' ' } }))).toBe(none);
  });

  it('the timeout: positive and finite; everything else is kept', () => {
    expect(refusal(() => resolve({ timeoutMs: 0 }))).toBe('--s3-timeout must be positive, got 0');
    expect(refusal(() => resolve({ timeoutMs: -1 }))).toBe('--s3-timeout must be positive, got -1');
    expect(refusal(() => resolve({ timeoutMs: Number.POSITIVE_INFINITY }))).toBe('--s3-timeout must be positive, got Infinity');
    expect(resolve({ store: 's3://knowledge/a/b', timeoutMs: 0.5 })).toEqual({
      bucket: 'knowledge',
      prefix: 'a/b',
      endpoint: 'https://s3.us-east-1.amazonaws.com',
      region: 'us-east-1',
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI' },
      timeoutMs: 0.5,
    });
  });
});
