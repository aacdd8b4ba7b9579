// The contract between the control plane, the mount daemon and the CLI.
// Both HTTP surfaces speak these shapes; docs/API.md describes them for people.
//
// Control plane (TCP, bearer token):
//   POST   /v1/admin/sessions            admin token   CreateSessionRequest → 201 CreateSessionResponse
//   DELETE /v1/admin/sessions/<id>       admin token   → 204 (the runner token stops working)
//   GET    /v1/session                   runner token  → SessionView
//   GET    /v1/plan?threshold=N[&wait=S] runner token  → Plan (ETag "<version>"; If-None-Match → 304;
//                                                         wait holds a 304 up to S seconds, long-poll;
//                                                         known=… stubs; form=columns, plan-columns.ts)
//   GET    /v1/files/<scope>/<path>      runner token  → raw bytes, header x-kfs-sha256 (action "open")
//   GET    /v1/grants/<scope>            runner token  → GrantResponse                  (action "open")
//   POST   /v1/batch                     runner token  BatchRequest → 200 batch stream  (action "open", once per batch)
//                                                         content-type BATCH_CONTENT_TYPE: per path, in request order,
//                                                         one BatchFrameHeader JSON line, then exactly `size` bytes
//   POST   /v1/read                      runner token  ReadRequest → ReadResponse       (action "read"/"mount")
//   GET    /v1/manifest                  runner token  → ManifestResponse
//   GET    /v1/reminder[?today=YYYY-MM-DD] runner token → ReminderResponse (marks what it reports)
//   GET    /v1/admin/explain?session=ID[&path=<scope>/<path>][&threshold=N]
//                                        admin token   → ExplainResponse (decisions audited, action "explain")
//   GET    /healthz                      none          → {"ok": true}
//   GET    /metrics                      admin token   → Prometheus text (also on serve --metrics-listen, no token)
// Errors: status from HTTP_STATUS below, body ErrorBody. A personal session's
// denial is the exact response of a missing file (404, same body, same headers).
//
// Local control socket (daemon, HTTP over a unix socket, mode 0600, no token):
//   POST /read      LocalReadRequest → LocalReadResult
//   GET  /manifest  → ManifestResponse & {ok: true}
//   GET  /reminder  → ReminderResponse & {ok: true}
//   GET  /status    → DaemonStatus & {ok: true}
// Errors: {ok: false, error: {code, message}} with HTTP_STATUS.

import type { ErrorCode } from './errors.js';
import type { SessionKind } from './session/policy.js';

export const SHA256_HEADER = 'x-kfs-sha256';

export const HTTP_STATUS = {
  not_found: 404,
  denied: 403,
  invalid_argument: 400,
  unauthorized: 401,
  forbidden: 403,
  read_only: 405,
  unavailable: 503,
  membership_unavailable: 503,
  integrity: 502,
  too_large: 413,
  config: 500,
  internal: 500,
} as const satisfies Record<ErrorCode, number>;

export interface ErrorBody {
  readonly error: { readonly code: ErrorCode; readonly message: string };
}

export interface CreateSessionRequest {
  readonly kind: SessionKind;
  readonly creator: string;
  readonly team?: string;
}

export interface CreateSessionResponse {
  readonly sessionId: string;
  readonly token: string;
  readonly kind: SessionKind;
  readonly creator: string;
  readonly team?: string;
}

export interface SessionView {
  readonly sessionId: string;
  readonly kind: SessionKind;
  readonly creator: string;
  readonly team?: string;
  /** Teams mounted through the read tool, in mount order. */
  readonly mounted: readonly string[];
}

export interface GrantResponse {
  readonly scope: string;
  readonly allowed: true;
}

/** Most paths in one POST /v1/batch (the 64 KiB request body limit also applies). */
export const BATCH_MAX_PATHS = 1000;
export const BATCH_CONTENT_TYPE = 'application/x-kfs-batch';

/**
 * Request header marking background work a daemon does for no one waiting
 * (content prefetch): `x-kfs-priority: prefetch`. The control plane serves a
 * bounded number of those at once (--max-prefetch-batches) and answers the
 * rest 503 with Retry-After and SHED_HEADER, so an agent's opens and plans
 * never queue behind a fleet's prefetch.
 */
export const PRIORITY_HEADER = 'x-kfs-priority';
export const PREFETCH_PRIORITY = 'prefetch';
/** On a 503: the request was shed for load (retry after Retry-After), not a failure of the replica. */
export const SHED_HEADER = 'x-kfs-shed';

export interface BatchRequest {
  /** Every path belongs to this one scope: the request is decided once. */
  readonly scope: string;
  /** Paths inside the scope, e.g. `runbooks/db.md`; 1..BATCH_MAX_PATHS. */
  readonly paths: readonly string[];
}

/**
 * One frame header of the batch stream: a JSON line ending in "\n". A file
 * frame is followed by exactly `size` bytes whose sha256 is `sha256`; a
 * missing frame (no such file in the scope now) by nothing.
 */
