// Source URLs from an operator's template (`--source-url`), e.g.
// `https://git.example/kb/blob/{commit}/{path}`. The template is recorded
// once per scope with the scope directory's path in the repository (or in
// the data directory when it is not in one), and expanded per file:
//
//   {commit}  the commit that last changed the file (no commit: no URL)
//   {path}    the file's path in the repository: the scope's prefix + {file}
//   {file}    the file's path inside its scope, e.g. runbooks/db.md
//   {scope}   the scope, account or team_<id>
//
// Path values are percent-encoded segment by segment, so `/` stays a
// separator and nothing in a name can change the URL's structure.

export interface SourceTemplate {
  /** The operator's template. */
  readonly template: string;
  /** The scope directory's path in the repository, ending in `/` (`kb/teams/payments/`); '' at its top. */
  readonly prefix: string;
}

export const SOURCE_PLACEHOLDERS = ['commit', 'path', 'file', 'scope'] as const;
type Placeholder = (typeof SOURCE_PLACEHOLDERS)[number];

/** Longest template accepted. */
export const MAX_SOURCE_TEMPLATE = 2048;

const PLACEHOLDER = /\{([^{}]*)\}/g;

/** Why `template` cannot be used, or null. */
export function checkSourceTemplate(template: string): string | null {
  if (template.length === 0 || template.length > MAX_SOURCE_TEMPLATE) return `a template is 1 to ${MAX_SOURCE_TEMPLATE} characters`;
  if (/[\0-\x20\x7f]/.test(template)) return 'a template has no spaces or control characters';
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (!(SOURCE_PLACEHOLDERS as readonly string[]).includes(m[1] as string)) {
      return `unknown placeholder {${m[1] ?? ''}} (known: ${SOURCE_PLACEHOLDERS.map((p) => `{${p}}`).join(', ')})`;
    }
  }
  if (/[{}]/.test(template.replace(PLACEHOLDER, ''))) return 'a "{" or "}" that is not part of a placeholder';
  return null;
}

function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/** The URL for one file; null when the template names {commit} and the file has none. */
export function expandSourceUrl(source: SourceTemplate, file: { readonly commit: string | undefined; readonly scope: string; readonly file: string }): string | null {
  if (file.commit === undefined && source.template.includes('{commit}')) return null;
  const values: Record<Placeholder, string> = {
    commit: file.commit ?? '',
    path: encodePath(`${source.prefix}${file.file}`),
    file: encodePath(file.file),
    scope: encodeURIComponent(file.scope),
  };
  return source.template.replace(PLACEHOLDER, (_, name: string) => values[name as Placeholder]);
}
