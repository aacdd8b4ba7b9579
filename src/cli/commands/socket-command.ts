// Shared bits of the commands that talk to the mount daemon's control socket
// (`read`, `manifest`, `reminder`, `status`): one call
// through the client library with the --json error shape, count parsing and
// shell quoting for hints.

import { KnowledgeClient } from '../../client/knowledge-client.js';
import { KnowledgeError, isKnowledgeError } from '../../core/errors.js';
import { DAEMON_USER_ENV } from '../../client/daemon-user.js';
import { controlSocketPath } from '../../client/socket-path.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT_FOR_CODE } from '../exit-codes.js';

/** A non-negative integer in [min, max]. */
export function parseCount(text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(text.trim())) throw new KnowledgeError('invalid_argument', `"${text}" is not a whole number`);
  const n = Number(text.trim());
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new KnowledgeError('invalid_argument', `${text} is out of range (${min}..${max === Number.MAX_SAFE_INTEGER ? '' : max})`);
  }
  return n;
}

export interface SocketCommandOptions {
  socket?: string;
  daemonUser?: string;
  json?: boolean;
}

/** The --daemon-user option every command that talks to the control socket takes. */
export const DAEMON_USER_OPTION = ['--daemon-user <user>', "the mount daemon's user (name or uid) when it runs as its own user: its socket directory is trusted (default: $KNOWLEDGEFS_DAEMON_USER)"] as const;

/**
 * One call to the daemon through a client that is closed afterwards. With
 * --json a KnowledgeError is printed as {"ok": false, error} and its exit code
 * set, and the result is undefined; otherwise errors are thrown (main prints
 * them and exits with their code).
 */
export async function callDaemon<T>(
  ctx: CliContext,
  result: CommandResult,
  opts: SocketCommandOptions,
  call: (client: KnowledgeClient) => Promise<T>,
): Promise<T | undefined> {
  let client: KnowledgeClient;
  try {
    client = new KnowledgeClient({ socketPath: controlSocketPath(opts.socket, ctx.env), cwd: ctx.cwd, daemonUser: opts.daemonUser ?? ctx.env[DAEMON_USER_ENV] });
  } catch (err) {
    return reportError(ctx, result, opts, err);
  }
  try {
    return await call(client);
  } catch (err) {
    return reportError(ctx, result, opts, err);
  } finally {
    client.close();
  }
}

function reportError(ctx: CliContext, result: CommandResult, opts: SocketCommandOptions, err: unknown): undefined {
  if (!opts.json || !isKnowledgeError(err)) throw err;
  ctx.stdout.write(`${JSON.stringify({ ok: false, error: { code: err.code, message: err.message } })}\n`);
  result.code = EXIT_FOR_CODE[err.code];
  return undefined;
}

/** Quotes `text` for a POSIX shell when it needs it. */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./@%+=:,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}