export type BatchFrameHeader =
  | { readonly path: string; readonly sha256: string; readonly size: number }
  | { readonly path: string; readonly missing: true };

export interface ReadRequest {
  /** `<scope>/<path inside the scope>`, e.g. `team_search/DUTY.md`. */
  readonly path: string;
  /** True when the file is not in the daemon's tree: an allowed read of a team then mounts it. */
  readonly mount: boolean;
  /**
   * With `limit`: answer one page (`page`), not the file (`contentBase64`).
   * In characters (code points) of the file decoded as UTF-8; `offset`
   * defaults to 0, `limit` is at most READ_OUTPUT_CAP.
   */
  readonly offset?: number;
  readonly limit?: number;
}

/** Characters [offset, offset + limit) of a file, as the control plane cut them. */
export interface ReadPage {
  readonly content: string;
  readonly offset: number;
  /** The whole file's length in characters. */
  readonly totalChars: number;
  /** sha256 of `content` as UTF-8 (the file's own sha256 is the response's `sha256`). */
  readonly contentSha256: string;
}

export interface ReadResponse {
  readonly path: string;
  /** Of the whole file, whether the answer carries it or a page: the read set records this. */
  readonly sha256: string;
  /** Of the whole file, in bytes. */
  readonly size: number;
  /** The whole file's bytes, base64: when the request asked for no page (`limit`). */
  readonly contentBase64?: string;
  /** When the request asked for a page. */
  readonly page?: ReadPage;
  /** True when this read mounted the team (it was not mounted before). */
  readonly mounted: boolean;
}

/**
 * What a harness resolves before it offers it to the model. Each belongs to
 * a scope (the account or a team), and CanLoadScope decides for all of them
 * alike; the kind is what the audit log records as the decision's action.
 */
export const RESOURCE_KINDS = ['knowledge', 'skill', 'tool', 'agent'] as const;
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

/** Most scopes one can-load names; their decisions share one membership lookup. */
export const CAN_LOAD_MAX_SCOPES = 100;

export interface CanLoadRequest {
  /** Scope names as on the mount: `account`, `team_<id>`. */
  readonly scopes: readonly string[];
  readonly for: ResourceKind;
}

/** Why a scope was refused, with the read tool's codes and messages. */
export interface CanLoadRefusal {
  /** not_found: a personal session's refusal, word for word a scope that does not exist; denied: a team session, with guidance; membership_unavailable: fail closed. */
  readonly code: 'not_found' | 'denied' | 'membership_unavailable';
  readonly message: string;
}

export type CanLoadAnswer =
  | { readonly scope: string; readonly allowed: true }
  | { readonly scope: string; readonly allowed: false; readonly error: CanLoadRefusal };

export interface CanLoadResponse {
  readonly for: ResourceKind;
  /** One per requested scope, in the order asked. */
  readonly answers: readonly CanLoadAnswer[];
}

export interface ManifestResponse {
  /** Guidance and the DUTY.md of each advertised and mounted scope, exactly as `knowledgefs manifest` prints it. */
  readonly text: string;
  /** sha256 of `text`: changes only when a DUTY.md or the set of advertised/mounted teams does. */
  readonly sha256: string;
}

export interface ReminderResponse {
  /** Today's date and the paths of read files that changed or vanished, as `knowledgefs reminder` prints it. */
  readonly text: string;
  /** YYYY-MM-DD. */
  readonly date: string;
  /** Read-set paths (`<scope>/<path>`, e.g. `team_search/DUTY.md`) whose bytes changed since they were read; each reported once. */
  readonly changed: readonly string[];
  /** Read-set paths that no longer exist or can no longer be loaded; each reported once. */
  readonly deleted: readonly string[];
}

export interface LocalReadRequest {
  /** As the agent typed it: `knowledge/…` or an absolute path under the mount. */
  readonly path: string;
  /** The caller's working directory, to resolve relative paths. */
  readonly cwd: string;
  /** In characters; default 0. */
  readonly offset?: number;
  /** In characters; default and maximum READ_OUTPUT_CAP. */
  readonly limit?: number;
}

export const READ_OUTPUT_CAP = 100_000;

export interface LocalReadResult {
  readonly ok: true;
  /** As `ls`/`find` print it from the directory holding the mount: `knowledge/…`. */
  readonly path: string;
  readonly content: string;
  readonly sha256: string;
  /** File size in bytes. */
  readonly size: number;
  /** Characters skipped before `content`. */
  readonly offset: number;
  /** True when more characters follow `content`. */
  readonly truncated: boolean;
  /** Total length in characters. */
  readonly totalChars: number;
  /** True when this read mounted the file's team (it was not mounted before). */
  readonly mounted: boolean;
}

export interface DaemonStatus {
  readonly mountpoint: string;
  readonly sessionId: string;
  readonly planVersion: string;
  readonly files: number;
  readonly scopes: readonly string[];
  readonly prefetch: { readonly done: number; readonly total: number };
  /** The FUSE binding mounted and why, e.g. `native (prebuilt linux-x64)`. */
  readonly fuseBinding?: string;
  /** What the daemon has done since it started (the numbers its metrics export). */
  readonly activity?: DaemonActivity;
}

