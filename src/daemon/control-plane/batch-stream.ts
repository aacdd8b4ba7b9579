// Incremental parser of a POST /v1/batch answer (framing in core/wire.ts):
// per requested path, in order, a JSON header line, then exactly `size`
// bytes. It yields a file only after its bytes have been hashed and match
// the header's sha256, so a caller never sees an unverified byte.
//
// Strict on purpose: a header that is not JSON, names a different path than
// the one requested at that position, claims more than `maxFileBytes`, a
// body whose hash differs, bytes after the last frame, or a stream that ends
// early all throw (`integrity` for wrong bytes/framing, `unavailable` for
// truncation). Everything yielded before the error stays valid; the caller
// treats the rest of the batch as failed.

import { createHash } from 'node:crypto';
import { KnowledgeError } from '../../core/errors.js';
import { MAX_PATH_BYTES } from '../../core/paths.js';
import { isSha256 } from '../../core/sha256.js';

export type BatchItem =
  | { readonly path: string; readonly missing: false; readonly sha256: string; readonly body: Buffer }
  | { readonly path: string; readonly missing: true };

/** A header line is a path (≤ MAX_PATH_BYTES, JSON-escaped at most 6×) plus a few fields. */
const MAX_HEADER_BYTES = MAX_PATH_BYTES * 6 + 256;
const NEWLINE = 0x0a;

function broken(message: string): KnowledgeError {
  return new KnowledgeError('integrity', `batch answer: ${message}`);
}

function parseHeader(line: Buffer, expected: string, maxFileBytes: number): { missing: true } | { missing: false; sha256: string; size: number } {
  let v: { path?: unknown; sha256?: unknown; size?: unknown; missing?: unknown };
  try {
    v = JSON.parse(line.toString('utf8')) as typeof v;
  } catch {
    throw broken(`frame header for ${expected} is not JSON`);
  }
  if (typeof v !== 'object' || v === null || v.path !== expected) throw broken(`expected a frame for ${expected}`);
  if (v.missing === true) return { missing: true };
  if (!isSha256(v.sha256)) throw broken(`frame header for ${expected} has no valid sha256`);
  if (typeof v.size !== 'number' || !Number.isSafeInteger(v.size) || v.size < 0) throw broken(`frame header for ${expected} has no valid size`);
  if (v.size > maxFileBytes) throw broken(`${expected}: ${v.size} bytes announced, more than the ${maxFileBytes} allowed`);
  return { missing: false, sha256: v.sha256, size: v.size };
}

/** Parses `body` as the answer for `paths`, verifying each file as it completes. */
export async function* parseBatchStream(body: AsyncIterable<Buffer>, paths: readonly string[], maxFileBytes: number): AsyncGenerator<BatchItem> {
  let index = 0;
  let header: Buffer[] = [];
  let headerBytes = 0;
  // The file being received.
  let target: { sha256: string; buf: Buffer; filled: number } | undefined;
  const finish = (): BatchItem => {
    const t = target as NonNullable<typeof target>;
    target = undefined;
    const path = paths[index++] as string;
    const actual = createHash('sha256').update(t.buf).digest('hex');
    if (actual !== t.sha256) throw broken(`${path}: bytes do not match the sha256 in their header`);
    return { path, missing: false, sha256: t.sha256, body: t.buf };
  };
  for await (const chunk of body) {
    let at = 0;
    while (at < chunk.length) {
      if (target !== undefined) {
        const take = Math.min(chunk.length - at, target.buf.length - target.filled);
        chunk.copy(target.buf, target.filled, at, at + take);
        target.filled += take;
        at += take;
        if (target.filled === target.buf.length) yield finish();
        continue;
      }
      if (index >= paths.length) throw broken(`bytes after the last of ${paths.length} frames`);
      const nl = chunk.indexOf(NEWLINE, at);
      const end = nl < 0 ? chunk.length : nl;
      headerBytes += end - at;
      if (headerBytes > MAX_HEADER_BYTES) throw broken(`frame header for ${paths[index]} longer than ${MAX_HEADER_BYTES} bytes`);
      header.push(chunk.subarray(at, end));
      at = end;
      if (nl < 0) continue;
      at = nl + 1;
      const line = header.length === 1 ? (header[0] as Buffer) : Buffer.concat(header, headerBytes);
      header = [];
      headerBytes = 0;
      const path = paths[index] as string;
      const parsed = parseHeader(line, path, maxFileBytes);
      if (parsed.missing) {
        index++;
        yield { path, missing: true };
        continue;
      }
      target = { sha256: parsed.sha256, buf: Buffer.allocUnsafeSlow(parsed.size), filled: 0 };
      if (parsed.size === 0) yield finish();
    }
  }
  if (index < paths.length || target !== undefined || headerBytes > 0) {
    throw new KnowledgeError('unavailable', `batch answer cut short after ${index} of ${paths.length} files`);
  }
}
