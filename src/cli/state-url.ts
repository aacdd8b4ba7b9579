// The PostgreSQL URL of `serve --state` and `audit --state`: given on the
// command line it must carry no password (in the userinfo or a query
// parameter such as ?password= or ?sslpassword=), since every local user can
// read argv; the whole URL may come from $KNOWLEDGEFS_STATE_URL instead.

import { KnowledgeError } from '../core/errors.js';
import { isStateUrl } from '../server/options.js';
import { secretInUrl } from '../server/state/postgres/pg-state-url.js';
import type { CliContext } from './context.js';

export const STATE_URL_ENV = 'KNOWLEDGEFS_STATE_URL';

/** A postgres:// URL given as --state, refused when it carries a secret (the message never repeats it). */
export function checkedStateUrl(url: string): string {
  let secret: string | undefined;
  try {
    secret = secretInUrl(url);
  } catch {
    throw new KnowledgeError('invalid_argument', '--state: not a valid URL (expected postgres://USER@HOST:PORT/DATABASE)');
  }
  if (secret !== undefined) {
    throw new KnowledgeError(
      'invalid_argument',
      `--state: the URL carries ${secret}, which every local user can read on the command line; put the whole URL in $${STATE_URL_ENV}, or the password in $PGPASSWORD or ~/.pgpass`,
    );
  }
  return url;
}

/** $KNOWLEDGEFS_STATE_URL, if set (it must be a postgres:// URL). */
export function stateUrlFromEnv(ctx: CliContext): string | undefined {
  const fromEnv = ctx.env[STATE_URL_ENV]?.trim();
  if (fromEnv === undefined || fromEnv === '') return undefined;
  if (!isStateUrl(fromEnv)) throw new KnowledgeError('invalid_argument', `$${STATE_URL_ENV} must be a postgres:// URL`);
  return fromEnv;
}
