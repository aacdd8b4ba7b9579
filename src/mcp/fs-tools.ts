// `list_knowledge` and `search_knowledge` (with --fs-tools), for hosts that
// give the agent no shell. They walk the local mount with ordinary file
// system calls, as `ls -p` and `grep -rn -F` would, so they can never show
// more than those do: teams that are not mounted are not on disk, and every
// file opened is authorised by the mount daemon like any other open.
//
// Output is bounded (entries, matches, characters per line and in total)
// and says when it was cut; the search streams files, so its memory is
// bounded too, whatever their size or line length.

import { createReadStream } from 'node:fs';
import { opendir, stat } from 'node:fs/promises';
import { InvalidArgumentError, UnavailableError, type KnowledgeError } from '../client/errors.js';
import { KNOWLEDGE_DIR, mountRelativePath } from '../core/local/knowledge-path.js';
import { READ_OUTPUT_CAP } from '../core/wire.js';

/** Most characters a list or search answer returns: the read tool's cap. */
export const FS_OUTPUT_CAP = READ_OUTPUT_CAP;
/** Most characters of a matching line the search shows. */
const MAX_LINE_CHARS = 400;
/** What the search reads of a file at a time (its memory per file, with MAX_LINE_CHARS). */
const SEARCH_CHUNK_BYTES = 64 * 1024;

export interface MountDir {
  /** Absolute path on disk. */
  readonly abs: string;
  /** As ls prints it from the mount's parent: `knowledge` or `knowledge/team_x/…`. */
  readonly display: string;
}

/** Resolves a directory path the agent typed (`knowledge/…`, relative to cwd, or absolute) inside the mount. */
export function resolveMountDir(input: string, cwd: string, mountpoint: string): MountDir {
  if (input.includes('\0')) throw new InvalidArgumentError(`${JSON.stringify(input)}: NUL character in path`);
  const { root, base, rel } = mountRelativePath(input, cwd, mountpoint);
  if (rel === null) {
    throw new InvalidArgumentError(`${input}: outside ${KNOWLEDGE_DIR}/ (the mount at ${root}); give a path as ls prints it, e.g. ${KNOWLEDGE_DIR}/account`);
  }
  return rel === '' ? { abs: root, display: base } : { abs: `${root}/${rel}`, display: `${base}/${rel}` };
}

function fsError(display: string, err: unknown): KnowledgeError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return new InvalidArgumentError(`${display}: no such file or directory`);
  if (code === 'ENOTDIR') return new InvalidArgumentError(`${display}: not a directory`);
  if (code === 'EIO') return new UnavailableError(`${display}: input/output error from the mount (is the control plane reachable?)`);
  throw err;
}

/** Entries of a directory as `ls -p` shows them (directories end in `/`), sorted. */
export async function listDir(dir: MountDir, maxEntries: number): Promise<string> {
  const names: string[] = [];
  try {
    for await (const entry of await opendir(dir.abs)) names.push(entry.isDirectory() ? `${entry.name}/` : entry.name);
  } catch (err) {
    throw fsError(dir.display, err);
  }
  names.sort();
  const lines = names.slice(0, maxEntries).map((n) => `${dir.display}/${n}`);
  if (names.length > maxEntries) lines.push(`[${names.length - maxEntries} more entries not shown: list a subdirectory, or raise max_entries]`);
  return capText(lines.join('\n'));
}

export interface SearchOptions {
  readonly pattern: string;
  readonly ignoreCase: boolean;
  readonly maxResults: number;
}

