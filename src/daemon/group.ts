// `--group NAME|GID`: the one group (besides the daemon's user and root) that
// may read the mount. Names are resolved through the system's group database
// (`getent group`, so NSS sources such as LDAP count too).

import { execFileSync } from 'node:child_process';
import { KnowledgeError } from '../core/errors.js';

/** The gid of `text` (a group name or a number). */
export function resolveGroup(text: string): number {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) {
    const gid = Number(trimmed);
    if (!Number.isSafeInteger(gid) || gid > 0xfffffffe) throw new KnowledgeError('invalid_argument', `--group ${text}: not a valid gid`);
    return gid;
  }
  if (!/^[A-Za-z_][A-Za-z0-9_.-]*\$?$/.test(trimmed)) throw new KnowledgeError('invalid_argument', `--group "${text}": not a group name or gid`);
  let line: string;
  try {
    line = execFileSync('getent', ['group', trimmed], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    throw new KnowledgeError('invalid_argument', `--group ${trimmed}: no such group (getent group ${trimmed} found nothing)`);
  }
  const gid = Number(line.split(':')[2]);
  if (!Number.isSafeInteger(gid)) throw new KnowledgeError('invalid_argument', `--group ${trimmed}: the group database has no usable gid for it`);
  return gid;
}
