// The journalled state store on a real directory, and the session registry on
// top of it: what a restart loads after appends, rewrites, a cut-short line
// and a crash between a rewrite and emptying the journal; a failed commit is
// superseded by the next; a re-read of an unchanged file writes nothing.

import { appendFile, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileStateStore, journalFileOf, type StateStore } from '../src/server/state/file/state-file.js';
import { SessionRegistry, type PersistedState, type StateChange } from '../src/server/state/file/session-registry.js';
import { MAX_READ_SET } from '../src/server/state/session-record.js';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kfs-state-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Counter {
  readonly items: string[];
}
type Add = { add: string };
const freshFile = () => join(dir, `state-${++n}.json`);

/** A tiny state for the store alone: a list that changes append to. */
async function reload(file: string): Promise<string[]> {
  const loaded = await fileStateStore<Counter, Add>(file).load();
  return [...(loaded?.snapshot?.items ?? []), ...(loaded?.changes ?? []).map((c) => c.add)];
}

async function commitAll(store: StateStore<Counter, Add>, items: string[], adds: string[]): Promise<void> {
  for (const a of adds) {
    items.push(a);
    await store.commit([{ add: a }], () => ({ items: [...items] }));
  }
}

/** One run of a store on `file`: load, commit `adds` one by one, close (as one control plane's life). */
async function runStore(file: string, items: string[], adds: string[]): Promise<void> {
  const store = fileStateStore<Counter, Add>(file);
  await store.load();
  await commitAll(store, items, adds);
  await store.close();
}

describe('fileStateStore', () => {
  it('writes a snapshot first, then appends; a restart replays the journal onto the snapshot', async () => {
    const file = freshFile();
    const store = fileStateStore<Counter, Add>(file);
    expect(await store.load()).toBeNull();
    const items: string[] = [];
    await commitAll(store, items, ['a', 'b', 'c']);
    await store.close();
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ items: ['a'] });
    expect((await readFile(journalFileOf(file), 'utf8')).trim().split('\n')).toHaveLength(2);
    expect(await reload(file)).toEqual(['a', 'b', 'c']);
  });

  it('rewrites the snapshot once the journal outgrows it, and empties the journal', async () => {
    const file = freshFile();
    const store = fileStateStore<Counter, Add>(file, { minJournalBytes: 100 });
    await store.load();
    const items: string[] = [];
    await commitAll(store, items, Array.from({ length: 20 }, (_, i) => `item-${i}`));
    await store.close();
    const snapshot = JSON.parse(await readFile(file, 'utf8')) as Counter & { journalSeq: number };
    expect(snapshot.items.length).toBeGreaterThan(1);
    expect((await stat(journalFileOf(file))).size).toBeLessThan(200);
    expect(await reload(file)).toEqual(items);
  });

  it('skips journal lines the snapshot already includes (a crash before the journal was emptied)', async () => {
    const file = freshFile();
    await runStore(file, [], ['a', 'b', 'c']);
    const journal = await readFile(journalFileOf(file), 'utf8');
    // Rewrite the snapshot as a compaction would, but leave the old lines behind.
    await writeFile(file, JSON.stringify({ items: ['a', 'b', 'c'], journalSeq: 3 }));
    await writeFile(journalFileOf(file), journal);
    expect(await reload(file)).toEqual(['a', 'b', 'c']);
  });

  it('ignores a last line cut short by a crash, and the next commit starts clean', async () => {
    const file = freshFile();
    const items: string[] = [];
    await runStore(file, items, ['a', 'b']);
    await appendFile(journalFileOf(file), '{"seq":3,"changes":[{"add":"c');
    expect(await reload(file)).toEqual(['a', 'b']);
    await runStore(file, items, ['d']);
    expect(await reload(file)).toEqual(['a', 'b', 'd']);
  });

  it('a broken line before the last stops the start with a config error naming the journal', async () => {
    const file = freshFile();
    await writeFile(file, JSON.stringify({ items: [] }));
    await writeFile(journalFileOf(file), '{"seq":1,"chan\n{"seq":2,"changes":[]}\n');
    await expect(fileStateStore<Counter, Add>(file).load()).rejects.toThrow(/\.journal: line 1 of the journal is not valid JSON/);
  });

  it('loads a state file written before the journal existed', async () => {
    const file = freshFile();
    await writeFile(file, JSON.stringify({ items: ['old'] }));
    expect(await reload(file)).toEqual(['old']);
  });
});

