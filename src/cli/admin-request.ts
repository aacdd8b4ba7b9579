// What the admin commands (`session create`, `explain`) share: the admin
// token from --admin-token-file or the environment, and one JSON request to
// the control plane whose error answers become KnowledgeErrors with the
// server's own code and message (so the exit code follows the error).

import { resolve } from 'node:path';
import { request } from 'undici';
import { KnowledgeError, isErrorCode } from '../core/errors.js';
import type { CliContext } from './context.js';
import { ADMIN_TOKEN_ENV, readTokenFile } from './token-file.js';

export async function adminToken(flag: string | undefined, ctx: CliContext): Promise<string> {
  if (flag !== undefined) return readTokenFile(resolve(ctx.cwd, flag), '--admin-token-file');
  const fromEnv = ctx.env[ADMIN_TOKEN_ENV]?.trim();
  if (fromEnv) return fromEnv;
  throw new KnowledgeError('invalid_argument', `an admin token is needed: --admin-token-file FILE or $${ADMIN_TOKEN_ENV}`);
}

/** Sends one admin request; the parsed JSON body on `expected` status, else throws the server's error. */
export async function adminRequest<T>(server: string, token: string, method: string, path: string, expected: number, body?: unknown): Promise<T> {
  const url = `${server.replace(/\/+$/, '')}${path}`;
  let res;
  try {
    res = await request(url, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new KnowledgeError('unavailable', `cannot reach the control plane at ${server}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new KnowledgeError('unavailable', `the control plane at ${server} answered HTTP ${res.statusCode} with a body that is not JSON`);
  }
  if (res.statusCode === expected) return parsed as T;
  const error = (parsed as { error?: { code?: unknown; message?: unknown } }).error;
  const code = isErrorCode(error?.code) ? error.code : 'unavailable';
  const message = typeof error?.message === 'string' ? error.message : `HTTP ${res.statusCode}`;
  throw new KnowledgeError(code, message);
}
