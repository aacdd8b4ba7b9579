// The session-state seam: everything the routes need from session storage.
// Two implementations stand behind it and the routes never ask which one
// they have: the file-backed registry of the embedded mode
// (session-registry.ts) and PostgreSQL for replicas (pg-session-state.ts);
// open-session-state.ts picks one from `--state`.
//
// Contract, in both:
// - Every acknowledgement (session created, revoked, read or mount recorded)
//   is durable before the promise resolves; a rejected promise changed
//   nothing that a later request can see as acknowledged.
// - The records handed out are live: the state updates `mounted`, `readSet`
//   and `revoked` in place when they change (through this process or, with
//   PostgreSQL, through another replica), so a long-poll holding a record
//   sees changes without asking again.
// - When the state cannot be trusted (storage unreachable), calls throw
//   KnowledgeError('unavailable'): the routes answer 503, never a guess.

import type { SessionKind } from '../../core/session/policy.js';

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

export interface NewSession {
  readonly kind: SessionKind;
  readonly creator: string;
  readonly team?: string | undefined;
}

/** Live (not revoked) sessions by kind, and the teams they have mounted. */
export interface SessionStats {
  readonly team: number;
  readonly personal: number;
  readonly mountedTeams: number;
}

export interface SessionState {
  /** The live session holding `token`, or null (unknown or revoked). */
  authenticate(token: string): Promise<SessionRecord | null>;
  create(input: NewSession, createdAt: string): Promise<{ record: SessionRecord; token: string }>;
  /** Revokes the session; false when there is no such session. */
  revoke(id: string): Promise<boolean>;
  /** Records a successful read (and, if asked, a mount); true when the team was newly mounted. */
  recordRead(record: SessionRecord, entry: ReadSetEntry, mountTeam: string | null): Promise<boolean>;
  /** Stores the read set the reminder computed (changed entries updated, vanished ones forgotten). */
  replaceReadSet(record: SessionRecord, next: ReadSetEntry[]): Promise<void>;
  /**
   * Calls `listener` with the id of every session that changed, here or
   * elsewhere, once the change is visible in the records; returns the
   * unsubscribe function. Long-polls wake on it.
   */
  onChange(listener: (sessionId: string) => void): () => void;
  /** The record this process holds for session `id`, without any I/O (tests, status), or undefined. */
  cached(id: string): SessionRecord | undefined;
  /** Session `id`, revoked or not, looked up wherever the state lives (admin routes); undefined when unknown. */
  find(id: string): Promise<SessionRecord | undefined>;
  /** The last known counts, without I/O (metrics scrapes); PostgreSQL's are refreshed in the background. */
  stats(): SessionStats;
  /** One line for the start-up log, e.g. "12 sessions in /srv/state.json". */
  describe(): Promise<string>;
  /** Ends pending work and releases connections and files. */
  close(): Promise<void>;
}