describe('fileStateStore, what a start accepts and refuses', () => {
  const journalLine = (seq: number, add: string) => `${JSON.stringify({ seq, changes: [{ add }] })}\n`;

  it('blank lines in the journal are skipped', async () => {
    const file = freshFile();
    await writeFile(file, JSON.stringify({ items: ['a'], journalSeq: 1 }));
    await writeFile(journalFileOf(file), `\n${journalLine(2, 'b')}\n\n${journalLine(3, 'c')}`);
    expect(await reload(file)).toEqual(['a', 'b', 'c']);
  });

  it('a line that is JSON but not a journal entry stops the start, naming its line', async () => {
    for (const bad of ['{"changes":[]}', '{"seq":"1","changes":[]}', '{"seq":1}', '{"seq":1,"changes":{}}']) {
      const file = freshFile();
      await writeFile(file, JSON.stringify({ items: [] }));
      await writeFile(journalFileOf(file), `${journalLine(1, 'a')}${bad}\n`);
      await expect(fileStateStore<Counter, Add>(file).load(), bad).rejects.toMatchObject({
        code: 'config',
        message: `${journalFileOf(file)}: line 2 of the journal is not a journal entry`,
      });
    }
  });

  it('a state file that is not a JSON object stops the start with a config error', async () => {
    for (const bad of ['null', '42', '"text"']) {
      const file = freshFile();
      await writeFile(file, bad);
      await expect(fileStateStore<Counter, Add>(file).load(), bad).rejects.toMatchObject({
        code: 'config',
        message: `${file}: the state file is not a JSON object; move it away to start empty`,
      });
    }
    const file = freshFile();
    await writeFile(file, '{"items":');
    await expect(fileStateStore<Counter, Add>(file).load()).rejects.toThrow(`${file}: the state file is not valid JSON`);
  });

  it('a state file or journal that cannot be read stops the start, naming which', async () => {
    const file = freshFile();
    await mkdir(file);
    await expect(fileStateStore<Counter, Add>(file).load()).rejects.toMatchObject({ code: 'config', message: expect.stringContaining(`${file}: cannot read the state file: `) });
    const other = freshFile();
    await mkdir(journalFileOf(other));
    await expect(fileStateStore<Counter, Add>(other).load()).rejects.toMatchObject({
      code: 'config',
      message: expect.stringContaining(`${journalFileOf(other)}: cannot read the state journal: `),
    });
  });

  it('a journal without a state file is loaded (the state file was moved away)', async () => {
    const file = freshFile();
    await writeFile(journalFileOf(file), journalLine(1, 'a') + journalLine(2, 'b'));
    const loaded = await fileStateStore<Counter, Add>(file).load();
    expect(loaded).toEqual({ snapshot: null, changes: [{ add: 'a' }, { add: 'b' }] });
  });

  it('a state file from before the journal takes every journal line after it', async () => {
    const file = freshFile();
    await writeFile(file, JSON.stringify({ items: ['old'] }));
    await writeFile(journalFileOf(file), journalLine(1, 'new'));
    expect(await reload(file)).toEqual(['old', 'new']);
  });

  it('after a clean start the next commit appends; commits go on from the last sequence number', async () => {
    const file = freshFile();
    const items: string[] = [];
    await runStore(file, items, ['a', 'b']);
    const snapshotBefore = await readFile(file, 'utf8');
    await runStore(file, items, ['c']);
    expect(await readFile(file, 'utf8')).toBe(snapshotBefore);
    const seqs = (await readFile(journalFileOf(file), 'utf8')).trim().split('\n').map((l) => (JSON.parse(l) as { seq: number }).seq);
    expect(seqs).toEqual([2, 3]);
    expect(await reload(file)).toEqual(['a', 'b', 'c']);
  });

  it('a state file with no journal beside it is appended to, not rewritten', async () => {
    for (const text of [JSON.stringify({ items: ['old'] }), JSON.stringify({ items: ['old'], journalSeq: 4 })]) {
      const file = freshFile();
      await writeFile(file, text);
      await runStore(file, ['old'], ['new']);
      expect(await readFile(file, 'utf8')).toBe(text);
      expect(await readFile(journalFileOf(file), 'utf8')).toMatch(/^\{"seq":\d+,"changes":\[\{"add":"new"\}\]\}\n$/);
      expect(await reload(file)).toEqual(['old', 'new']);
    }
  });

  it('a commit with no changes writes nothing', async () => {
    const file = freshFile();
    const store = fileStateStore<Counter, Add>(file);
    await store.load();
    await store.commit([], () => ({ items: [] }));
    await expect(stat(file)).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(stat(journalFileOf(file))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('close releases the journal\'s descriptor, and a later commit opens it again', async () => {
    const file = freshFile();
    const store = fileStateStore<Counter, Add>(file);
    await store.load();
    const items: string[] = [];
    await commitAll(store, items, ['a', 'b']);
    const held = async () => {
      const fds = await readdir('/proc/self/fd');
      const targets = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => '')));
      return targets.filter((t) => t === journalFileOf(file)).length;
    };
    expect(await held()).toBe(1);
    await store.close();
    expect(await held()).toBe(0);
    await commitAll(store, items, ['c']);
    expect(await held()).toBe(1);
    await store.close();
    expect(await reload(file)).toEqual(['a', 'b', 'c']);
  });
});

