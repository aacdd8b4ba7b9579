// The embedded session registry over an in-memory state store: what a start
// rebuilds from a snapshot and a journal, what each change journals, what a
// failed commit undoes, who is told of a change, and what authenticates.

import { describe, expect, it } from 'vitest';
import { SessionRegistry, type PersistedState, type StateChange } from '../src/server/state/file/session-registry.js';
import type { LoadedState, StateStore } from '../src/server/state/file/state-file.js';
import type { SessionRecord } from '../src/server/state/session-state.js';
import { hashToken } from '../src/server/state/session-record.js';

const AT = '2026-12-02T00:00:00.000Z';

/** A store that keeps its commits in memory; `fail` makes the next commits throw. */
class MemoryStore implements StateStore<PersistedState, StateChange> {
  readonly commits: StateChange[][] = [];
  readonly states: PersistedState[] = [];
  fail: Error | null = null;
  closed = 0;
  constructor(private readonly loaded: LoadedState<PersistedState, StateChange> | null = null) {}
  async load() {
    return this.loaded;
  }
  async commit(changes: readonly StateChange[], state: () => PersistedState) {
    await Promise.resolve();
    if (this.fail !== null) throw this.fail;
    this.commits.push([...changes]);
    this.states.push(state());
  }
  async close() {
    this.closed++;
  }
}

function record(id: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return { id, kind: 'personal', creator: 'alice', tokenHash: hashToken(`tok-${id}`), revoked: false, mounted: [], readSet: [], createdAt: AT, ...over };
}

const entry = (path: string, sha = 'a'.repeat(64)) => ({ path, sha256: sha });

/** A registry over a fresh in-memory store, holding one personal session of alice's. */
async function withAlice() {
  const store = new MemoryStore();
  const reg = await SessionRegistry.open(store);
  const { record: a, token } = await reg.create({ kind: 'personal', creator: 'alice' }, AT);
  return { store, reg, a, token };
}

describe('SessionRegistry.open', () => {
  it('starts empty when nothing was ever committed', async () => {
    const reg = await SessionRegistry.open(new MemoryStore(null));
    expect(reg.stats()).toEqual({ team: 0, personal: 0, mountedTeams: 0 });
    expect(await reg.describe()).toBe('0 sessions in the state file');
  });

  it('replays the journal onto the snapshot in order, and ignores changes of sessions it never saw', async () => {
    const snap = record('s1', { mounted: ['t1'], readSet: [entry('a.md')] });
    const created = record('s2', { kind: 'team', team: 't9' });
    const store = new MemoryStore({
      snapshot: { version: 1, sessions: [snap] },
      changes: [
        { kind: 'create', session: created },
        { kind: 'read', id: 's1', entry: entry('b.md'), mount: 't2' },
        { kind: 'read', id: 's2', entry: entry('c.md') },
        { kind: 'readSet', id: 's2', readSet: [entry('d.md')] },
        { kind: 'revoke', id: 'ghost' },
        { kind: 'read', id: 'ghost', entry: entry('x.md') },
        { kind: 'revoke', id: 's1' },
      ],
    } as LoadedState<PersistedState, StateChange>);
    const reg = await SessionRegistry.open(store, 'a test store');
    expect(await reg.describe()).toBe('2 sessions in a test store');
    const s1 = await reg.find('s1');
    expect(s1?.revoked).toBe(true);
    expect(s1?.mounted).toEqual(['t1', 't2']);
    expect(s1?.readSet.map((e) => e.path)).toEqual(['a.md', 'b.md']);
    const s2 = reg.cached('s2');
    expect(s2?.revoked).toBe(false);
    expect(s2?.readSet.map((e) => e.path)).toEqual(['d.md']);
    // The loaded records are copies: replaying never touched what the store handed over.
    expect(snap.mounted).toEqual(['t1']);
    expect(created.readSet).toEqual([]);
    // Revoked sessions are not counted; a live one is found by its token.
    expect(reg.stats()).toEqual({ team: 1, personal: 0, mountedTeams: 0 });
    expect((await reg.authenticate('tok-s2'))?.id).toBe('s2');
    expect(await reg.authenticate('tok-s1')).toBeNull();
    expect(await reg.authenticate('tok-nobody')).toBeNull();
  });

  it('rebuilds from a journal alone when no snapshot was written yet', async () => {
    const store = new MemoryStore({ snapshot: null, changes: [{ kind: 'create', session: record('s1') }] });
    const reg = await SessionRegistry.open(store);
    expect((await reg.authenticate('tok-s1'))?.id).toBe('s1');
  });

  it('copes with records that lack their lists', async () => {
    const bare = { ...record('s1'), mounted: undefined, readSet: undefined } as unknown as SessionRecord;
    const reg = await SessionRegistry.open(new MemoryStore({ snapshot: { version: 1, sessions: [bare] }, changes: [] } as LoadedState<PersistedState, StateChange>));
    expect(reg.cached('s1')?.mounted).toEqual([]);
    expect(reg.cached('s1')?.readSet).toEqual([]);
  });
});

