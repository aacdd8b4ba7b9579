// What a scan of a data directory sees on disk (dir-pack-store.ts walks):
// listing a directory, decoding a name, telling what an entry is, all without
// following links, each problem logged once per path for the life of the
// process; and hashing a file's bytes.

import { createHash } from 'node:crypto';
import { closeSync, constants, lstatSync, openSync, readdirSync, readFileSync, realpathSync, type Dirent, type Stats } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { escapeForLog } from '../../core/text/escape-for-log.js';
import { MAX_PATH_BYTES, packPathProblem, segmentProblem } from '../../core/paths.js';
import { type DirPackStoreOptions, type SeenEntry, SYNC_HASH_BYTES, MAX_LOGGED, utf8 } from './dir-pack-index.js';

export class PackEntries {
  private readonly logged = new Set<string>();

  constructor(private readonly options: Pick<DirPackStoreOptions, 'log' | 'maxFileSize'>) {}

  logOnce(key: string, line: string): void {
    if (this.logged.has(key)) return;
    if (this.logged.size >= MAX_LOGGED) this.logged.clear();
    this.logged.add(key);
    this.options.log(line);
  }

  skip(abs: string, why: string): void {
    this.logOnce(`${abs}\0${why}`, `skipping ${escapeForLog(abs)}: ${why}`);
  }

  /** lstat, or undefined when missing or unreadable (logged once). */
  lstatOrSkip(path: string): Stats | undefined {
    try {
      return lstatSync(path, { throwIfNoEntry: false });
    } catch (err) {
      this.skip(path, `cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      return undefined;
    }
  }

  listDir(dir: string): Dirent<Buffer>[] | null {
    try {
      return readdirSync(dir, { withFileTypes: true, encoding: 'buffer' });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') this.skip(dir, `cannot list directory (${code ?? String(err)})`);
      return null;
    }
  }

  decodeName(parent: string, raw: Buffer): string | null {
    try {
      return utf8.decode(raw);
    } catch {
      this.skip(join(parent, raw.toString('latin1')), 'name is not valid UTF-8');
      return null;
    }
  }

  /** What one listed entry is: a directory to walk, a servable file's stat, or skipped (logged once). May throw. */
  visit(entry: Dirent<Buffer>, name: string, abs: string, rel: string): SeenEntry {
    // Segments above were checked already: only this name and the total length are new.
    const problem = segmentProblem(name) ?? (rel.length * 3 > MAX_PATH_BYTES ? packPathProblem(rel) : null);
    if (problem !== null) return this.skipped(abs, problem);
    if (entry.isSymbolicLink()) return this.skipped(abs, 'symlink (not followed)');
    if (entry.isDirectory()) return 'dir';
    if (!entry.isFile()) return this.skipped(abs, 'not a regular file');
    const st = lstatSync(abs, { throwIfNoEntry: false });
    if (st === undefined) return 'skip'; // vanished since the listing
    if (!st.isFile()) return this.skipped(abs, st.isSymbolicLink() ? 'symlink (not followed)' : 'not a regular file');
    if (st.size > this.options.maxFileSize) {
      return this.skipped(abs, `larger than --max-file-size (${st.size} > ${this.options.maxFileSize} bytes)`);
    }
    if (st.nlink > 1) {
      // Served like any file (its content is what is in the pack), but a hard
      // link may share bytes with a file outside the pack: say so once.
      this.logOnce(`${abs}\0nlink`, `serving ${escapeForLog(abs)}: a hard link (${st.nlink} names share its content, possibly outside the pack)`);
    }
    return st;
  }

  private skipped(abs: string, why: string): 'skip' {
    this.skip(abs, why);
    return 'skip';
  }
}

/**
 * True when each directory is still reached without a symlink (or is gone):
 * listing it then cannot wander outside the pack. Otherwise the whole pack
 * is walked, which never follows symlinks.
 */
export function insidePack(dir: string, rels: readonly string[]): boolean {
  let realDir: string;
  try {
    realDir = realpathSync.native(dir);
  } catch {
    return false;
  }
  for (const rel of rels) {
    try {
      if (realpathSync.native(`${dir}/${rel}`) !== `${realDir}/${rel}`) return false;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return false;
    }
  }
  return true;
}

/** The sha256 of a file's bytes, opened without following a link; null when it vanished or cannot be read. */
export async function hashFile(abs: string, size: number): Promise<string | null> {
  try {
    const flag = constants.O_RDONLY | constants.O_NOFOLLOW;
    // Small files in the current time slice; big ones without blocking the loop.
    let bytes: Buffer;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: either way reads and hashes the same bytes; the size only picks how
    if (size <= SYNC_HASH_BYTES) {
      const fd = openSync(abs, flag);
      try {
        bytes = readFileSync(fd);
      } finally {
        closeSync(fd);
      }
    } else {
      bytes = await readFile(abs, { flag });
    }
    return createHash('sha256').update(bytes).digest('hex');
  } catch {
    return null;
  }
}

