// `mount-helper --user NAME|UID[:GROUP|GID]`: who the FUSE daemon runs as
// once the privileged helper has mounted. Like `docker run --user`: a name
// is looked up in the user database (`getent passwd`, so NSS sources count),
// its primary group unless a group is given; a bare uid with no database
// entry needs its gid spelled out (containers often have no passwd line).

import { execFileSync } from 'node:child_process';
import { KnowledgeError } from '../core/errors.js';
import { resolveGroup } from './group.js';

export interface RunAsUser {
  readonly uid: number;
  readonly gid: number;
}

function passwdEntry(nameOrUid: string): { uid: number; gid: number } | undefined {
  try {
    const line = execFileSync('getent', ['passwd', nameOrUid], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    const [, , uid, gid] = line.split(':');
    return { uid: Number(uid), gid: Number(gid) };
  } catch {
    return undefined;
  }
}

export function resolveRunAsUser(text: string): RunAsUser {
  const [userPart = '', groupPart, ...rest] = text.trim().split(':');
  if (userPart === '' || rest.length > 0 || groupPart === '') throw new KnowledgeError('invalid_argument', `--user "${text}": expected NAME|UID or NAME|UID:GROUP|GID`);
  const numeric = /^\d+$/.test(userPart);
  if (!numeric && !/^[A-Za-z_][A-Za-z0-9_.-]*\$?$/.test(userPart)) throw new KnowledgeError('invalid_argument', `--user "${text}": not a user name or uid`);
  const entry = passwdEntry(userPart);
  const uid = numeric ? Number(userPart) : entry?.uid;
  if (uid === undefined) throw new KnowledgeError('invalid_argument', `--user ${userPart}: no such user (getent passwd ${userPart} found nothing)`);
  if (!Number.isSafeInteger(uid) || uid > 0xfffffffe) throw new KnowledgeError('invalid_argument', `--user ${text}: not a valid uid`);
  if (uid === 0) throw new KnowledgeError('invalid_argument', `--user ${text}: the daemon must run as an ordinary user, not root (that is the point of mount-helper)`);
  const gid = groupPart !== undefined ? resolveGroup(groupPart) : entry?.gid;
  if (gid === undefined || !Number.isSafeInteger(gid)) {
    throw new KnowledgeError('invalid_argument', `--user ${text}: uid ${uid} has no entry in the user database, so give its group too (--user ${uid}:GID)`);
  }
  if (gid === 0) throw new KnowledgeError('invalid_argument', `--user ${text}: the daemon must not run in root's group (gid 0); give the user's own group`);
  return { uid, gid };
}
