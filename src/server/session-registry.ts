// Sessions: who holds which runner token, what each has mounted and read.
//
// Tokens are `kfs_` + 32 random bytes (base64url). Only their sha256 is kept,
// in memory and on disk; a presented token is hashed, looked up by hash and
// compared with timingSafeEqual. Every change is persisted before the call
// that made it resolves (the HTTP answer waits for it). Saves are serialized
// and coalesced: a change waits for the first save that starts after it.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { KnowledgeError } from '../core/errors.js';
import type { SessionKind } from '../core/policy.js';
import type { StateStore } from './state-file.js';

export interface ReadSetEntry {
  path: string;
  sha256: string;
}

export interface SessionRecord {
  readonly id: string;
  readonly kind: SessionKind;
  readonly creator: string;
  readonly team?: string | undefined;
  readonly tokenHash: string;
  revoked: boolean;
  /** Team ids in mount order. */
  mounted: string[];
  readSet: ReadSetEntry[];
  readonly createdAt: string;
}

export interface PersistedState {
  readonly version: 1;
  readonly sessions: SessionRecord[];
}

export const TOKEN_PREFIX = 'kfs_';
/** Most read-set entries kept per session; the oldest reads are forgotten first. */
export const MAX_READ_SET = 10_000;

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export function newToken(): string {
  return `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

export class SessionRegistry {
  private readonly byId = new Map<string, SessionRecord>();
  private readonly byTokenHash = new Map<string, SessionRecord>();
  private chain: Promise<void> = Promise.resolve();
  private pending: Promise<void> | null = null;
  /** Increases on every change: long-polls compare it. */
  generation = 0;

  private constructor(private readonly store: StateStore<PersistedState>) {}

  static async open(store: StateStore<PersistedState>): Promise<SessionRegistry> {
    const registry = new SessionRegistry(store);
    const state = await store.load();
    for (const s of state?.sessions ?? []) {
      const record: SessionRecord = { ...s, mounted: [...(s.mounted ?? [])], readSet: [...(s.readSet ?? [])] };
      registry.byId.set(record.id, record);
      registry.byTokenHash.set(record.tokenHash, record);
    }
    return registry;
  }

  get size(): number {
    return this.byId.size;
  }

  /** The live session holding `token`, or null. Revoked sessions never match. */
  authenticate(token: string): SessionRecord | null {
    const presented = Buffer.from(hashToken(token), 'hex');
    const record = this.byTokenHash.get(presented.toString('hex'));
    if (record === undefined) return null;
    const stored = Buffer.from(record.tokenHash, 'hex');
    if (stored.length !== presented.length || !timingSafeEqual(stored, presented)) return null;
    return record.revoked ? null : record;
  }

  get(id: string): SessionRecord | undefined {
    return this.byId.get(id);
  }

  async create(input: { kind: SessionKind; creator: string; team?: string | undefined }, createdAt: string): Promise<{ record: SessionRecord; token: string }> {
    const token = newToken();
    const record: SessionRecord = {
      id: `ses_${randomBytes(12).toString('hex')}`,
      kind: input.kind,
      creator: input.creator,
      ...(input.team !== undefined ? { team: input.team } : {}),
      tokenHash: hashToken(token),
      revoked: false,
      mounted: [],
      readSet: [],
      createdAt,
    };
    this.byId.set(record.id, record);
    this.byTokenHash.set(record.tokenHash, record);
    try {
      await this.changed();
    } catch (err) {
      // Not durable, not acknowledged: the session never existed.
      this.byId.delete(record.id);
      this.byTokenHash.delete(record.tokenHash);
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
      await this.changed();
    }
    return true;
  }

  /** Records a successful read (replacing an older entry of the same path) and, if asked, a mount. */
  async recordRead(record: SessionRecord, entry: ReadSetEntry, mountTeam: string | null): Promise<boolean> {
    const before = { mounted: record.mounted, readSet: record.readSet };
    let mounted = false;
    if (mountTeam !== null && !record.mounted.includes(mountTeam)) {
      record.mounted = [...record.mounted, mountTeam];
      mounted = true;
    }
    const next = [...record.readSet.filter((e) => e.path !== entry.path), entry];
    record.readSet = next.length > MAX_READ_SET ? next.slice(next.length - MAX_READ_SET) : next;
    const after = { mounted: record.mounted, readSet: record.readSet };
    try {
      await this.changed();
    } catch (err) {
      // Not acknowledged: undo, unless a later change already replaced ours.
      if (record.mounted === after.mounted) record.mounted = before.mounted;
      if (record.readSet === after.readSet) record.readSet = before.readSet;
      throw err;
    }
    return mounted;
  }

  async replaceReadSet(record: SessionRecord, next: ReadSetEntry[]): Promise<void> {
    const same =
      next.length === record.readSet.length &&
      next.every((e, i) => e.path === record.readSet[i]?.path && e.sha256 === record.readSet[i]?.sha256);
    if (same) return;
    record.readSet = next;
    await this.changed();
  }

  /** Resolves once every save asked for so far has ended. */
  async drain(): Promise<void> {
    await this.chain;
  }

  /** Resolves once a save that started after this call has completed. */
  private changed(): Promise<void> {
    this.generation++;
    if (this.pending === null) {
      const write = this.chain.then(() => {
        this.pending = null;
        return this.store.save({ version: 1, sessions: [...this.byId.values()] });
      });
      this.pending = write;
      this.chain = write.catch(() => undefined);
    }
    return this.pending.catch((err: unknown) => {
      throw new KnowledgeError('unavailable', `could not save session state: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
  }
}
