// Where the daemon's local control socket lives when --socket is not given.
// The read tool, manifest and reminder commands use the same rule, so an
// agent harness needs no configuration in the common case.

import { join } from 'node:path';

export const SOCKET_ENV = 'KNOWLEDGEFS_SOCKET';

export function defaultSocketPath(env: Readonly<Record<string, string | undefined>>, uid: number, tmpdir: string): string {
  const fromEnv = env[SOCKET_ENV];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  return uid === 0 ? '/run/knowledgefs/control.sock' : join(tmpdir, `knowledgefs-${uid}`, 'control.sock');
}
