// The reminder: the volatile tail of an agent's prompt.
//
// Today's date, then the files of the session's read set that changed or
// vanished since the agent read them — paths only, never diffs. The caller
// stores `nextReadSet` once the reminder is handed out, so each change is
// reported exactly once: a changed entry takes its new sha256, a deleted one
// leaves the set. Files the agent never read are not in the read set, so new
// files never show up here, and neither does anything a denied read touched
// (denied reads never enter the read set).
//
// A file whose state cannot be told now (the membership service is down, so
// whether its scope is still loadable is unknown) is neither changed nor
// deleted: it keeps its entry unchanged and is not mentioned, so a real
// change is still reported once the service is back. An outage is not a
// denial and not a deletion.

import { KnowledgeError } from '../errors.js';

export interface ReadSetEntry {
  /** `<scope>/<path inside the scope>`. */
  readonly path: string;
  readonly sha256: string;
}

export interface ReminderInput {
  /** YYYY-MM-DD. */
  readonly date: string;
  readonly readSet: readonly ReadSetEntry[];
  /** The file's sha256 now; null when it is gone or no longer loadable; undefined when that cannot be told now. */
  readonly current: (path: string) => string | null | undefined;
}

export interface Reminder {
  readonly text: string;
  readonly changed: string[];
  readonly deleted: string[];
  readonly nextReadSet: { path: string; sha256: string }[];
}

const DATE_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

export function isValidDate(date: string): boolean {
  const m = DATE_PATTERN.exec(date);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const t = new Date(Date.UTC(y, mo - 1, d));
  return t.getUTCFullYear() === y && t.getUTCMonth() === mo - 1 && t.getUTCDate() === d;
}

/** `team_x/a.md` → `knowledge/team_x/a.md`, as `ls`/`find` show it. */
function display(path: string): string {
  return `knowledge/${path}`;
}

export function buildReminder(input: ReminderInput): Reminder {
  if (!isValidDate(input.date)) {
    throw new KnowledgeError('invalid_argument', `invalid date "${input.date}" (expected YYYY-MM-DD)`);
  }
  const changed: string[] = [];
  const deleted: string[] = [];
  const nextReadSet: { path: string; sha256: string }[] = [];
  const seen = new Set<string>();

  for (const entry of input.readSet) {
    // A path read twice is one entry: the first occurrence wins, later ones are dropped.
    if (seen.has(entry.path)) continue;
    seen.add(entry.path);
    const now = input.current(entry.path);
    if (now === undefined) {
      nextReadSet.push({ path: entry.path, sha256: entry.sha256 });
    } else if (now === null) {
      deleted.push(entry.path);
    } else if (now !== entry.sha256) {
      changed.push(entry.path);
      nextReadSet.push({ path: entry.path, sha256: now });
    } else {
      nextReadSet.push({ path: entry.path, sha256: entry.sha256 });
    }
  }

  const lines = [`Today's date is ${input.date}.`];
  if (changed.length > 0) {
    lines.push('', 'Knowledge files you read earlier have changed since you read them; read them again before relying on them:');
    for (const p of changed) lines.push(`- ${display(p)}`);
  }
  if (deleted.length > 0) {
    lines.push('', 'Knowledge files you read earlier are gone or can no longer be loaded; do not rely on what they said:');
    for (const p of deleted) lines.push(`- ${display(p)}`);
  }
  return { text: `${lines.join('\n')}\n`, changed, deleted, nextReadSet };
}
