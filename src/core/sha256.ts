// sha256 in the form every part of knowledgefs names content by: 64
// lowercase hex digits.

import { createHash } from 'node:crypto';

/**
 * True for exactly 64 lowercase hex digits. A loop rather than a regex: the
 * daemon checks every file of a plan with it (100 000 times at scale).
 */
export function isSha256(text: unknown): text is string {
  if (typeof text !== 'string' || text.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = text.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

export function sha256Hex(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}
