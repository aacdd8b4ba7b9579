// The mount daemon's user, as the operator names it to the client: when the
// daemon runs as a user of its own (mount-helper --user kfs), its socket and
// the socket's directory are that user's, and the client must trust them
// without trusting whoever happens to own a socket it finds. So the uid is
// never read off the socket: it comes from `daemonUser` (the CLI's
// --daemon-user) or $KNOWLEDGEFS_DAEMON_USER, a uid or a user name looked up
// in /etc/passwd (root's file), and is trusted beside root and the caller.

import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from './errors.js';

export const DAEMON_USER_ENV = 'KNOWLEDGEFS_DAEMON_USER';

/** The uid of `name` in the passwd text, or undefined. */
export function uidInPasswd(passwd: string, name: string): number | undefined {
  for (const line of passwd.split('\n')) {
    const [user, , uid] = line.split(':');
    if (user === name && uid !== undefined && /^\d+$/.test(uid)) return Number(uid);
  }
  return undefined;
}

/**
 * The uid named by `given` (else $KNOWLEDGEFS_DAEMON_USER): a whole number, or
 * a user in /etc/passwd. Undefined when neither names one. An unknown name is
 * an error, never a guess.
 */
export function daemonUid(
  given: string | number | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
  passwd: () => string = () => readFileSync('/etc/passwd', 'utf8'),
): number | undefined {
  const spec = given === undefined || given === '' ? env[DAEMON_USER_ENV] : given;
  if (spec === undefined || spec === '') return undefined;
  const from = given === undefined || given === '' ? DAEMON_USER_ENV : 'the daemon user';
  if (typeof spec === 'number' || /^\d+$/.test(spec)) {
    const uid = Number(spec);
    if (!Number.isSafeInteger(uid) || uid < 0 || uid > 0xffffffff) throw new InvalidArgumentError(`${from} ${spec} is not a uid`);
    return uid;
  }
  const uid = uidInPasswd(passwd(), spec);
  if (uid === undefined) throw new InvalidArgumentError(`${from} ${spec} is not a user in /etc/passwd (give the daemon's user name or uid)`);
  return uid;
}
