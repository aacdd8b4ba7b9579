// Durable state on local disk: a snapshot file plus an append-only journal of
// the changes made since it (`<file>.journal`, one JSON line per commit).
//
// A commit resolves once its changes are durable. Usually that is one append
// and one fdatasync of the journal: much cheaper than rewriting the whole
// state (write a temp file, fsync, rename, fsync the directory) for every
// read the read tool records. The whole state is rewritten that way only by
// the first commit, when the journal has outgrown the snapshot (so loading
// stays quick and the disk use bounded), or after a failed commit (so
// whatever a failed append left in the journal is superseded by the state in
// memory).
//
// Crash safety: each journal line carries a sequence number and the snapshot
// the number of the last line it includes, so after a crash between writing
// a snapshot and emptying the journal the old lines are skipped, never
// applied twice. A line cut short by a crash is the last one and was never
// acknowledged: it is ignored. A crash mid-snapshot leaves a temp file that
// is ignored and the previous snapshot and journal, still complete.
// Commits are serialized by the caller (see session-registry.ts).

import { mkdir, open, readFile, rename, truncate, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';
import { KnowledgeError } from '../../../core/errors.js';

export interface LoadedState<T, C> {
  /** The last snapshot, or null when only journalled changes exist. */
  readonly snapshot: T | null;
  /** Changes committed after the snapshot, oldest first, to apply to it. */
  readonly changes: C[];
}

export interface StateStore<T, C> {
  /** The committed state, or null when nothing was ever committed. */
  load(): Promise<LoadedState<T, C> | null>;
  /**
   * Makes `changes` durable; resolves once they are. `state()` is the whole
   * state with the changes applied, for when the store rewrites its snapshot
   * instead of appending.
   */
  commit(changes: readonly C[], state: () => T): Promise<void>;
  /** Releases the open journal; later commits reopen it. */
  close(): Promise<void>;
}

/** A journal smaller than this is never worth a rewrite, however small the snapshot. */
export const MIN_JOURNAL_BYTES = 1024 * 1024;

/** Added to the snapshot's top-level object: the sequence number of the last journal line it includes. */
const SEQ_FIELD = 'journalSeq';

interface JournalLine<C> {
  readonly seq: number;
  readonly changes: readonly C[];
}

export function journalFileOf(file: string): string {
  return `${file}.journal`;
}

function parseJournal<C>(text: string, file: string, afterSeq: number): { changes: C[]; lastSeq: number } {
  const lines = text.split('\n');
  const changes: C[] = [];
  let lastSeq = afterSeq;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line === '') continue;
    let entry: JournalLine<C>;
    try {
      entry = JSON.parse(line) as JournalLine<C>;
    } catch (err) {
      // Only the last line can be cut short (a crash mid-append): never acknowledged, dropped.
      if (i === lines.length - 1) break;
      throw new KnowledgeError('config', `${file}: line ${i + 1} of the journal is not valid JSON (${String(err)}); move the state file and its journal away to start empty`);
    }
    if (typeof entry.seq !== 'number' || !Array.isArray(entry.changes)) {
      throw new KnowledgeError('config', `${file}: line ${i + 1} of the journal is not a journal entry`);
    }
    lastSeq = Math.max(lastSeq, entry.seq);
    if (entry.seq > afterSeq) changes.push(...entry.changes);
  }
  return { changes, lastSeq };
}

export function fileStateStore<T extends object, C>(file: string, opts: { minJournalBytes?: number } = {}): StateStore<T, C> {
  const journalFile = journalFileOf(file);
  const dir = dirname(file);
  const minJournalBytes = opts.minJournalBytes ?? MIN_JOURNAL_BYTES;
  let counter = 0;
  let seq = 0;
  let snapshotBytes = 0;
  let journalBytes = 0;
  let journal: FileHandle | null = null;
  /** After a failed commit the next one rewrites the snapshot. */
  let rewriteNext = false;

  async function syncDir(): Promise<void> {
    const dirHandle = await open(dir, 'r');
    try {
      await dirHandle.sync();
    } finally {
      await dirHandle.close();
    }
  }

  async function openJournal(): Promise<FileHandle> {
    if (journal !== null) return journal;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const handle = await open(journalFile, 'a', 0o600);
    try {
      // The journal's directory entry must be durable before any line in it counts.
      await syncDir();
    } catch (err) {
      await handle.close();
      throw err;
    }
    journal = handle;
    return handle;
  }

  async function writeSnapshot(state: T, includesSeq: number): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const text = JSON.stringify({ ...state, [SEQ_FIELD]: includesSeq });
    const tmp = join(dir, `.${basename(file)}.${process.pid}.${counter++}.tmp`);
    const handle = await open(tmp, 'w', 0o600);
    try {
      await handle.writeFile(text);
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
    await syncDir();
    snapshotBytes = Buffer.byteLength(text);
    // Lines up to includesSeq are now in the snapshot; emptying the journal
    // need not be durable: after a crash those lines are skipped by seq.
    if (journal !== null) await journal.truncate(0);
    else await truncate(journalFile, 0).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err; });
    journalBytes = 0;
  }

  return {
    async load() {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
          throw new KnowledgeError('config', `${file}: cannot read the state file: ${String(err)}`);
        }
        text = '';
      }
      let snapshot: T | null = null;
      let afterSeq = 0;
      if (text !== '') {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch (err) {
          throw new KnowledgeError('config', `${file}: the state file is not valid JSON (${String(err)}); move it away to start empty`);
        }
        if (typeof parsed !== 'object' || parsed === null) {
          throw new KnowledgeError('config', `${file}: the state file is not a JSON object; move it away to start empty`);
        }
        const { [SEQ_FIELD]: includesSeq, ...rest } = parsed as Record<string, unknown>;
        snapshot = rest as T;
        afterSeq = typeof includesSeq === 'number' ? includesSeq : 0; // 0: written before the journal existed
        snapshotBytes = Buffer.byteLength(text);
      }
      let journalText = '';
      try {
        journalText = await readFile(journalFile, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
          throw new KnowledgeError('config', `${journalFile}: cannot read the state journal: ${String(err)}`);
        }
      }
      const { changes, lastSeq } = parseJournal<C>(journalText, journalFile, afterSeq);
      seq = lastSeq;
      journalBytes = Buffer.byteLength(journalText);
      // A cut-short last line must not stay in front of the next append.
      if (journalText !== '' && !journalText.endsWith('\n')) rewriteNext = true;
      if (snapshot === null && changes.length === 0) return null;
      return { snapshot, changes };
    },

    async commit(changes, state) {
      if (changes.length === 0) return;
      const thisSeq = ++seq;
      try {
        // The first commit writes a snapshot, so the state file exists from then on.
        if (rewriteNext || snapshotBytes === 0 || journalBytes > Math.max(minJournalBytes, snapshotBytes)) {
          await writeSnapshot(state(), thisSeq);
        } else {
          const line = `${JSON.stringify({ seq: thisSeq, changes } satisfies JournalLine<C>)}\n`;
          const handle = await openJournal();
          await handle.appendFile(line);
          await handle.datasync();
          journalBytes += Buffer.byteLength(line);
        }
        rewriteNext = false;
      } catch (err) {
        rewriteNext = true;
        throw err;
      }
    },

    async close() {
      const handle = journal;
      journal = null;
      await handle?.close();
    },
  };
}
