// Source watermarks: the one line `read --cite` (and the MCP tool, asked
// for it) puts after the text it hands a model, and what `verify-sources`
// finds in the model's answer afterwards:
//
//   [Source: knowledge/<scope>/<path> sha256:<16 hex> <scope>@<16 hex>]
//
// the file's path as `ls` shows it from the directory holding the mount, the
// start of its sha256 (which bytes), and the start of its scope's version at
// that moment (which state of the scope). 16 hex digits are 64 bits: enough
// to tell versions of one path apart, short enough to survive a model
// copying them. Paths may hold spaces; a watermark is one line.

/** Hex digits of the sha256 and of the scope version a watermark carries. */
export const CITATION_DIGITS = 16;

export interface Citation {
  /** `<scope>/<path inside the scope>`. */
  readonly path: string;
  readonly scope: string;
  /** The start of the sha256 cited (at least CITATION_DIGITS hex digits). */
  readonly sha256: string;
  /** The start of the scope version cited. */
  readonly scopeVersion: string;
  /** The watermark as it appeared. */
  readonly text: string;
}

/** The watermark of `<scope>/<path>` with these bytes in this scope version. */
export function formatWatermark(scopePath: string, sha256: string, scopeVersion: string): string {
  const scope = scopePath.slice(0, scopePath.indexOf('/'));
  return `[Source: knowledge/${scopePath} sha256:${sha256.slice(0, CITATION_DIGITS)} ${scope}@${scopeVersion.slice(0, CITATION_DIGITS)}]`;
}

const WATERMARK = /\[Source: knowledge\/((account|team_[a-z0-9][a-z0-9_-]{0,62})\/[^\n]+?) sha256:([0-9a-f]{16,64}) (account|team_[a-z0-9][a-z0-9_-]{0,62})@([0-9a-f]{16,64})\]/g;

/** Every watermark in `text`, in order; one whose two scope names differ is not a watermark. */
export function findWatermarks(text: string): Citation[] {
  const found: Citation[] = [];
  for (const m of text.matchAll(WATERMARK)) {
    const [whole, path, scope, sha256, versionScope, scopeVersion] = m as unknown as [string, string, string, string, string, string];
    if (scope !== versionScope) continue;
    found.push({ path, scope, sha256, scopeVersion, text: whole });
  }
  return found;
}
