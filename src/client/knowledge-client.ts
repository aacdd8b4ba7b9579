// KnowledgeClient: the read tool, the manifest and the reminder for agent
// harnesses written in TypeScript/JavaScript, over the mount daemon's control
// socket. The CLI (`knowledgefs read|manifest|reminder|doctor`) and the MCP
// server (`knowledgefs mcp`) are built on it, so all three behave alike.
//
//   const kfs = new KnowledgeClient();                 // $KNOWLEDGEFS_SOCKET or the standard path
//   const { content, truncated, nextOffset } = await kfs.read('knowledge/team_search/DUTY.md');
//   const { text, sha256 } = await kfs.manifest();     // stable prompt prefix; cache on sha256
//   const { text: tail } = await kfs.reminder();       // volatile tail, each change once
//
// The client decides nothing: every read gets a fresh decision from the
// control plane through the daemon. It only rejects arguments that cannot be
// right (a negative offset, an empty path) before they reach the daemon.
// Failures are thrown as the classes in errors.ts; see isTemporary().

import { tmpdir } from 'node:os';
import { defaultSocketPath } from '../core/local/socket-path.js';
import { parseCanLoadRequest } from '../core/can-load-request.js';
import { isKnowledgeError } from '../core/errors.js';
import {
  READ_OUTPUT_CAP,
  type CanLoadAnswer,
  type CanLoadResponse,
  type DaemonStatus,
  type LocalReadRequest,
  type LocalReadResult,
  type ManifestResponse,
  type ReminderResponse,
  type ResourceKind,
} from '../core/wire.js';
import { InvalidArgumentError } from './errors.js';
import { daemonUid } from './daemon-user.js';
import { controlSocketPath } from './socket-path.js';
import { DEFAULT_TIMEOUT_MS, SocketTransport } from './socket-transport.js';

export { READ_OUTPUT_CAP, RESOURCE_KINDS, type CanLoadAnswer, type DaemonStatus, type ResourceKind } from '../core/wire.js';

export interface KnowledgeClientOptions {
  /** The mount daemon's control socket. Default: `$KNOWLEDGEFS_SOCKET`, else the path `knowledgefs mount` uses by default. */
  readonly socketPath?: string;
  /** Bound on each call, in milliseconds (default 60 000: a read that mounts a team fetches and refreshes the plan). */
  readonly timeoutMs?: number;
  /** Directory that relative paths are resolved from. Default: `process.cwd()` at each call. */
  readonly cwd?: string;
  /**
   * The mount daemon's user (name or uid) when it runs as a user of its own
   * (mount-helper --user): its socket and directory are trusted beside root
   * and the caller's. Default: `$KNOWLEDGEFS_DAEMON_USER`, else none.
   */
  readonly daemonUser?: string | number;
}

export interface ReadOptions {
  /** Characters to skip (default 0). */
  readonly offset?: number;
  /** Characters to return at most: 1..READ_OUTPUT_CAP (default READ_OUTPUT_CAP). */
  readonly limit?: number;
  /** Directory that a relative `path` is resolved from, for this call. */
  readonly cwd?: string;
}

export interface ReadResult {
  /** As `ls`/`find` print it from the directory holding the mount: `knowledge/…`. */
  readonly path: string;
  /** The characters from `offset`, at most `limit` of them. */
  readonly content: string;
  /** sha256 of the whole file's bytes, hex. */
  readonly sha256: string;
  /** The whole file's size in bytes. */
  readonly size: number;
  /** Characters skipped before `content`. */
  readonly offset: number;
  /** The whole file's length in characters (code points). */
  readonly totalChars: number;
  /** True when characters follow `content`. */
  readonly truncated: boolean;
  /** The `offset` that continues where `content` stops, or null when nothing follows. */
  readonly nextOffset: number | null;
  /** True when this read mounted the file's team: `ls` and `grep -r` see the team from now on. */
  readonly mounted: boolean;
}

export interface CanLoadOptions {
  /** What the harness is about to offer the model: recorded as the decision's action in the audit log. */
  readonly for: ResourceKind;
}

export interface CanLoadResult {
  readonly for: ResourceKind;
  /** One per scope asked, in order; a refusal carries the read tool's code and message. */
  readonly answers: readonly CanLoadAnswer[];
  /** True when every scope asked is allowed. */
  readonly allowed: boolean;
}

/** The stable prompt prefix and its sha256 (cache on it). */
export type Manifest = ManifestResponse;

/** The volatile tail: today's date and the read files that changed or vanished, each reported once. */
export type Reminder = ReminderResponse;

function checkCount(name: string, value: unknown, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  // Number.isSafeInteger is false for anything that is not a number, so no typeof test is needed.
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
    throw new InvalidArgumentError(`${name} must be a whole number in ${min}..${max === Number.MAX_SAFE_INTEGER ? '' : max} (got ${String(value)})`);
  }
  return value as number;
}

