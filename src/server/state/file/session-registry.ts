// Sessions: who holds which runner token, what each has mounted and read.
//
// Tokens are `kfs_` + 32 random bytes (base64url). Only their sha256 is kept,
// in memory and on disk; a presented token is hashed, looked up by hash and
// compared with timingSafeEqual. Every change is persisted before the call
// that made it resolves (the HTTP answer waits for it). Commits are
// serialized and grouped: a change waits for the first commit that starts
// after it, which journals every change queued so far with one fdatasync
// (state-file.ts).
//
// A re-read of a file whose (path, sha256) is already in the read set changes
// nothing, so it writes nothing: once every change so far is durable, the
// entry is too, and the read is acknowledged at once (the entry keeps its
// place in the read set).

import { KnowledgeError } from '../../../core/errors.js';
import { applyRead, hashToken, holdsToken, newSession } from '../session-record.js';
import type { NewSession, ReadSetEntry, SessionRecord, SessionState, SessionStats } from '../session-state.js';
import type { StateStore } from './state-file.js';

export interface PersistedState {
  readonly version: 1;
  readonly sessions: SessionRecord[];
}

/** One journalled change; replayed in order onto the last snapshot at start. */
export type StateChange =
  | { readonly kind: 'create'; readonly session: SessionRecord }
  | { readonly kind: 'revoke'; readonly id: string }
  | { readonly kind: 'read'; readonly id: string; readonly entry: ReadSetEntry; readonly mount?: string }
  | { readonly kind: 'readSet'; readonly id: string; readonly readSet: ReadSetEntry[] };

function copyRecord(s: SessionRecord): SessionRecord {
  return { ...s, mounted: [...(s.mounted ?? [])], readSet: [...(s.readSet ?? [])] };
}

/** Applies a journalled change to the sessions loaded so far (the same effect it had when made). */
function replay(byId: Map<string, SessionRecord>, change: StateChange): void {
  if (change.kind === 'create') {
    byId.set(change.session.id, copyRecord(change.session));
    return;
  }
  const record = byId.get(change.id);
  if (record === undefined) return;
  if (change.kind === 'revoke') record.revoked = true;
  else if (change.kind === 'readSet') record.readSet = [...change.readSet];
  else applyRead(record, change.entry, change.mount);
}

/** The embedded mode's session state: every session in memory, changes journalled to a local file. */
export class SessionRegistry implements SessionState {
  private readonly byId = new Map<string, SessionRecord>();
  private readonly listeners = new Set<(sessionId: string) => void>();
  private readonly byTokenHash = new Map<string, SessionRecord>();
  private chain: Promise<void> = Promise.resolve();
  private pending: Promise<void> | null = null;
  /** Changes waiting for the next commit. */
  private queued: StateChange[] = [];
  /** Increases on every change: long-polls compare it. */
  generation = 0;
  /** The generation every change up to which is durable. */
  private durableGeneration = 0;

  private constructor(
    private readonly store: StateStore<PersistedState, StateChange>,
    private readonly where: string,
  ) {}

  /** `where` names the storage in the start-up log line (the state file). */
  static async open(store: StateStore<PersistedState, StateChange>, where = 'the state file'): Promise<SessionRegistry> {
    const registry = new SessionRegistry(store, where);
    const loaded = await store.load();
    const byId = new Map<string, SessionRecord>();
    for (const s of loaded?.snapshot?.sessions ?? []) byId.set(s.id, copyRecord(s));
    // Stryker disable next-line ArrayDeclaration: with nothing loaded there is no session a made-up change could name
    for (const change of loaded?.changes ?? []) replay(byId, change);
    for (const record of byId.values()) {
      registry.byId.set(record.id, record);
      registry.byTokenHash.set(record.tokenHash, record);
    }
    return registry;
  }

  stats(): SessionStats {
    const stats = { team: 0, personal: 0, mountedTeams: 0 };
    for (const record of this.byId.values()) {
      if (record.revoked) continue;
      stats[record.kind]++;
      stats.mountedTeams += record.mounted.length;
    }
    return stats;
  }

  async describe(): Promise<string> {
    return `${this.byId.size} sessions in ${this.where}`;
  }