describe('SessionRegistry on the journal', () => {
  /** The real store, counting commits and failing them on demand. */
  function counted(file: string) {
    const real = fileStateStore<PersistedState, StateChange>(file);
    const box = { commits: 0, failing: false };
    const store: StateStore<PersistedState, StateChange> = {
      load: () => real.load(),
      commit: async (changes, state) => {
        box.commits++;
        if (box.failing) throw new Error('EIO: injected');
        await real.commit(changes, state);
      },
      close: () => real.close(),
    };
    return { store, box };
  }

  const entry = (path: string, sha: string) => ({ path, sha256: sha.repeat(64) });

  it('a re-read of the same (path, sha256) writes nothing; a changed file or a mount does', async () => {
    const file = freshFile();
    const { store, box } = counted(file);
    const registry = await SessionRegistry.open(store);
    const { record } = await registry.create({ kind: 'personal', creator: 'alice' }, '2025-01-01T00:00:00Z');
    await registry.recordRead(record, entry('account/a.md', 'a'), null);
    await registry.recordRead(record, entry('account/b.md', 'b'), null);
    const before = box.commits;
    expect(await registry.recordRead(record, entry('account/a.md', 'a'), null)).toBe(false);
    expect(box.commits).toBe(before);
    expect(record.readSet.map((e) => e.path)).toEqual(['account/a.md', 'account/b.md']); // kept its place
    await registry.recordRead(record, entry('account/a.md', 'c'), null);
    expect(box.commits).toBe(before + 1);
    expect(await registry.recordRead(record, entry('team_x/DUTY.md', 'd'), 'x')).toBe(true);
    expect(box.commits).toBe(before + 2);
    await registry.close();

    const reopened = await SessionRegistry.open(fileStateStore<PersistedState, StateChange>(file));
    const back = reopened.cached(record.id);
    expect(back?.mounted).toEqual(['x']);
    expect(back?.readSet).toEqual([entry('account/b.md', 'b'), entry('account/a.md', 'c'), entry('team_x/DUTY.md', 'd')]);
    await reopened.close();
  });

  it('after a failed commit a re-read is written again, and the rewrite keeps only acknowledged reads', async () => {
    const file = freshFile();
    const { store, box } = counted(file);
    const registry = await SessionRegistry.open(store);
    const { record } = await registry.create({ kind: 'personal', creator: 'alice' }, '2025-01-01T00:00:00Z');
    await registry.recordRead(record, entry('account/a.md', 'a'), null);
    box.failing = true;
    await expect(registry.recordRead(record, entry('account/b.md', 'b'), 'y')).rejects.toThrow(/could not save session state/);
    expect(record.mounted).toEqual([]);
    box.failing = false;
    const before = box.commits;
    // Memory may not equal disk after a failure: nothing is skipped until a commit succeeds.
    await registry.recordRead(record, entry('account/a.md', 'a'), null);
    expect(box.commits).toBe(before + 1);
    await registry.close();
    const reopened = await SessionRegistry.open(fileStateStore<PersistedState, StateChange>(file));
    expect(reopened.cached(record.id)?.readSet).toEqual([entry('account/a.md', 'a')]);
    expect(reopened.cached(record.id)?.mounted).toEqual([]);
    await reopened.close();
  });

  it('the read set holds at most MAX_READ_SET reads: the oldest are forgotten first, a re-read counts as new, a reopen agrees', async () => {
    const file = freshFile();
    const registry = await SessionRegistry.open(fileStateStore<PersistedState, StateChange>(file));
    const { record } = await registry.create({ kind: 'personal', creator: 'alice' }, '2025-01-01T00:00:00Z');
    const path = (i: number) => `account/f${i}.md`;
    await Promise.all(Array.from({ length: MAX_READ_SET }, (_, i) => registry.recordRead(record, entry(path(i), 'a'), null)));
    expect(record.readSet).toHaveLength(MAX_READ_SET);
    expect(record.readSet[0]?.path).toBe(path(0));
    // A re-read of f1 (another version) replaces its entry at the newest end: the set does not grow.
    await registry.recordRead(record, entry(path(1), 'b'), null);
    expect(record.readSet).toHaveLength(MAX_READ_SET);
    // Two new paths past the cap: f0 and then f2 are forgotten, not f1, and not the new ones.
    await registry.recordRead(record, entry('account/new-1.md', 'c'), null);
    await registry.recordRead(record, entry('account/new-2.md', 'c'), null);
    const expected = [...Array.from({ length: MAX_READ_SET - 3 }, (_, i) => path(i + 3)), path(1), 'account/new-1.md', 'account/new-2.md'];
    expect(record.readSet.map((e) => e.path)).toEqual(expected);
    expect(record.readSet.at(-3)).toEqual(entry(path(1), 'b'));
    await registry.close();
    const reopened = await SessionRegistry.open(fileStateStore<PersistedState, StateChange>(file));
    expect(reopened.cached(record.id)?.readSet.map((e) => e.path)).toEqual(expected);
    await reopened.close();
  });

  it('concurrent reads share commits, and every acknowledged one survives a reopen', async () => {
    const file = freshFile();
    const { store, box } = counted(file);
    const registry = await SessionRegistry.open(store);
    const { record } = await registry.create({ kind: 'personal', creator: 'alice' }, '2025-01-01T00:00:00Z');
    const before = box.commits;
    await Promise.all(Array.from({ length: 20 }, (_, i) => registry.recordRead(record, entry(`account/f${i}.md`, 'e'), i % 4 === 0 ? `t${i}` : null)));
    expect(box.commits - before).toBeLessThan(20);
    await registry.close();
    const reopened = await SessionRegistry.open(fileStateStore<PersistedState, StateChange>(file));
    expect(reopened.cached(record.id)?.readSet).toHaveLength(20);
    expect(reopened.cached(record.id)?.mounted).toEqual(['t0', 't4', 't8', 't12', 't16']);
    await reopened.close();
  });
});
