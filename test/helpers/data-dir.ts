// Test data directories for the control plane: directory.json plus pack
// files, in a fresh temp dir. Used by every suite that starts a control plane.
//
//   const dir = await makeDataDir({
//     teams: { payments: 'Payments', search: 'Search' },
//     users: { alice: { teams: ['payments'], role: 'member' } },
//     files: { 'account/DUTY.md': '# Account', 'teams/payments/runbooks/db.md': '…' },
//   });

import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';

export interface DataDirSpec {
  /** Team id → display name. */
  readonly teams?: Readonly<Record<string, string>>;
  /** User → teams and role (role defaults to member). */
  readonly users?: Readonly<Record<string, { readonly teams: readonly string[]; readonly role?: 'member' | 'admin' | 'owner' }>>;
  /** Path relative to the data dir → content (`account/…`, `teams/<id>/…`). */
  readonly files?: Readonly<Record<string, string | Buffer>>;
  /** Written verbatim as directory.json instead of the one built from teams/users (for bad-input tests). */
  readonly directoryJson?: string;
}

export function directoryJsonOf(spec: DataDirSpec): string {
  const teams: Record<string, { name: string }> = {};
  for (const [id, name] of Object.entries(spec.teams ?? {})) teams[id] = { name };
  const users: Record<string, { teams: string[]; role: string }> = {};
  for (const [user, u] of Object.entries(spec.users ?? {})) users[user] = { teams: [...u.teams], role: u.role ?? 'member' };
  return `${JSON.stringify({ teams, users }, null, 2)}\n`;
}

/** Creates the data dir and returns its absolute path. Remove it with `removeDataDir`. */
export async function makeDataDir(spec: DataDirSpec = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kfs-data-'));
  await mkdir(join(dir, 'account'), { recursive: true });
  await writeFile(join(dir, 'directory.json'), spec.directoryJson ?? directoryJsonOf(spec));
  for (const [rel, content] of Object.entries(spec.files ?? {})) await writeDataFile(dir, rel, content);
  return dir;
}

function inside(dir: string, rel: string): string {
  const abs = resolve(dir, rel);
  if (!abs.startsWith(resolve(dir) + sep)) throw new Error(`test helper: ${rel} is outside ${dir}`);
  return abs;
}

export async function writeDataFile(dir: string, rel: string, content: string | Buffer): Promise<void> {
  const abs = inside(dir, rel);
  await mkdir(dirname(abs), { recursive: true });
  await writeFile(abs, content);
}

export async function removeDataFile(dir: string, rel: string): Promise<void> {
  await rm(inside(dir, rel), { recursive: true, force: true });
}

/** Rewrites directory.json from a spec (teams/users) or verbatim text. */
export async function writeDirectory(dir: string, spec: DataDirSpec | string): Promise<void> {
  await writeFile(join(dir, 'directory.json'), typeof spec === 'string' ? spec : directoryJsonOf(spec));
}

export async function removeDataDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
