// The PostgreSQL state URL of `serve --state` and `gc --state`: from the
// flag, else $KNOWLEDGEFS_STATE_URL. A password on the command line (in the
// userinfo or a query parameter) is refused: every local user can read argv.

import { KnowledgeError } from '../core/errors.js';
import { isStateUrl } from '../server/options.js';
import { secretInUrl } from '../server/pg-state-url.js';

export const STATE_URL_ENV = 'KNOWLEDGEFS_STATE_URL';

/** Checks a postgres:// URL given to --state: no secret in it. */
export function checkStateUrlFlag(url: string): string {
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

/** The state URL from $KNOWLEDGEFS_STATE_URL, or undefined when it is unset. */
export function stateUrlFromEnv(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const fromEnv = env[STATE_URL_ENV]?.trim();
  if (fromEnv === undefined || fromEnv === '') return undefined;
  if (!isStateUrl(fromEnv)) throw new KnowledgeError('invalid_argument', `$${STATE_URL_ENV} must be a postgres:// URL`);
  return fromEnv;
}
