// Small corpora and output checks shared by the fault suites.
//
// Every file's content is self-describing: each line names the file and the
// version, and lengths vary (some files span many 4 KiB pages, so a body cut
// short or flipped in the middle would show). `checkGrepOutput` parses
// `grep -r -H ''` output and demands that every file it printed appears in
// full and with the exact bytes of one known version: no partial files, no
// wrong bytes.

import { createHash } from 'node:crypto';

export interface CorpusFile {
  /** `<scope>/<path>` as seen under the mount. */
  readonly mountPath: string;
  /** Path under the data dir. */
  readonly dataPath: string;
  readonly content: string;
}

/** Content of `mountPath` at `version`, `lines` lines long. */
export function fileContent(mountPath: string, version: number, lines: number): string {
  let out = '';
  for (let i = 0; i < lines; i++) out += `${mountPath} v${version} line ${i} ${'x'.repeat(i % 50)}\n`;
  return out;
}

export function dataPathOf(mountPath: string): string {
  const slash = mountPath.indexOf('/');
  const scope = mountPath.slice(0, slash);
  const rest = mountPath.slice(slash + 1);
  return scope === 'account' ? `account/${rest}` : `teams/${scope.slice('team_'.length)}/${rest}`;
}

/**
 * `count` files per scope under `dir/`, sizes from a few lines to ~`maxLines`
 * lines (the largest spans dozens of pages), plus each scope's DUTY.md.
 */
export function makeCorpus(scopes: readonly string[], count: number, maxLines = 600, version = 1): CorpusFile[] {
  const files: CorpusFile[] = [];
  for (const scope of scopes) {
    files.push(file(`${scope}/DUTY.md`, version, 3));
    for (let i = 0; i < count; i++) {
      const lines = 1 + ((i * 97) % maxLines);
      files.push(file(`${scope}/docs/f${String(i).padStart(3, '0')}.md`, version, lines));
    }
  }
  return files;
}

function file(mountPath: string, version: number, lines: number): CorpusFile {
  return { mountPath, dataPath: dataPathOf(mountPath), content: fileContent(mountPath, version, lines) };
}

export function filesSpec(files: readonly CorpusFile[]): Record<string, string> {
  return Object.fromEntries(files.map((f) => [f.dataPath, f.content]));
}

export function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

export interface GrepCheck {
  /** Files printed in full with known bytes. */
  readonly complete: string[];
  /** Problems: partial files, unknown bytes, files printed that should not be visible. */
  readonly problems: string[];
}

/**
 * Checks `grep -r -H '' <root>` output run from the mount (paths relative to
 * the mount, `./` stripped). `versions` maps a mount path to every content it
 * may legitimately show (old and new versions around a change).
 */
export function checkGrepOutput(stdout: string, versions: ReadonlyMap<string, readonly string[]>, prefix = ''): GrepCheck {
  const byFile = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    let path = line.slice(0, colon);
    if (path.startsWith('./')) path = path.slice(2);
    if (prefix !== '' && path.startsWith(prefix)) path = path.slice(prefix.length);
    byFile.set(path, (byFile.get(path) ?? '') + line.slice(colon + 1) + '\n');
  }
  const complete: string[] = [];
  const problems: string[] = [];
  for (const [path, text] of byFile) {
    const allowed = versions.get(path);
    if (allowed === undefined) problems.push(`${path}: printed but not expected to be visible`);
    else if (allowed.includes(text)) complete.push(path);
    else if (allowed.some((v) => v.startsWith(text))) problems.push(`${path}: partial content (${text.length} of ${allowed[0]?.length ?? '?'} chars)`);
    else problems.push(`${path}: bytes of no known version`);
  }
  return { complete, problems };
}

/** Paths named in grep's stderr (`grep: PATH: Input/output error`). */
export function grepErrors(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('grep: '))
    .map((l) => l.slice('grep: '.length));
}

export function versionsOf(files: readonly CorpusFile[]): Map<string, string[]> {
  return new Map(files.map((f) => [f.mountPath, [f.content]]));
}