describe('SessionRegistry changes', () => {
  it('journals a create, then authenticates its token; stats count by kind and mounted teams', async () => {
    const { store, reg, a, token } = await withAlice();
    const { record: b } = await reg.create({ kind: 'team', creator: 'bob', team: 't1' }, AT);
    expect(store.commits.flat().map((c) => c.kind)).toEqual(['create', 'create']);
    expect((await reg.authenticate(token))?.id).toBe(a.id);
    expect(await reg.recordRead(b, entry('x.md'), 't1')).toBe(true);
    expect(await reg.recordRead(b, entry('y.md'), 't2')).toBe(true);
    expect(reg.stats()).toEqual({ team: 1, personal: 1, mountedTeams: 2 });
    expect(reg.generation).toBe(4);
  });

  it('a create that cannot be saved never existed', async () => {
    const store = new MemoryStore();
    const reg = await SessionRegistry.open(store);
    const cause = new Error('disk full');
    store.fail = cause;
    const before = reg.generation;
    await expect(reg.create({ kind: 'personal', creator: 'alice' }, AT)).rejects.toMatchObject({
      code: 'unavailable',
      message: 'could not save session state: disk full',
      cause,
    });
    expect(await reg.describe()).toBe('0 sessions in the state file');
    expect(reg.stats().personal).toBe(0);
    expect(reg.generation).toBe(before + 2);
  });

  it('a revoke applies at once, tells the listeners, journals once, and is refused for unknown ids', async () => {
    const { store, reg, a, token } = await withAlice();
    const told: string[] = [];
    const stop = reg.onChange((id) => told.push(id));
    expect(await reg.revoke(a.id)).toBe(true);
    expect(await reg.revoke(a.id)).toBe(true);
    expect(await reg.revoke('ses_nobody')).toBe(false);
    expect(told).toEqual([a.id]);
    expect(await reg.authenticate(token)).toBeNull();
    expect(store.commits.flat().map((c) => c.kind)).toEqual(['create', 'revoke']);
    stop();
    const { record: b } = await reg.create({ kind: 'personal', creator: 'bob' }, AT);
    await reg.revoke(b.id);
    expect(told).toEqual([a.id]);
  });

  it('a revoke that cannot be saved still holds (fails closed)', async () => {
    const { store, reg, a, token } = await withAlice();
    store.fail = new Error('read-only file system');
    await expect(reg.revoke(a.id)).rejects.toMatchObject({ code: 'unavailable' });
    expect(await reg.authenticate(token)).toBeNull();
  });

  it('a read journals its entry and mount, tells the listeners, and a durable re-read writes nothing', async () => {
    const { store, reg, a } = await withAlice();
    const told: string[] = [];
    reg.onChange((id) => told.push(id));
    expect(await reg.recordRead(a, entry('a.md'), null)).toBe(false);
    expect(store.commits.at(-1)).toEqual([{ kind: 'read', id: a.id, entry: entry('a.md') }]);
    expect(await reg.recordRead(a, entry('a.md'), null)).toBe(false);
    expect(store.commits).toHaveLength(2);
    // The same path with other bytes is a change; so is a mount of a team not yet mounted.
    await reg.recordRead(a, entry('a.md', 'b'.repeat(64)), null);
    expect(await reg.recordRead(a, entry('a.md', 'b'.repeat(64)), 't1')).toBe(true);
    expect(store.commits.at(-1)).toEqual([{ kind: 'read', id: a.id, entry: entry('a.md', 'b'.repeat(64)), mount: 't1' }]);
    expect(await reg.recordRead(a, entry('a.md', 'b'.repeat(64)), 't1')).toBe(false);
    expect(store.commits).toHaveLength(4);
    expect(told).toEqual([a.id, a.id, a.id]);
    // The snapshot a store would write holds every session as it is now.
    expect(store.states.at(-1)?.sessions.map((s) => s.id)).toEqual([a.id]);
    expect(store.states.at(-1)?.version).toBe(1);
  });

  it('a re-read is written again while an earlier change is not yet durable', async () => {
    const { store, reg, a } = await withAlice();
    await reg.recordRead(a, entry('a.md'), null);
    store.fail = new Error('EIO');
    await expect(reg.recordRead(a, entry('b.md'), null)).rejects.toThrow('could not save session state: EIO');
    store.fail = null;
    // b.md failed, so nothing since the last commit is known durable: the re-read of a.md is journalled.
    const commits = store.commits.length;
    await reg.recordRead(a, entry('a.md'), null);
    expect(store.commits.length).toBe(commits + 1);
  });

  it('a read that cannot be saved is undone, mount included', async () => {
    const { store, reg, a } = await withAlice();
    await reg.recordRead(a, entry('a.md'), null);
    const told: string[] = [];
    reg.onChange((id) => told.push(id));
    store.fail = new Error('EIO');
    const before = reg.generation;
    await expect(reg.recordRead(a, entry('b.md'), 't1')).rejects.toMatchObject({ code: 'unavailable' });
    expect(a.mounted).toEqual([]);
    expect(a.readSet.map((e) => e.path)).toEqual(['a.md']);
    expect(told).toEqual([]);
    expect(reg.generation).toBe(before + 2);
  });

  it('a failed read keeps a later change that replaced its lists', async () => {
    const { store, reg, a } = await withAlice();
    store.fail = new Error('EIO');
    const failing = reg.recordRead(a, entry('a.md'), 't1');
    // Before the commit runs, another change replaces the read set and the mounts.
    a.readSet = [entry('z.md')];
    a.mounted = ['t7'];
    await expect(failing).rejects.toMatchObject({ code: 'unavailable' });
    expect(a.readSet).toEqual([entry('z.md')]);
    expect(a.mounted).toEqual(['t7']);
  });

  it('replaceReadSet writes only a different list (order counts)', async () => {
    const { store, reg, a } = await withAlice();
    await reg.recordRead(a, entry('a.md'), null);
    await reg.recordRead(a, entry('b.md'), null);
    const commits = store.commits.length;
    await reg.replaceReadSet(a, [entry('a.md'), entry('b.md')]);
    expect(store.commits.length).toBe(commits);
    await reg.replaceReadSet(a, [entry('b.md'), entry('a.md')]);
    await reg.replaceReadSet(a, [entry('b.md'), entry('a.md', 'c'.repeat(64))]);
    await reg.replaceReadSet(a, [entry('b.md')]);
    await reg.replaceReadSet(a, [entry('b.md'), entry('q.md')]);
    expect(store.commits.slice(commits).flat()).toEqual([
      { kind: 'readSet', id: a.id, readSet: [entry('b.md'), entry('a.md')] },
      { kind: 'readSet', id: a.id, readSet: [entry('b.md'), entry('a.md', 'c'.repeat(64))] },
      { kind: 'readSet', id: a.id, readSet: [entry('b.md')] },
      { kind: 'readSet', id: a.id, readSet: [entry('b.md'), entry('q.md')] },
    ]);
    expect(a.readSet).toEqual([entry('b.md'), entry('q.md')]);
  });

  it('changes made while a commit runs go together in the next one', async () => {
    const { store, reg, a } = await withAlice();
    await Promise.all([reg.recordRead(a, entry('1.md'), null), reg.recordRead(a, entry('2.md'), null), reg.recordRead(a, entry('3.md'), null)]);
    expect(store.commits.slice(1).map((c) => c.length)).toEqual([3]);
  });

  it('close waits for the pending commit, then closes the store', async () => {
    const store = new MemoryStore();
    const reg = await SessionRegistry.open(store);
    const creating = reg.create({ kind: 'personal', creator: 'alice' }, AT);
    await reg.close();
    expect(store.commits).toHaveLength(1);
    expect(store.closed).toBe(1);
    await creating;
  });

  it('a token of the wrong length, or another session\'s, never authenticates', async () => {
    const { token, reg } = await withAlice();
    expect(await reg.authenticate(`${token}x`)).toBeNull();
    expect(await reg.authenticate('')).toBeNull();
  });
});
