// A page of the read tool: a file's text (UTF-8, decoded as TextDecoder
// does), cut by characters (code points), never inside a surrogate pair.
// The control plane cuts it, since it holds the whole file and its hash: a
// read then moves one page's bytes, not the file's (a 40 MiB file took 56 MB
// of base64 per page). The daemon checks the page against `contentSha256`.

import type { ReadPage } from './wire.js';
import { sha256Hex } from './sha256.js';

/** Slices `text` by code points: `limit` characters after skipping `offset`. */
export function sliceChars(text: string, offset: number, limit: number): { content: string; totalChars: number } {
  let chars = 0;
  let start = -1;
  let end = -1;
  for (let i = 0; i < text.length; ) {
    if (chars === offset) start = i;
    if (chars === offset + limit) end = i;
    const code = text.charCodeAt(i);
    i += code >= 0xd800 && code <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
    chars++;
  }
  if (start < 0) start = text.length;
  if (end < 0) end = text.length;
  return { content: text.slice(start, end), totalChars: chars };
}

/** The page of `bytes` from character `offset`, at most `limit` characters. */
export function readPage(bytes: Uint8Array, offset: number, limit: number): ReadPage {
  const { content, totalChars } = sliceChars(new TextDecoder('utf-8').decode(bytes), offset, limit);
  return { content, offset, totalChars, contentSha256: pageSha256(content) };
}

/** sha256 of a page's content as UTF-8: what the page carries, so the reader can tell it arrived whole. */
export function pageSha256(content: string): string {
  return sha256Hex(Buffer.from(content, 'utf8'));
}