  onChange(listener: (sessionId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The live session holding `token`, or null. Revoked sessions never match. */
  async authenticate(token: string): Promise<SessionRecord | null> {
    const hash = hashToken(token);
    const record = this.byTokenHash.get(hash);
    if (record === undefined || !holdsToken(record, hash)) return null;
    return record.revoked ? null : record;
  }

  cached(id: string): SessionRecord | undefined {
    return this.byId.get(id);
  }

  async find(id: string): Promise<SessionRecord | undefined> {
    return this.byId.get(id);
  }

  async create(input: NewSession, createdAt: string): Promise<{ record: SessionRecord; token: string }> {
    const { record, token } = newSession(input, createdAt);
    this.byId.set(record.id, record);
    this.byTokenHash.set(record.tokenHash, record);
    try {
      await this.changed({ kind: 'create', session: copyRecord(record) });
    } catch (err) {
      // Not durable, not acknowledged: the session never existed.
      this.byId.delete(record.id);
      // Stryker disable next-line CallExpression: memory only; the token was never handed out, so nobody can present it
      this.byTokenHash.delete(record.tokenHash);
      this.generation++;
      throw err;
    }
    return { record, token };
  }

  async revoke(id: string): Promise<boolean> {
    const record = this.byId.get(id);
    if (record === undefined) return false;
    if (!record.revoked) {
      // Revocation takes effect at once, even if saving it fails (fail closed).
      record.revoked = true;
      this.notify(id);
      await this.changed({ kind: 'revoke', id });
    }
    return true;
  }

  /** Records a successful read (replacing an older entry of the same path) and, if asked, a mount. */
  async recordRead(record: SessionRecord, entry: ReadSetEntry, mountTeam: string | null): Promise<boolean> {
    const mounts = mountTeam !== null && !record.mounted.includes(mountTeam);
    if (!mounts && this.generation === this.durableGeneration && record.readSet.some((e) => e.path === entry.path && e.sha256 === entry.sha256)) {
      return false; // already recorded, and durable: nothing to write
    }
    const before = { mounted: record.mounted, readSet: record.readSet };
    applyRead(record, entry, mounts ? mountTeam : undefined);
    const after = { mounted: record.mounted, readSet: record.readSet };
    try {
      await this.changed({ kind: 'read', id: record.id, entry, ...(mounts ? { mount: mountTeam } : {}) });
    } catch (err) {
      // Not acknowledged: undo, unless a later change already replaced ours.
      if (record.mounted === after.mounted) record.mounted = before.mounted;
      if (record.readSet === after.readSet) record.readSet = before.readSet;
      this.generation++;
      throw err;
    }
    this.notify(record.id);
    return mounts;
  }

  async replaceReadSet(record: SessionRecord, next: ReadSetEntry[]): Promise<void> {
    const same =
      next.length === record.readSet.length &&
      // Stryker disable next-line OptionalChaining: the lengths are equal, so record.readSet[i] is always there
      next.every((e, i) => e.path === record.readSet[i]?.path && e.sha256 === record.readSet[i]?.sha256);
    if (same) return;
    record.readSet = next;
    await this.changed({ kind: 'readSet', id: record.id, readSet: next });
  }

  private notify(sessionId: string): void {
    for (const listener of this.listeners) listener(sessionId);
  }

  /** Ends pending commits and releases the state store. */
  async close(): Promise<void> {
    await this.chain;
    await this.store.close();
  }

  /** Resolves once a commit that started after this call, and so includes `change`, has completed. */
  private changed(change: StateChange): Promise<void> {
    this.generation++;
    this.queued.push(change);
    if (this.pending === null) {
      const write = this.chain.then(async () => {
        this.pending = null;
        const changes = this.queued;
        this.queued = [];
        const generation = this.generation;
        await this.store.commit(changes, () => ({ version: 1, sessions: [...this.byId.values()] }));
        this.durableGeneration = Math.max(this.durableGeneration, generation);
      });
      this.pending = write;
      this.chain = write.catch(() => undefined);
    }
    return this.pending.catch((err: unknown) => {
      throw new KnowledgeError('unavailable', `could not save session state: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
  }
}
