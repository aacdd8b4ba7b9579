// Durable JSON state on local disk. A save is atomic and durable before it
// resolves: write a temp file, fsync it, rename it over the target, fsync the
// directory. A crash at any point leaves either the old or the new file.
// Saves are serialized by the caller (see session-registry.ts).

import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import { KnowledgeError } from '../core/errors.js';

export interface StateStore<T> {
  /** The last saved state, or null when none was ever saved. */
  load(): Promise<T | null>;
  /** Resolves once `state` is durable. */
  save(state: T): Promise<void>;
}

export function fileStateStore<T>(file: string): StateStore<T> {
  let counter = 0;
  return {
    async load() {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw new KnowledgeError('config', `${file}: cannot read the state file: ${String(err)}`);
      }
      try {
        return JSON.parse(text) as T;
      } catch (err) {
        throw new KnowledgeError('config', `${file}: the state file is not valid JSON (${String(err)}); move it away to start empty`);
      }
    },
    async save(state) {
      const dir = dirname(file);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const tmp = join(dir, `.${basename(file)}.${process.pid}.${counter++}.tmp`);
      const handle = await open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(JSON.stringify(state));
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        await rename(tmp, file);
      } catch (err) {
        await unlink(tmp).catch(() => undefined);
        throw err;
      }
      const dirHandle = await open(dir, 'r');
      try {
        await dirHandle.sync();
      } finally {
        await dirHandle.close();
      }
    },
  };
}