/** One FUSE operation kind: answers, errors, and latency from its histogram. */
export interface FuseOperationStats {
  readonly op: string;
  readonly count: number;
  /** Answers that were an errno, by errno name (ENOENT, EIO, …). */
  readonly errors: Readonly<Record<string, number>>;
  readonly meanMs: number | null;
  readonly p99Ms: number | null;
}

export interface DaemonActivity {
  readonly uptimeSeconds: number;
  readonly operations: readonly FuseOperationStats[];
  /** EIO answers, all operations together. */
  readonly eio: number;
  readonly cache: {
    readonly hits: number;
    readonly misses: number;
    /** hits / (hits + misses), null before the first lookup. */
    readonly hitRate: number | null;
    readonly memoryBytes: number;
    readonly diskBytes: number;
  };
  readonly fetches: {
    readonly files: number;
    readonly batches: number;
    readonly errors: number;
    readonly bytes: number;
    readonly readAheads: number;
  };
  readonly grants: { readonly asked: number; readonly reused: number };
  readonly sync: {
    /** Seconds since the control plane last confirmed the tree is current. */
    readonly planAgeSeconds: number;
    readonly checks: number;
    readonly errors: number;
  };
}

/** One CanLoadScope decision with its trace, as `explain` shows it. */
export interface ExplainDecision {
  readonly allowed: boolean;
  /** The rule that decided (policy.ts DecisionRule). */
  readonly rule: string;
  /** allow, deny, or fail_closed (the membership source failed). */
  readonly outcome: 'allow' | 'deny' | 'fail_closed';
  /** One sentence saying why. */
  readonly why: string;
}

/** A scope the session touches: its pack, and the three surfaces. */
export interface ExplainScope {
  readonly scope: string;
  /** The pack's current version, null when the scope has no pack. */
  readonly version: string | null;
  readonly files: number;
  readonly totalBytes: number;
  /** In the manifest (account, the bound team, mounted teams still loadable). */
  readonly advertised: boolean;
  /** In the plan at `threshold`: what `ls` in the mount shows. */
  readonly materialised: boolean;
  /** CanLoadScope allows it now. */
  readonly loadable: boolean;
  /** Brought in through the read tool. */
  readonly mounted: boolean;
  readonly decision: ExplainDecision;
}

export interface ExplainReadEntry {
  /** `<scope>/<path>`. */
  readonly path: string;
  /** The sha256 the agent read. */
  readonly readSha256: string;
  /** The sha256 the pack has now, null when the file is gone or no longer loadable. */
  readonly currentSha256: string | null;
  readonly state: 'unchanged' | 'changed' | 'deleted' | 'not-loadable';
}

export interface ExplainPath {
  /** `<scope>/<path>` as asked. */
  readonly path: string;
  readonly scope: string;
  readonly decision: ExplainDecision;
  /** The pack has the file (only looked up when the decision allows). */
  readonly exists: boolean | null;
  readonly sha256: string | null;
  readonly size: number | null;
  /** In the mount's tree now. */
  readonly materialised: boolean;
  /** What a read would answer: HTTP status and error code (null on 200). */
  readonly readAnswer: { readonly status: number; readonly code: string | null; readonly message: string | null };
}

export interface ExplainResponse {
  readonly session: {
    readonly id: string;
    readonly kind: SessionKind;
    readonly creator: string;
    readonly team: string | null;
    readonly revoked: boolean;
    readonly createdAt: string;
    readonly mounted: readonly string[];
  };
  /** The creator's memberships as the membership source answers now (or its failure). */
  readonly membership: {
    readonly source: 'directory' | 'http';
    readonly status: 'ok' | 'unknown-user' | 'error';
    readonly teams: readonly string[] | null;
    readonly error: string | null;
  };
  readonly threshold: number;
  /** Which rule picked the materialised set: everything loadable fits the threshold, or only account + bound + mounted. */
  readonly mode: 'all-loadable' | 'bound-and-mounted';
  readonly loadableBytes: number;
  readonly scopes: readonly ExplainScope[];
  readonly readSet: readonly ExplainReadEntry[];
  readonly path?: ExplainPath;
  /**
   * With `serve --audit-log postgres`: the session's last 20 decisions from
   * every replica, newest first (absent with a file or stdout audit log).
   */
  readonly recentDecisions?: {
    readonly decisions: readonly ExplainRecentDecision[];
    /** Why they could not be read (PostgreSQL down); the rest of the answer stands. */
    readonly error: string | null;
  };
}

/** One decision of the fleet's log, as `explain` shows it. */
export interface ExplainRecentDecision {
  readonly time: string;
  readonly replica: string;
  readonly action: string;
  readonly scope: string;
  readonly result: 'allow' | 'deny';
  readonly rule: string;
  readonly requestId: string | null;
}
