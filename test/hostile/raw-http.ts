// A raw HTTP/1.1 client for hostile tests: the request line is written byte
// for byte, so paths with NUL, backslashes, `..`, invalid UTF-8 or odd
// percent-encodings reach the server exactly as an attacker would send them
// (fetch and http.request normalise or refuse such paths first).

import { connect, type Socket } from 'node:net';

export interface RawResponse {
  readonly status: number;
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  /** The raw head, for byte-level comparison. */
  readonly head: string;
}

export interface RawRequest {
  readonly method?: string;
  /** The request target as bytes (a string is sent as UTF-8). */
  readonly target: string | Buffer;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: Buffer | string;
}

/** Sends one request on its own connection and reads the whole answer. */
export function rawRequest(port: number, req: RawRequest, timeoutMs = 10_000): Promise<RawResponse> {
  const target = typeof req.target === 'string' ? Buffer.from(req.target, 'utf8') : req.target;
  const body = req.body === undefined ? Buffer.alloc(0) : Buffer.from(req.body);
  const headerLines = Object.entries({
    host: `127.0.0.1:${port}`,
    connection: 'close',
    ...(body.length > 0 && req.headers?.['transfer-encoding'] === undefined ? { 'content-length': String(body.length) } : {}),
    ...req.headers,
  })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const head = Buffer.concat([
    Buffer.from(`${req.method ?? 'GET'} `, 'latin1'),
    target,
    Buffer.from(` HTTP/1.1\r\n${headerLines}\r\n`, 'latin1'),
  ]);
  return new Promise((resolve, reject) => {
    const socket: Socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms for ${target.toString('latin1').slice(0, 200)}`));
    }, timeoutMs);
    // Write without half-closing: some servers drop a request whose client already sent FIN.
    socket.on('connect', () => socket.write(Buffer.concat([head, body])));
    socket.on('end', () => socket.end());
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => {
      // A server that resets after answering still answered; parse what came.
      if (chunks.length === 0) {
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(parseResponse(Buffer.concat(chunks)));
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}

export function parseResponse(raw: Buffer): RawResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`incomplete HTTP response (${raw.length} bytes): ${raw.toString('latin1').slice(0, 200)}`);
  const head = raw.subarray(0, end).toString('latin1');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  if (!m) throw new Error(`bad status line: ${statusLine}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    const k = line.slice(0, i).trim().toLowerCase();
    const v = line.slice(i + 1).trim();
    headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
  }
  let body = raw.subarray(end + 4);
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = dechunk(body);
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  return { status: Number(m[1]), headers, body, head };
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', pos);
    if (eol < 0) break;
    const size = parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** Headers that legitimately differ between two otherwise identical answers. */
export const VOLATILE_HEADERS = ['date', 'x-request-id'] as const;

/** Status, headers (minus volatile ones) and body, as one comparable string. */
export function fingerprint(res: RawResponse, replace: readonly string[] = []): string {
  const headers = Object.entries(res.headers)
    .filter(([k]) => !(VOLATILE_HEADERS as readonly string[]).includes(k))
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}: ${v}`)
    .join('\n');
  let body = res.body.toString('latin1');
  for (const r of replace) if (r !== '') body = body.split(r).join('<PATH>');
  let head = headers;
  for (const r of replace) if (r !== '') head = head.split(r).join('<PATH>');
  // Content-Length follows the body: recompute after the path is masked.
  head = head.replace(/^content-length: \d+$/m, `content-length: ${Buffer.byteLength(body, 'latin1')}`);
  return `${res.status}\n${head}\n\n${body}`;
}
