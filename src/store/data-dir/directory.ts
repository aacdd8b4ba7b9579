// DATA/directory.json: the teams and people of the embedded control plane.
//
//   {"teams": {"<id>": {"name": "..."}},
//    "users": {"<user>": {"teams": ["<id>", ...], "role": "member|admin|owner"}}}
//
// Validation names the file and the field of the first problem, e.g.
// `DATA/directory.json: users.alice.teams[1]: expected a team id string`.
// Roles are recorded but grant nothing: CanLoadScope has no exemption.
// A user's teams must be listed under "teams" (catches typos early).

import { readFile } from 'node:fs/promises';
import { KnowledgeError } from '../../core/errors.js';
import { isValidTeamId } from '../../core/scope.js';

export type Role = 'member' | 'admin' | 'owner';
export const ROLES: readonly Role[] = ['member', 'admin', 'owner'];

export interface Directory {
  readonly teams: ReadonlyMap<string, { readonly name: string }>;
  readonly users: ReadonlyMap<string, { readonly teams: readonly string[]; readonly role: Role }>;
}

const USER_PATTERN = /^[^\u0000-\u001f\u007f/]{1,128}$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function key(name: string): string {
  return /^[A-Za-z0-9_-]+$/.test(name) ? name : JSON.stringify(name);
}

/** Validates parsed JSON; `file` only labels messages. Throws KnowledgeError('config'). */
export function parseDirectory(value: unknown, file: string): Directory {
  const fail = (field: string, problem: string): never => {
    throw new KnowledgeError('config', `${file}: ${field}: ${problem}`);
  };
  if (!isObject(value)) fail('(top level)', 'expected an object with "teams" and "users"');
  const root = value as Record<string, unknown>;
  const teams = new Map<string, { name: string }>();
  const rawTeams = root['teams'] ?? {};
  if (!isObject(rawTeams)) fail('teams', 'expected an object mapping team id to {"name": ...}');
  for (const [id, entry] of Object.entries(rawTeams as Record<string, unknown>)) {
    if (!isValidTeamId(id)) fail(`teams.${key(id)}`, 'invalid team id (expected [a-z0-9][a-z0-9_-]{0,62})');
    if (!isObject(entry)) fail(`teams.${key(id)}`, 'expected an object like {"name": "Payments"}');
    const name = (entry as Record<string, unknown>)['name'] ?? id;
    if (typeof name !== 'string') fail(`teams.${key(id)}.name`, 'expected a string');
    teams.set(id, { name: name as string });
  }
  const users = new Map<string, { teams: string[]; role: Role }>();
  const rawUsers = root['users'] ?? {};
  if (!isObject(rawUsers)) fail('users', 'expected an object mapping user name to {"teams": [...], "role": ...}');
  for (const [user, entry] of Object.entries(rawUsers as Record<string, unknown>)) {
    const at = `users.${key(user)}`;
    if (!USER_PATTERN.test(user)) fail(at, 'invalid user name (1-128 characters, no control characters or "/")');
    if (!isObject(entry)) fail(at, 'expected an object like {"teams": ["payments"], "role": "member"}');
    const e = entry as Record<string, unknown>;
    const userTeams = e['teams'] ?? [];
    if (!Array.isArray(userTeams)) fail(`${at}.teams`, 'expected an array of team ids');
    const list: string[] = [];
    (userTeams as unknown[]).forEach((t, i) => {
      if (typeof t !== 'string' || !isValidTeamId(t)) fail(`${at}.teams[${i}]`, 'expected a team id string');
      if (!teams.has(t as string)) fail(`${at}.teams[${i}]`, `unknown team "${String(t)}" (not listed under "teams")`);
      if (!list.includes(t as string)) list.push(t as string);
    });
    const role = e['role'] ?? 'member';
    if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) {
      fail(`${at}.role`, `expected one of ${ROLES.map((r) => `"${r}"`).join(', ')}`);
    }
    users.set(user, { teams: list, role: role as Role });
  }
  return { teams, users };
}

/** Reads and validates `file`; a missing file or bad JSON is a config error naming it. */
export async function loadDirectory(file: string): Promise<Directory> {
  return (await readDirectoryFile(file)).directory;
}

/** `loadDirectory`, also answering the bytes read (publish names them by their sha256). */
export async function readDirectoryFile(file: string): Promise<{ readonly bytes: Buffer; readonly directory: Directory }> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new KnowledgeError(
      'config',
      code === 'ENOENT' ? `${file}: missing (create it with {"teams": {}, "users": {}})` : `${file}: cannot read: ${(err as Error).message}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new KnowledgeError('config', `${file}: (top level): not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { bytes, directory: parseDirectory(parsed, file) };
}
