// Where the object store is and how to sign for it: `s3://BUCKET/PREFIX`,
// an endpoint, and the standard AWS credential environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN,
// AWS_REGION or AWS_DEFAULT_REGION). The endpoint comes from --s3-endpoint,
// else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else AWS's regional endpoint.
// Addressing is always path-style (http://endpoint/BUCKET/KEY), which S3,
// MinIO, R2, GCS interoperability and the rest all accept.
//
// Credentials never appear in messages; every problem here is a config error
// (exit 2) naming the flag or variable.

import { KnowledgeError } from '../../core/errors.js';

export interface StoreLocation {
  readonly bucket: string;
  /** Key prefix without leading or trailing slash; '' for the bucket root. */
  readonly prefix: string;
}

export interface Credentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface S3Config extends StoreLocation {
  /** `http(s)://host[:port]` without a trailing slash. */
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: Credentials;
  /** Longest one request may take, from sending to the last body byte. */
  readonly timeoutMs: number;
}

// S3's bucket naming rules (lower case, 3-63, no leading/trailing dot or dash).
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT = /^[A-Za-z0-9!_.*'()-]+$/;

/** Parses `s3://BUCKET` or `s3://BUCKET/PREFIX`; `flag` labels messages. */
export function parseStoreUrl(text: string, flag = '--store'): StoreLocation {
  const m = /^s3:\/\/([^/]*)(?:\/(.*))?$/.exec(text);
  if (m === null) throw new KnowledgeError('config', `${flag} "${text}": expected s3://BUCKET or s3://BUCKET/PREFIX`);
  const bucket = m[1] as string;
  if (!BUCKET.test(bucket) || bucket.includes('..')) {
    throw new KnowledgeError('config', `${flag} "${text}": "${bucket}" is not a valid bucket name (3-63 characters: a-z, 0-9, "." and "-")`);
  }
  const prefix = (m[2] ?? '').replace(/\/+$/, '');
  if (prefix !== '') {
    for (const segment of prefix.split('/')) {
      if (segment === '.' || segment === '..' || !PREFIX_SEGMENT.test(segment)) {
        throw new KnowledgeError('config', `${flag} "${text}": prefix segment "${segment}" is not allowed (use letters, digits and !_.*'()-, no empty, "." or ".." segments)`);
      }
    }
  }
  return { bucket, prefix };
}

/** The store as `s3://bucket/prefix`, for messages. */
export function formatStoreUrl(location: StoreLocation): string {
  return `s3://${location.bucket}${location.prefix === '' ? '' : `/${location.prefix}`}`;
}

export function parseEndpoint(text: string, flag: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new KnowledgeError('config', `${flag}: not a URL: ${text}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new KnowledgeError('config', `${flag}: expected http:// or https://, got ${url.protocol}`);
  if (url.username !== '' || url.password !== '') throw new KnowledgeError('config', `${flag}: credentials do not belong in the URL; use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`);
  // Stryker disable next-line ConditionalExpression,StringLiteral: an http(s) URL's pathname is never empty (at least '/'); the test is for other schemes' sake
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '') throw new KnowledgeError('config', `${flag}: expected only scheme, host and port (the bucket comes from --store), got ${text}`);
  return `${url.protocol}//${url.host}`;
}

export interface S3ConfigInput {
  readonly store: string;
  readonly endpoint?: string | undefined;
  readonly timeoutMs: number;
  readonly env: Readonly<Record<string, string | undefined>>;
}

function envValue(env: S3ConfigInput['env'], name: string): string | undefined {
  const v = env[name]?.trim();
  // Stryker disable next-line ConditionalExpression: when v is undefined, returning v is returning undefined
  return v === undefined || v === '' ? undefined : v;
}

export function resolveS3Config(input: S3ConfigInput): S3Config {
  const location = parseStoreUrl(input.store);
  const region = envValue(input.env, 'AWS_REGION') ?? envValue(input.env, 'AWS_DEFAULT_REGION') ?? 'us-east-1';
  if (!/^[a-z0-9-]{1,40}$/.test(region)) throw new KnowledgeError('config', `AWS_REGION "${region}": not a region name`);
  let endpoint: string;
  if (input.endpoint !== undefined) endpoint = parseEndpoint(input.endpoint, '--s3-endpoint');
  else {
    const fromEnv = envValue(input.env, 'AWS_ENDPOINT_URL_S3') ?? envValue(input.env, 'AWS_ENDPOINT_URL');
    endpoint = fromEnv !== undefined ? parseEndpoint(fromEnv, 'AWS_ENDPOINT_URL_S3') : `https://s3.${region}.amazonaws.com`;
  }
  const accessKeyId = envValue(input.env, 'AWS_ACCESS_KEY_ID');
  const secretAccessKey = envValue(input.env, 'AWS_SECRET_ACCESS_KEY');
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    throw new KnowledgeError('config', `${formatStoreUrl(location)}: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials)`);
  }
  const sessionToken = envValue(input.env, 'AWS_SESSION_TOKEN');
  if (!Number.isFinite(input.timeoutMs) || input.timeoutMs <= 0) throw new KnowledgeError('config', `--s3-timeout must be positive, got ${input.timeoutMs}`);
  return {
    ...location,
    endpoint,
    region,
    credentials: { accessKeyId, secretAccessKey, ...(sessionToken !== undefined ? { sessionToken } : {}) },
    timeoutMs: input.timeoutMs,
  };
}
