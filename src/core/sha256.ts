// sha256 in the form every part of knowledgefs names content by: 64
// lowercase hex digits.

import { createHash } from 'node:crypto';

const SHA256 = /^[0-9a-f]{64}$/;

export function isSha256(text: unknown): text is string {
  return typeof text === 'string' && SHA256.test(text);
}

export function sha256Hex(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}
