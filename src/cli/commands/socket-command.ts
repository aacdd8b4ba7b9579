// Shared bits of the commands that talk to the mount daemon's control socket
// (`read`, `manifest`, `reminder`): the socket path rule, count parsing,
// the --json error shape and shell quoting for hints.

import { tmpdir } from 'node:os';
import { KnowledgeError } from '../../core/errors.js';
import { defaultSocketPath } from '../../core/socket-path.js';
import type { CliContext } from '../context.js';

export function resolveSocketPath(flag: string | undefined, ctx: CliContext): string {
  if (flag !== undefined && flag !== '') return flag;
  return defaultSocketPath(ctx.env, process.getuid?.() ?? -1, tmpdir());
}

/** A non-negative integer in [min, max]. */
export function parseCount(text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(text.trim())) throw new KnowledgeError('invalid_argument', `"${text}" is not a whole number`);
  const n = Number(text.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new KnowledgeError('invalid_argument', `${text} is out of range (${min}..${max === Number.MAX_SAFE_INTEGER ? '' : max})`);
  }
  return n;
}

export function writeJsonError(ctx: CliContext, err: KnowledgeError): void {
  ctx.stdout.write(`${JSON.stringify({ ok: false, error: { code: err.code, message: err.message } })}\n`);
}

/** Quotes `text` for a POSIX shell when it needs it. */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./@%+=:,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}
