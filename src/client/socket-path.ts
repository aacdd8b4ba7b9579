// Which control socket this process talks to (or, for `mount`, serves): the
// path given (--socket, or the client library's `socketPath`) unless it is
// missing or empty, else $KNOWLEDGEFS_SOCKET, else the standard path for this
// user (the rule itself is core/local/socket-path.ts). Every command and the
// client library ask here, so they cannot disagree.

import { tmpdir } from 'node:os';
import { defaultSocketPath } from '../core/local/socket-path.js';

export function controlSocketPath(given: string | undefined, env: Readonly<Record<string, string | undefined>> = process.env): string {
  if (given !== undefined && given !== '') return given;
  return defaultSocketPath(env, process.getuid?.() ?? -1, tmpdir());
}