/** Lines containing `pattern` (literal) under `dir`, as `grep -rn -F` prints them: `path:line:text`. */
export async function searchDir(dir: MountDir, opts: SearchOptions): Promise<string> {
  const needle = opts.ignoreCase ? opts.pattern.toLowerCase() : opts.pattern;
  const out: string[] = [];
  let outChars = 0;
  let unreadable = 0;
  let cut = false;
  /** The answer is past the output cap: capText cuts it, so reading on would be for nothing. */
  let full = false;
  const done = () => cut || full;

  // Streamed in chunks, never a whole file or a whole line in memory: a
  // 40 MiB single-line file read whole (and spread into characters) took
  // the MCP process to ~1 GiB. A line is held as its first MAX_LINE_CHARS
  // characters (what is shown) plus the needle's length of overlap between
  // chunks (a match may straddle two).
  const visitFile = async (abs: string, display: string): Promise<void> => {
    let line = new StreamedLine(needle, opts.ignoreCase);
    let number = 1;
    const finish = (): void => {
      if (line.matched) {
        if (out.length >= opts.maxResults) {
          cut = true;
          return;
        }
        const text = `${display}:${number}:${line.shown()}`;
        out.push(text);
        outChars += text.length + 1;
        if (outChars > FS_OUTPUT_CAP) full = true;
      }
      line = new StreamedLine(needle, opts.ignoreCase);
      number++;
    };
    const stream = createReadStream(abs, { encoding: 'utf8', highWaterMark: SEARCH_CHUNK_BYTES });
    try {
      for await (const chunk of stream as AsyncIterable<string>) {
        let from = 0;
        for (let nl = chunk.indexOf('\n'); nl >= 0 && !done(); nl = chunk.indexOf('\n', from)) {
          line.feed(chunk.slice(from, nl));
          from = nl + 1;
          finish();
        }
        if (done()) return;
        if (from < chunk.length) line.feed(chunk.slice(from));
      }
      finish();
    } catch {
      unreadable++; // gone since listed, or refused: grep would print an error and go on
    } finally {
      stream.destroy();
    }
  };
  const visitDir = async (abs: string, display: string): Promise<void> => {
    const entries: { name: string; dir: boolean }[] = [];
    try {
      for await (const e of await opendir(abs)) entries.push({ name: e.name, dir: e.isDirectory() });
    } catch {
      unreadable++;
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : 1)); // names in one directory are never equal
    for (const e of entries) {
      if (done()) return;
      if (e.dir) await visitDir(`${abs}/${e.name}`, `${display}/${e.name}`);
      else await visitFile(`${abs}/${e.name}`, `${display}/${e.name}`);
    }
  };

  let isDir: boolean;
  try {
    isDir = (await stat(dir.abs)).isDirectory();
  } catch (err) {
    throw fsError(dir.display, err);
  }
  if (isDir) await visitDir(dir.abs, dir.display);
  else await visitFile(dir.abs, dir.display);

  if (out.length === 0 && !cut) out.push(`no line under ${dir.display} contains ${JSON.stringify(opts.pattern)}`);
  if (cut) out.push(`[stopped at ${opts.maxResults} matches: narrow the path or the pattern, or raise max_results]`);
  if (unreadable > 0) out.push(`[${unreadable} files or directories could not be read]`);
  return capText(out.join('\n'));
}

/**
 * One line as it streams past in pieces: whether it contains the needle and
 * its first MAX_LINE_CHARS characters, in memory bounded by those and the
 * needle, however long the line is.
 */
class StreamedLine {
  private head = '';
  private headChars = 0;
  private long = false;
  /** The end of what was searched so far, as long as the needle: a match may begin there. */
  private overlap = '';
  matched = false;

  constructor(
    private readonly needle: string,
    private readonly ignoreCase: boolean,
  ) {}

  feed(piece: string): void {
    if (!this.long) {
      for (const ch of piece) {
        if (this.headChars === MAX_LINE_CHARS) {
          this.long = true;
          break;
        }
        this.head += ch;
        this.headChars++;
      }
    }
    if (this.matched) return;
    const text = this.overlap + piece;
    this.matched = (this.ignoreCase ? text.toLowerCase() : text).includes(this.needle);
    this.overlap = text.slice(-this.needle.length);
  }

  /** As the answer shows it: at most MAX_LINE_CHARS characters, then `…` if there were more. */
  shown(): string {
    return this.long ? `${this.head}…` : this.head;
  }
}

function capText(text: string): string {
  if (text.length <= FS_OUTPUT_CAP) return text;
  // Never end on half a surrogate pair.
  const end = (text.charCodeAt(FS_OUTPUT_CAP) & 0xfc00) === 0xdc00 ? FS_OUTPUT_CAP - 1 : FS_OUTPUT_CAP;
  return `${text.slice(0, end)}\n[output cut at ${end} characters: narrow the path]`;
}
