// The manifest: the stable prompt prefix an agent gets up front.
//
// It is assembled by the control plane from the session's advertised scopes
// (account, then the bound team) and the teams mounted through the read tool
// (in mount order), each with its DUTY.md body. Nothing else goes in: no
// dates, no file lists, no sizes, no absolute paths. So adding, editing or
// removing any file other than a DUTY.md leaves the bytes — and the sha256 a
// prompt cache keys on — unchanged.
//
// Each DUTY.md body is capped at DUTY_CAP_BYTES of UTF-8, cut on a character
// boundary (never inside a UTF-8 sequence or a surrogate pair), followed by a
// line pointing at the full file.

import { createHash } from 'node:crypto';

export const DUTY_CAP_BYTES = 32 * 1024;

export interface ManifestScope {
  readonly scope: string;
  /** The scope's DUTY.md body, or null when the scope has none. */
  readonly duty: string | null;
}

export interface ManifestInput {
  /** Advertised scopes: account, then the bound team (if any). */
  readonly scopes: readonly ManifestScope[];
  /** Teams mounted through the read tool and still loadable, in mount order. */
  readonly mounted: readonly ManifestScope[];
}

export interface Manifest {
  readonly text: string;
  readonly sha256: string;
}

const GUIDANCE = [
  '# Knowledge',
  '',
  'Reference knowledge for this session is in the read-only directory `knowledge/`:',
  '',
  '- `knowledge/account/` holds knowledge shared by the whole account.',
  '- `knowledge/team_<id>/` holds one team\'s knowledge (runbooks, architecture notes, postmortems).',
  '- Every scope has an entry file, `DUTY.md`, at its root: start there, it says what the scope covers and where things are.',
  '',
  'Browse it with ordinary shell tools: `ls`, `find`, `grep -r`, `cat`.',
  '',
  'Only knowledge this session may use is on disk. To read a file of a team that is not under `knowledge/`, run',
  '`knowledgefs read knowledge/team_<id>/<path>` (for example `knowledgefs read knowledge/team_<id>/DUTY.md`).',
  'If the session may load that team, the command prints the file and mounts the whole team, so `ls` and `grep -r` see it from then on.',
  'If not, it fails like a missing file or explains why.',
  '',
  'Other teams are not listed here. A team missing from this list says nothing about whether it exists.',
].join('\n');

/**
 * Cuts `text` to at most `capBytes` bytes of UTF-8 on a character boundary.
 * Lone surrogates (which no decoded file contains) become U+FFFD first so the
 * result is always well-formed.
 */
export function truncateUtf8(text: string, capBytes: number): { text: string; truncated: boolean } {
  const wellFormed = text.isWellFormed() ? text : text.toWellFormed();
  if (Buffer.byteLength(wellFormed) <= capBytes) return { text: wellFormed, truncated: false };
  const bytes = Buffer.from(wellFormed);
  let end = Math.max(0, capBytes);
  // Step back over continuation bytes (10xxxxxx) so the cut lands on the start of a character.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return { text: bytes.subarray(0, end).toString('utf8'), truncated: true };
}

function dutyBlock(scope: string, duty: string | null): string {
  const path = `knowledge/${scope}/DUTY.md`;
  if (duty === null) return `This scope has no \`DUTY.md\`; browse \`knowledge/${scope}/\` with \`ls\` and \`find\`.\n`;
  const { text, truncated } = truncateUtf8(duty, DUTY_CAP_BYTES);
  const body = text.endsWith('\n') || text === '' ? text : `${text}\n`;
  if (!truncated) return body;
  return `${body}\n[${path} is longer than ${DUTY_CAP_BYTES / 1024} KiB and was cut here: read the full file at ${path}]\n`;
}

function scopeSection(level: string, entry: ManifestScope): string {
  const header = `${level} ${entry.scope} (\`knowledge/${entry.scope}/\`)`;
  return `${header}\n\n<<< knowledge/${entry.scope}/DUTY.md\n${dutyBlock(entry.scope, entry.duty)}>>> end of knowledge/${entry.scope}/DUTY.md\n`;
}

export function buildManifest(input: {
  scopes: { scope: string; duty: string | null }[];
  mounted: { scope: string; duty: string | null }[];
}): { text: string; sha256: string } {
  const parts: string[] = [`${GUIDANCE}\n`];
  const seen = new Set<string>();

  parts.push('\n## Scopes of this session\n');
  for (const entry of input.scopes) {
    if (seen.has(entry.scope)) continue;
    seen.add(entry.scope);
    parts.push(`\n${scopeSection('###', entry)}`);
  }

  parts.push('\n## Mounted teams\n\nTeams brought in with `knowledgefs read`, in the order they were mounted.\n');
  const beforeMounted = parts.length;
  for (const entry of input.mounted) {
    if (seen.has(entry.scope)) continue;
    seen.add(entry.scope);
    parts.push(`\n${scopeSection('###', entry)}`);
  }
  if (parts.length === beforeMounted) parts.push('\nNone yet.\n');

  const text = parts.join('');
  return { text, sha256: createHash('sha256').update(text).digest('hex') };
}
