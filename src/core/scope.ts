// Scope names as they appear in plans, URLs and the mount: `account` for
// knowledge shared by everyone, `team_<id>` for one team's pack.

export const ACCOUNT_SCOPE = 'account';
export const TEAM_PREFIX = 'team_';
export const TEAM_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** Every scope's entry file, at its root. */
export const DUTY_FILE = 'DUTY.md';

export type ScopeName = string;

export type ParsedScope = { kind: 'account' } | { kind: 'team'; teamId: string };

export function isValidTeamId(id: string): boolean {
  return TEAM_ID_PATTERN.test(id);
}

export function teamScope(teamId: string): ScopeName {
  return `${TEAM_PREFIX}${teamId}`;
}

/** Parses `account` or `team_<id>`; anything else is null. */
export function parseScope(name: string): ParsedScope | null {
  if (name === ACCOUNT_SCOPE) return { kind: 'account' };
  if (!name.startsWith(TEAM_PREFIX)) return null;
  const teamId = name.slice(TEAM_PREFIX.length);
  return isValidTeamId(teamId) ? { kind: 'team', teamId } : null;
}

/** Sort order used everywhere scopes are listed: account first, then teams by id. */
export function compareScopes(a: ScopeName, b: ScopeName): number {
  if (a === b) return 0;
  if (a === ACCOUNT_SCOPE) return -1;
  if (b === ACCOUNT_SCOPE) return 1;
  return a < b ? -1 : 1;
}