function checkPath(path: unknown): string {
  if (typeof path !== 'string' || path === '') throw new InvalidArgumentError('path must be a non-empty string, e.g. knowledge/account/DUTY.md');
  if (path.includes('\0')) throw new InvalidArgumentError(`${JSON.stringify(path)}: NUL character in path`);
  return path;
}

/** Number of code points in `text` (what offsets and limits count). */
function charCount(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

export class KnowledgeClient {
  readonly socketPath: string;
  private readonly transport: SocketTransport;
  private readonly cwd: string | undefined;

  constructor(options: KnowledgeClientOptions = {}) {
    this.socketPath = controlSocketPath(options.socketPath);
    const timeoutMs = checkCount('timeoutMs', options.timeoutMs, 1, 2 ** 31 - 1) ?? DEFAULT_TIMEOUT_MS;
    this.transport = new SocketTransport(this.socketPath, timeoutMs, daemonUid(options.daemonUser));
    this.cwd = options.cwd;
  }

  /**
   * The read tool: the file's text, decided afresh by the control plane. A
   * file of an eligible team that is not on disk is loaded and its team
   * mounted (`mounted: true`). Throws NotFoundError (also for a team a
   * personal session may not see), DeniedError (team sessions, with
   * guidance), InvalidArgumentError, UnavailableError, IntegrityError.
   */
  async read(path: string, options: ReadOptions = {}): Promise<ReadResult> {
    const offset = checkCount('offset', options.offset, 0, Number.MAX_SAFE_INTEGER);
    const limit = checkCount('limit', options.limit, 1, READ_OUTPUT_CAP);
    const req: LocalReadRequest = {
      path: checkPath(path),
      cwd: options.cwd ?? this.cwd ?? process.cwd(),
      // Stryker disable next-line ConditionalExpression: `{ offset: undefined }` is sent as no offset at all (JSON drops undefined)
      ...(offset === undefined ? {} : { offset }),
      // Stryker disable next-line ConditionalExpression: as for offset
      ...(limit === undefined ? {} : { limit }),
    };
    const res = (await this.transport.call('POST', '/read', req)) as LocalReadResult;
    return {
      path: res.path,
      content: res.content,
      sha256: res.sha256,
      size: res.size,
      offset: res.offset,
      totalChars: res.totalChars,
      truncated: res.truncated,
      nextOffset: res.truncated ? res.offset + charCount(res.content) : null,
      mounted: res.mounted === true,
    };
  }

  /**
   * May this session use a resource of these scopes (a skill, a team's MCP
   * tool, a sub-agent, or knowledge)? Scopes are named as on the mount:
   * `account`, `team_<id>`. The control plane decides, as for a read, with one
   * membership lookup for all of them, and audits each answer; nothing is
   * mounted or added to the read set. A refusal is an answer, not a throw:
   * `not_found` (a personal session: exactly what a scope that does not exist
   * gets), `denied` (a team session, with guidance) or
   * `membership_unavailable` (fail closed). Throws InvalidArgumentError for a
   * malformed scope or kind, UnavailableError when the control plane cannot
   * answer, DaemonUnreachableError without a daemon.
   */
  async canLoad(scopes: string | readonly string[], options: CanLoadOptions): Promise<CanLoadResult> {
    let req;
    try {
      req = parseCanLoadRequest({ scopes: typeof scopes === 'string' ? [scopes] : scopes, for: options?.for });
    } catch (err) {
      throw new InvalidArgumentError(isKnowledgeError(err) ? err.message : String(err));
    }
    const res = (await this.transport.call('POST', '/can-load', req)) as CanLoadResponse;
    return { for: res.for, answers: res.answers, allowed: res.answers.every((a) => a.allowed) };
  }

  /** The stable prompt prefix, byte-identical to `knowledgefs manifest`. */
  async manifest(): Promise<Manifest> {
    const res = (await this.transport.call('GET', '/manifest')) as ManifestResponse;
    return { text: res.text, sha256: res.sha256 };
  }

  /** The volatile tail. Reports each change once: a second call does not repeat it. */
  async reminder(): Promise<Reminder> {
    const res = (await this.transport.call('GET', '/reminder')) as ReminderResponse;
    return { text: res.text, date: res.date, changed: res.changed, deleted: res.deleted };
  }

  /** The daemon's mount point, plan version, file count and prefetch progress. */
  async status(): Promise<DaemonStatus> {
    const { ok: _ok, ...status } = (await this.transport.call('GET', '/status')) as DaemonStatus & { ok: true };
    return status;
  }

  /** Closes the kept-alive connection to the daemon (idle connections never keep a process alive). */
  close(): void {
    this.transport.close();
  }
}
