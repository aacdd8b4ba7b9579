// ObjectStore over the S3 protocol: undici for HTTP, aws4 for Signature V4,
// path-style addressing (endpoint/BUCKET/KEY), GET (with If-None-Match),
// PUT, HEAD and ListObjectsV2, and for `gc` the listing with sizes and ages
// and DeleteObjects. No retries here: the
// publication poller, the daemon and `publish` each retry in their own way.
//
// Every request has a deadline (`timeoutMs`, from sending to the last body
// byte), every body read has a size cap checked while it streams in, and
// every failure names the bucket and key. Credentials are only ever used for
// signing, never put into a message.

import aws4 from 'aws4';
import { createHash } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import { ObjectStoreError, type GetOptions, type ListedObject, type ObjectStore, type StoredObject, type SweepableStore } from './object-store.js';
import { formatStoreUrl, type S3Config } from './store-config.js';

/** Cap of one ListObjectsV2 page (1 000 keys of at most 1 KiB each, plus markup). */
const LIST_PAGE_MAX_BYTES = 4 * 1024 * 1024;
/** Cap of an error answer we read to quote its S3 error code. */
const ERROR_BODY_MAX_BYTES = 64 * 1024;
/** Keys one DeleteObjects request may name (S3's limit). */
export const MAX_DELETE_KEYS = 1_000;

/** Drops a body we will not read, without an unhandled 'error' from the abort. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** Each segment RFC 3986-encoded, exactly as Signature V4 canonicalises it, so the path sent is the path signed. */
function encodeKeyPath(key: string): string {
  return key
    .split('/')
    .map((segment) => encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');
}

function decodeXml(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|apos|#(\d+)|#x([0-9a-fA-F]+));/g, (_m, name: string, dec?: string, hex?: string) => {
    if (dec !== undefined) return String.fromCodePoint(Number(dec));
    if (hex !== undefined) return String.fromCodePoint(parseInt(hex, 16));
    return ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" } as Record<string, string>)[name] ?? '';
  });
}

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function xmlField(xml: string, name: string): string | undefined {
  const m = new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml);
  return m === null ? undefined : decodeXml(m[1] as string);
}

export class S3ObjectStore implements ObjectStore, SweepableStore {
  readonly description: string;
  private readonly dispatcher: Dispatcher;
  private readonly host: string;
  private readonly root: string;

  constructor(
    private readonly config: S3Config,
    dispatcher?: Dispatcher,
  ) {
    this.description = `${formatStoreUrl(config)} at ${config.endpoint}`;
    this.dispatcher = dispatcher ?? new Agent({ connections: 32, keepAliveTimeout: 10_000 });
    this.host = new URL(config.endpoint).host;
    this.root = `/${config.bucket}`;
  }

  /** `s3://bucket/prefix/key`, for messages. */
  private where(key: string): string {
    return `${formatStoreUrl(this.config)}/${key}`;
  }

  private fullKey(key: string): string {
    return this.config.prefix === '' ? key : `${this.config.prefix}/${key}`;
  }

  /** A bucket key as the store names it (fullKey undone); one outside the prefix stays as it is. */
  private storeKey(bucketKey: string): string {
    const prefix = this.config.prefix === '' ? '' : `${this.config.prefix}/`;
    return bucketKey.startsWith(prefix) ? bucketKey.slice(prefix.length) : bucketKey;
  }

  /** The request path of one object: `/BUCKET/PREFIX/KEY`, encoded as it is signed. */
  private objectPath(key: string): string {
    return `${this.root}/${encodeKeyPath(this.fullKey(key))}`;
  }

