// Holds the last good directory.json and reloads it when the file changes
// (ino, size, mtime, ctime). An invalid edit while serving keeps the last
// good version and logs the problem once per distinct message.

import { stat } from 'node:fs/promises';
import { loadDirectory, type Directory } from '../../store/data-dir/directory.js';

export class DirectorySource {
  private current: Directory;
  private fingerprint: string;
  private lastError: string | null = null;

  private constructor(
    readonly file: string,
    initial: Directory,
    fingerprint: string,
    private readonly log: (line: string) => void,
  ) {
    this.current = initial;
    this.fingerprint = fingerprint;
  }

  /** Loads the file; a problem here is a KnowledgeError('config') that stops the server from starting. */
  static async open(file: string, log: (line: string) => void): Promise<DirectorySource> {
    const fp = await fingerprintOf(file);
    const dir = await loadDirectory(file);
    return new DirectorySource(file, dir, fp, log);
  }

  get directory(): Directory {
    return this.current;
  }

  /** Re-reads the file if it changed; returns true when a new version was taken. */
  async refresh(): Promise<boolean> {
    const fp = await fingerprintOf(this.file);
    if (fp === this.fingerprint) return false;
    try {
      const next = await loadDirectory(this.file);
      this.current = next;
      this.fingerprint = fp;
      if (this.lastError !== null) this.log(`${this.file}: valid again, using the new version`);
      this.lastError = null;
      return true;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (message !== this.lastError) this.log(`${message} (keeping the last good version)`);
      this.lastError = message;
      // Remember the bad fingerprint so an unchanged bad file is not re-parsed every scan.
      this.fingerprint = fp;
      return false;
    }
  }
}

async function fingerprintOf(file: string): Promise<string> {
  try {
    const s = await stat(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch {
    return 'missing';
  }
}
