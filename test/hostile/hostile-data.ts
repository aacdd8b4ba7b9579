// The data directory the hostile suites attack, with canaries planted where a
// traversal would land: next to DIR (its parent), at DIR's root, in
// DIR/teams/ outside any pack, behind symlinks inside a pack, and in the
// server's own files (directory.json, state, audit log). Any response
// carrying a canary marker is an escape.
//
//   ROOT/CANARY.txt                  outside DIR, next to it
//   ROOT/etc/passwd                  outside DIR
//   ROOT/secretdir/secret.md         outside DIR, target of a symlinked dir
//   ROOT/data/                       DIR
//   ROOT/data/CANARY.txt             DIR root, not in a pack
//   ROOT/data/teams/CANARY.txt       teams/, not in a pack
//   ROOT/data/account/link.md        → ../../CANARY.txt (symlink: must be skipped)
//   ROOT/data/account/linkdir        → ../../secretdir  (symlink: must be skipped)
//   ROOT/data/directory.json         holds a canary user name

import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { directoryJsonOf } from '../helpers/data-dir.js';

export interface HostileData {
  readonly root: string;
  readonly dataDir: string;
  /** Every canary marker: none may ever appear in an answer. */
  readonly markers: readonly string[];
  /** Pack files by `<scope>/<path>`. */
  readonly files: ReadonlyMap<string, Buffer>;
  cleanup(): Promise<void>;
}

export const TEAMS = { payments: 'Payments', search: 'Search', storage: 'Storage' } as const;

export async function makeHostileData(): Promise<HostileData> {
  const root = await mkdtemp(join(tmpdir(), 'kfs-hostile-'));
  const dataDir = join(root, 'data');
  const marker = (what: string) => `CANARY-${what}-${randomBytes(8).toString('hex')}`;
  const markers = {
    outside: marker('OUTSIDE'),
    passwd: marker('PASSWD'),
    secret: marker('SECRET'),
    dirRoot: marker('DIRROOT'),
    teamsDir: marker('TEAMSDIR'),
    user: `canaryuser${randomBytes(6).toString('hex')}`,
  };
  const write = async (rel: string, content: string | Buffer) => {
    await mkdir(dirname(join(root, rel)), { recursive: true });
    await writeFile(join(root, rel), content);
  };
  await write('CANARY.txt', markers.outside);
  await write('etc/passwd', markers.passwd);
  await write('secretdir/secret.md', markers.secret);
  await write('data/CANARY.txt', markers.dirRoot);
  await write('data/teams/CANARY.txt', markers.teamsDir);
  await write(
    'data/directory.json',
    directoryJsonOf({
      teams: TEAMS,
      users: {
        alice: { teams: ['payments', 'search'] },
        bob: { teams: ['storage'] },
        [markers.user]: { teams: ['storage'] },
      },
    }),
  );
  const files = new Map<string, Buffer>();
  const pack = async (scope: string, rel: string, content: string) => {
    const dir = scope === 'account' ? 'account' : `teams/${scope.slice('team_'.length)}`;
    await write(`data/${dir}/${rel}`, content);
    files.set(`${scope}/${rel}`, Buffer.from(content));
  };
  for (const scope of ['account', 'team_payments', 'team_search', 'team_storage']) {
    await pack(scope, 'DUTY.md', `# ${scope}\nDuty of ${scope}.\n`);
    await pack(scope, 'runbooks/restart.md', `restart runbook of ${scope}\n`);
    await pack(scope, 'a b/ü ñ.md', `unicode name in ${scope}\n`);
  }
  await pack('team_storage', 'postmortems/secret-outage.md', 'storage-only postmortem\n');
  await symlink('../../CANARY.txt', join(dataDir, 'account', 'link.md'));
  await symlink('../../secretdir', join(dataDir, 'account', 'linkdir'));
  return {
    root,
    dataDir,
    markers: Object.values(markers),
    files,
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}

/** The marker found in `body`, or null. */
export function canaryIn(body: Buffer | string, markers: readonly string[]): string | null {
  const text = typeof body === 'string' ? body : body.toString('latin1');
  return markers.find((m) => text.includes(m)) ?? null;
}