  private async send(
    method: 'GET' | 'PUT' | 'HEAD' | 'POST',
    path: string,
    what: string,
    options: { headers?: Record<string, string>; body?: Buffer } = {},
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Dispatcher.ResponseData['body'] }> {
    const signed = aws4.sign(
      {
        host: this.host,
        path,
        method,
        service: 's3',
        region: this.config.region,
        headers: { ...(options.headers ?? {}) },
        ...(options.body !== undefined ? { body: options.body } : {}),
      },
      this.config.credentials,
    );
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(signed.headers ?? {})) {
      // undici sets Host from the URL itself.
      if (name.toLowerCase() !== 'host' && value !== undefined) headers[name] = String(value);
    }
    try {
      const res = await request(`${this.config.endpoint}${path}`, {
        method,
        headers,
        body: options.body ?? null,
        dispatcher: this.dispatcher,
        signal: AbortSignal.timeout(this.config.timeoutMs),
      });
      return { status: res.statusCode, headers: res.headers, body: res.body };
    } catch (err) {
      throw this.failure(err, method, what);
    }
  }

  private failure(err: unknown, method: string, what: string): ObjectStoreError {
    if (err instanceof ObjectStoreError) return err;
    const name = (err as Error | undefined)?.name;
    if (name === 'TimeoutError' || name === 'AbortError') {
      return new ObjectStoreError('timeout', `${method} ${what}: no complete answer from ${this.config.endpoint} within ${this.config.timeoutMs} ms (--s3-timeout)`, { cause: err });
    }
    const code = (err as NodeJS.ErrnoException | undefined)?.code ?? (err as { cause?: { code?: string } } | undefined)?.cause?.code;
    const detail = code ?? (err instanceof Error ? err.message : String(err));
    return new ObjectStoreError('unreachable', `${method} ${what}: cannot reach ${this.config.endpoint} (${detail})`, { cause: err });
  }

  /** Reads a body, refusing it past `maxBytes` (checked as it streams in). */
  private async readBody(body: Dispatcher.ResponseData['body'], maxBytes: number, declared: string | string[] | undefined, what: string, method: string): Promise<Buffer> {
    const length = typeof declared === 'string' ? Number(declared) : NaN;
    if (Number.isFinite(length) && length > maxBytes) {
      discard(body);
      throw new ObjectStoreError('too_large', `${method} ${what}: object is ${length} bytes, more than the ${maxBytes} expected`);
    }
    const parts: Buffer[] = [];
    let total = 0;
    try {
      for await (const chunk of body) {
        total += (chunk as Buffer).length;
        if (total > maxBytes) {
          discard(body);
          throw new ObjectStoreError('too_large', `${method} ${what}: answer longer than the ${maxBytes} bytes expected`);
        }
        parts.push(chunk as Buffer);
      }
    } catch (err) {
      throw this.failure(err, method, what);
    }
    return Buffer.concat(parts, total);
  }

  private async statusError(res: { status: number; headers: Record<string, string | string[] | undefined>; body: Dispatcher.ResponseData['body'] }, method: string, what: string): Promise<ObjectStoreError> {
    let code = '';
    try {
      const text = (await this.readBody(res.body, ERROR_BODY_MAX_BYTES, undefined, what, method)).toString('utf8');
      const s3Code = xmlField(text, 'Code');
      if (s3Code !== undefined) code = ` ${s3Code}`;
    } catch {
      // The status alone says enough.
    }
    return new ObjectStoreError('status', `${method} ${what}: ${this.config.endpoint} answered HTTP ${res.status}${code}`);
  }

  async get(key: string, options: GetOptions): Promise<StoredObject | null | 'not-modified'> {
    const what = this.where(key);
    const headers: Record<string, string> = options.ifNoneMatch !== undefined ? { 'if-none-match': options.ifNoneMatch } : {};
    const res = await this.send('GET', this.objectPath(key), what, { headers });
    if (res.status === 404) {
      discard(res.body);
      return null;
    }
    if (res.status === 304) {
      discard(res.body);
      return 'not-modified';
    }
    if (res.status !== 200) throw await this.statusError(res, 'GET', what);
    const bytes = await this.readBody(res.body, options.maxBytes, res.headers['content-length'], what, 'GET');
    const etag = res.headers['etag'];
    return { bytes, etag: typeof etag === 'string' ? etag : undefined };
  }

  async put(key: string, body: Buffer, contentType = 'application/octet-stream'): Promise<void> {
    const what = this.where(key);
    const res = await this.send('PUT', this.objectPath(key), what, { headers: { 'content-type': contentType }, body });
    if (res.status !== 200 && res.status !== 204) throw await this.statusError(res, 'PUT', what);
    await res.body.dump();
  }

  async has(key: string): Promise<boolean> {
    const what = this.where(key);
    const res = await this.send('HEAD', this.objectPath(key), what);
    await res.body.dump();
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    throw new ObjectStoreError('status', `HEAD ${what}: ${this.config.endpoint} answered HTTP ${res.status}`);
  }

  async lastModified(key: string): Promise<number | null> {
    const what = this.where(key);
    const res = await this.send('HEAD', this.objectPath(key), what);
    await res.body.dump();
    if (res.status === 404) return null;
    if (res.status !== 200) throw new ObjectStoreError('status', `HEAD ${what}: ${this.config.endpoint} answered HTTP ${res.status}`);
    const header = res.headers['last-modified'];
    const at = typeof header === 'string' ? Date.parse(header) : NaN;
    if (!Number.isFinite(at)) throw new ObjectStoreError('garbage', `HEAD ${what}: ${this.config.endpoint} answered without a valid Last-Modified`);
    return at;
  }

  async *list(prefix: string): AsyncIterable<string> {
    for await (const entry of this.listObjects(prefix)) yield entry.key;
  }

  async *listObjects(prefix: string): AsyncIterable<ListedObject> {
    const full = this.fullKey(prefix);
    const what = `${this.where(prefix)}*`;
    let token: string | undefined;
    do {
      const query = new URLSearchParams({ 'list-type': '2', prefix: full });
      if (token !== undefined) query.set('continuation-token', token);
      // aws4 wants the query in canonical (sorted) order.
      query.sort();
      const res = await this.send('GET', `${this.root}?${query.toString().replace(/\+/g, '%20')}`, what);
      if (res.status !== 200) throw await this.statusError(res, 'LIST', what);
      const xml = (await this.readBody(res.body, LIST_PAGE_MAX_BYTES, res.headers['content-length'], what, 'LIST')).toString('utf8');
      if (!xml.includes('<ListBucketResult')) throw new ObjectStoreError('garbage', `LIST ${what}: ${this.config.endpoint} answered something that is not a ListObjectsV2 result`);
      for (const m of xml.matchAll(/<Contents>([\s\S]*?)<\/Contents>/g)) {
        const entry = m[1] as string;
        const rawKey = xmlField(entry, 'Key');
        if (rawKey === undefined || !rawKey.startsWith(full)) continue;
        const size = Number(xmlField(entry, 'Size'));
        const lastModified = Date.parse(xmlField(entry, 'LastModified') ?? '');
        if (!Number.isSafeInteger(size) || size < 0 || !Number.isFinite(lastModified)) {
          throw new ObjectStoreError('garbage', `LIST ${what}: an entry without a valid Size or LastModified (${rawKey.slice(0, 200)})`);
        }
        yield { key: this.storeKey(rawKey), size, lastModified };
      }
      const truncated = xmlField(xml, 'IsTruncated') === 'true';
      token = truncated ? xmlField(xml, 'NextContinuationToken') : undefined;
      if (truncated && token === undefined) throw new ObjectStoreError('garbage', `LIST ${what}: truncated answer without a continuation token`);
    } while (token !== undefined);
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    if (keys.length > MAX_DELETE_KEYS) throw new ObjectStoreError('too_large', `DELETE: ${keys.length} keys in one request, at most ${MAX_DELETE_KEYS}`);
    const what = `${this.where(keys[0] as string)} and ${keys.length - 1} more`;
    const objects = keys.map((key) => `<Object><Key>${escapeXml(this.fullKey(key))}</Key></Object>`).join('');
    const body = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>true</Quiet>${objects}</Delete>`, 'utf8');
    // S3 requires a Content-MD5 of a DeleteObjects body.
    const md5 = createHash('md5').update(body).digest('base64');
    const res = await this.send('POST', `${this.root}?delete=`, what, { headers: { 'content-type': 'application/xml', 'content-md5': md5 }, body });
    if (res.status !== 200) throw await this.statusError(res, 'DELETE', what);
    const xml = (await this.readBody(res.body, LIST_PAGE_MAX_BYTES, res.headers['content-length'], what, 'DELETE')).toString('utf8');
    // A 200 can still report per-key failures.
    const failed = /<Error>([\s\S]*?)<\/Error>/.exec(xml);
    if (failed !== null) {
      const entry = failed[1] as string;
      // The answer names the bucket's key; where() adds the prefix back.
      const key = xmlField(entry, 'Key');
      throw new ObjectStoreError('status', `DELETE ${this.where(key === undefined ? '?' : this.storeKey(key))}: ${this.config.endpoint} refused it (${xmlField(entry, 'Code') ?? 'no code'})`);
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}
