// Every metric knowledgefs exports, as plain data, and the small interface
// the parts record through. The Prometheus registry (prom-client) lives at
// the edge (src/metrics/); the core and the route handlers only see
// `MetricsRecorder`, so a new backend (a state store, an object store, a FUSE
// binding) records by calling `inc/add/set/observe` on the metric specs below.
//
// Labels are closed sets written out here: route templates, status classes,
// decision actions and outcomes, operation kinds. They never carry a user,
// team, session, path or token, so cardinality is bounded by this file and a
// scrape leaks nothing. The recorder's types only accept the listed values;
// the registry checks them again at run time.

import type { Decision } from './session/policy.js';

export type LabelSets = Readonly<Record<string, readonly string[]>>;

interface BaseSpec<L extends LabelSets> {
  readonly name: string;
  readonly help: string;
  readonly labels: L;
}
export interface CounterSpec<L extends LabelSets = LabelSets> extends BaseSpec<L> {
  readonly type: 'counter';
}
export interface GaugeSpec<L extends LabelSets = LabelSets> extends BaseSpec<L> {
  readonly type: 'gauge';
}
export interface HistogramSpec<L extends LabelSets = LabelSets> extends BaseSpec<L> {
  readonly type: 'histogram';
  /** Upper bounds in the metric's unit (seconds, bytes, files). */
  readonly buckets: readonly number[];
}
export type MetricSpec = CounterSpec | GaugeSpec | HistogramSpec;

/** `{route: 'plan', status_class: '2xx'}`: one allowed value per label of the spec. */
export type LabelsOf<S extends { readonly labels: LabelSets }> = { readonly [K in keyof S['labels']]: S['labels'][K][number] };

export interface MetricsRecorder {
  inc<S extends CounterSpec>(spec: S, labels: LabelsOf<S>, by?: number): void;
  /** Moves a gauge up or down (long-polls open, requests in flight). */
  add<S extends GaugeSpec>(spec: S, labels: LabelsOf<S>, delta: number): void;
  set<S extends GaugeSpec>(spec: S, labels: LabelsOf<S>, value: number): void;
  observe<S extends HistogramSpec>(spec: S, labels: LabelsOf<S>, value: number): void;
}

/** Records nothing: for parts built without a registry (tests, library use). */
export const NO_METRICS: MetricsRecorder = {
  inc: () => undefined,
  add: () => undefined,
  set: () => undefined,
  observe: () => undefined,
};

function counter<L extends LabelSets>(name: string, help: string, labels: L): CounterSpec<L> {
  return { type: 'counter', name, help, labels };
}
function gauge<L extends LabelSets>(name: string, help: string, labels: L): GaugeSpec<L> {
  return { type: 'gauge', name, help, labels };
}
function histogram<L extends LabelSets>(name: string, help: string, labels: L, buckets: readonly number[]): HistogramSpec<L> {
  return { type: 'histogram', name, help, labels, buckets };
}

/** Seconds: from a cached metadata answer (~50 µs) to a timed-out request (~10 s). */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

// ---- label values ------------------------------------------------------

/** Route templates of the control plane's HTTP API; anything else is `other`. */
export const HTTP_ROUTES = [
  'healthz',
  'metrics',
  'admin_session_create',
  'admin_session_revoke',
  'admin_explain',
  'session',
  'plan',
  'plan_long_poll',
  'files',
  'grants',
  'batch',
  'read',
  'can_load',
  'manifest',
  'reminder',
  'other',
] as const;
export type HttpRoute = (typeof HTTP_ROUTES)[number];

export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];

/** The audit sinks that buffer, and so may drop (`--audit-log -` and `--audit-log postgres`). */
export const AUDIT_SINKS = ['stdout', 'postgres'] as const;

/** What a decision was for (the audit log's `action`). */
export const DECISION_ACTIONS = ['plan', 'open', 'read', 'mount', 'manifest', 'reminder', 'explain', 'knowledge', 'skill', 'tool', 'agent'] as const;
export const SESSION_KINDS = ['team', 'personal'] as const;
/** `fail_closed`: denied because the membership source failed or timed out. */
export const DECISION_OUTCOMES = ['allow', 'deny', 'fail_closed'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

export const MEMBERSHIP_SOURCES = ['directory', 'http'] as const;
export const MEMBERSHIP_RESULTS = ['ok', 'unknown_user', 'error'] as const;
export const SCAN_KINDS = ['full', 'partial'] as const;
export const RESULTS = ['ok', 'error'] as const;
export const CACHE_RESULTS = ['hit', 'miss'] as const;
/** Requests to object storage (`serve --store`). */
export const OBJECT_STORE_OPS = ['get', 'put', 'head', 'list'] as const;
/** What became of a new publication a replica found: taken, or refused as malformed. */
export const PUBLICATION_RESULTS = ['taken', 'refused'] as const;

/**
 * FUSE operations the mount daemon answers; every write-type operation (all
 * refused) is `write`. `lookup`, `opendir` and `releasedir` reach the daemon
 * on the native binding only (fuse-native's libfuse answers them itself).
 */
export const FUSE_OPS = ['lookup', 'getattr', 'readdir', 'opendir', 'releasedir', 'access', 'statfs', 'open', 'read', 'release', 'write'] as const;
export type FuseOp = (typeof FUSE_OPS)[number];
/** How a FUSE operation ended: `ok`, or the errno it returned. */
export const FUSE_RESULTS = ['ok', 'ENOENT', 'EIO', 'EROFS', 'EACCES', 'ESTALE', 'other_error'] as const;
export type FuseResult = (typeof FUSE_RESULTS)[number];
export const GRANT_RESULTS = ['asked', 'reused'] as const;
/** `file`: one body per request (an open); `batch`: many per request (read-ahead, prefetch). */
export const FETCH_KINDS = ['file', 'batch'] as const;
export const CACHE_TIERS = ['memory', 'disk'] as const;
export const PREFETCH_STATES = ['total', 'done'] as const;

// ---- control plane -----------------------------------------------------

export const CONTROL_PLANE_METRICS = {
  httpRequests: counter('knowledgefs_http_requests_total', 'HTTP requests answered, by route template and status class.', {
    route: HTTP_ROUTES,
    status_class: STATUS_CLASSES,
  }),
  httpDuration: histogram('knowledgefs_http_request_duration_seconds', 'Time from a request arriving to its answer being sent, by route template.', { route: HTTP_ROUTES }, LATENCY_BUCKETS),
  httpInFlight: gauge('knowledgefs_http_requests_in_flight', 'Requests being answered now (long-polls included).', {}),
  decisions: counter('knowledgefs_decisions_total', 'CanLoadScope decisions recorded in the audit log, by action, session kind and outcome.', {
    action: DECISION_ACTIONS,
    session_kind: SESSION_KINDS,
    outcome: DECISION_OUTCOMES,
  }),
  membershipLookups: counter('knowledgefs_membership_lookups_total', 'Membership lookups, by source and result (error: failed, timed out or answered garbage).', {
    source: MEMBERSHIP_SOURCES,
    result: MEMBERSHIP_RESULTS,
  }),
  membershipDuration: histogram('knowledgefs_membership_lookup_duration_seconds', 'Time one membership lookup took, by source.', { source: MEMBERSHIP_SOURCES }, LATENCY_BUCKETS),
  planLongPolls: gauge('knowledgefs_plan_long_polls_open', 'Plan long-polls waiting for a change now.', {}),
  prefetchShed: counter('knowledgefs_prefetch_shed_total', 'Prefetch batches answered 503 + Retry-After because --max-prefetch-batches were being served already (the daemon asks again later).', {}),
  auditDropped: counter('knowledgefs_audit_dropped_total', 'Decisions the audit log dropped because its sink (stdout or PostgreSQL) was slow or down and the bounded buffer was full (the oldest go first); 0 with a file.', { sink: AUDIT_SINKS }),
  stateRoundTrips: counter('knowledgefs_state_round_trips_total', 'Queries sent to the PostgreSQL session state for requests and for following other replicas (one round trip each); 0 with a state file.', {}),
  sessions: gauge('knowledgefs_sessions', 'Sessions that are not revoked, by kind.', { kind: SESSION_KINDS }),
  mountedTeams: gauge('knowledgefs_mounted_teams', 'Teams mounted through the read tool, summed over live sessions.', {}),
  packScans: counter('knowledgefs_pack_scans_total', 'Scans of the packs (full, or of changed directories; with --store, looks for a new publication), by result.', { kind: SCAN_KINDS, result: RESULTS }),
  packScanDuration: histogram('knowledgefs_pack_scan_duration_seconds', 'Time one pack scan took.', { kind: SCAN_KINDS }, LATENCY_BUCKETS),
  scopes: gauge('knowledgefs_scopes', 'Scopes (account and team packs) being served.', {}),
  packFiles: gauge('knowledgefs_pack_files', 'Files in all served packs.', {}),
  packBytes: gauge('knowledgefs_pack_bytes', 'Bytes of all files in the served packs.', {}),
  objectStoreRequests: counter('knowledgefs_object_store_requests_total', 'Requests to object storage (serve --store), by operation and result (error: unreachable, timed out, refused or answered garbage).', {
    op: OBJECT_STORE_OPS,
    result: RESULTS,
  }),
  objectStoreDuration: histogram('knowledgefs_object_store_request_duration_seconds', 'Time one object-storage request took, by operation.', { op: OBJECT_STORE_OPS }, LATENCY_BUCKETS),
  publications: counter('knowledgefs_publications_total', 'New publications found in object storage: taken, or refused as malformed (the previous one stays served).', { result: PUBLICATION_RESULTS }),
  blobCache: counter('knowledgefs_blob_cache_requests_total', 'File reads looked up in the blob cache of a publication store (--store), by result; 0 with --data.', { result: CACHE_RESULTS }),
} as const;

// ---- mount daemon ------------------------------------------------------

export const DAEMON_METRICS = {
  fuseOps: counter('knowledgefs_fuse_operations_total', 'FUSE operations answered, by operation and result (ok, or the errno returned).', {
    op: FUSE_OPS,
    result: FUSE_RESULTS,
  }),
  fuseDuration: histogram('knowledgefs_fuse_operation_duration_seconds', 'Time from a FUSE operation reaching the daemon to its answer, by operation.', { op: FUSE_OPS }, LATENCY_BUCKETS),
  cacheLookups: counter('knowledgefs_content_cache_requests_total', 'Content lookups in the memory cache (opens, read-ahead, prefetch), by result.', { result: CACHE_RESULTS }),
  cacheBytes: gauge('knowledgefs_content_cache_bytes', 'Bytes held by the content cache, by tier (disk only with --cache-dir).', { tier: CACHE_TIERS }),
  fetches: counter('knowledgefs_fetches_total', 'Requests for file bodies to the control plane, by kind and result.', { kind: FETCH_KINDS, result: RESULTS }),
  fetchedBytes: counter('knowledgefs_fetched_bytes_total', 'Bytes of file bodies received and verified against their sha256.', {}),
  readAheads: counter('knowledgefs_read_aheads_total', 'Directory read-aheads started (a second cache miss in a row in one directory).', {}),
  prefetchFiles: gauge('knowledgefs_prefetch_files', 'Background prefetch of the current tree: files to fetch, and files done.', { state: PREFETCH_STATES }),
  grants: counter('knowledgefs_grants_total', 'Open grants: asked of the control plane, or reused within --grant-ttl.', { result: GRANT_RESULTS }),
  syncs: counter('knowledgefs_syncs_total', 'Plan checks of the sync loop (answered, changed or not; or failed).', { result: RESULTS }),
  planAge: gauge('knowledgefs_plan_age_seconds', 'Seconds since the control plane last confirmed the tree is its current plan (sync lag).', {}),
  planFiles: gauge('knowledgefs_plan_files', 'Files in the mounted tree.', {}),
} as const;

export const ALL_METRICS: readonly MetricSpec[] = [...Object.values(CONTROL_PLANE_METRICS), ...Object.values(DAEMON_METRICS)];

// ---- classifiers (pure) -----------------------------------------------

export function statusClass(status: number): StatusClass {
  const cls = `${Math.min(5, Math.max(1, Math.floor(status / 100)))}xx`;
  return cls as StatusClass;
}

/** allow; deny; or fail_closed when the membership source could not answer. */
export function decisionOutcome(decision: Decision): DecisionOutcome {
  if (decision.allowed) return 'allow';
  return decision.rule === 'membership-unavailable' ? 'fail_closed' : 'deny';
}

/** The errno name a FUSE answer's code stands for (negative: -errno; zero or more: success). */
export function fuseResultOf(code: number, errno: { readonly ENOENT: number; readonly EIO: number; readonly EROFS: number; readonly EACCES: number; readonly ESTALE: number }): FuseResult {
  if (code >= 0) return 'ok';
  switch (-code) {
    case errno.ENOENT:
      return 'ENOENT';
    case errno.EIO:
      return 'EIO';
    case errno.EROFS:
      return 'EROFS';
    case errno.EACCES:
      return 'EACCES';
    case errno.ESTALE:
      return 'ESTALE';
    default:
      return 'other_error';
  }
}

/**
 * The `q` quantile (0..1) of a histogram from its cumulative bucket counts,
 * interpolated within the bucket as Prometheus' histogram_quantile does;
 * null without observations.
 */
export function histogramQuantile(q: number, buckets: readonly { readonly le: number; readonly count: number }[]): number | null {
  const sorted = [...buckets].sort((a, b) => a.le - b.le);
  const total = sorted.at(-1)?.count ?? 0;
  if (total === 0) return null;
  const rank = q * total;
  let lowerLe = 0;
  let lowerCount = 0;
  for (const b of sorted) {
    if (b.count >= rank) {
      if (!Number.isFinite(b.le)) return lowerLe; // in the +Inf bucket: the highest finite bound
      return lowerLe + (b.le - lowerLe) * ((rank - lowerCount) / Math.max(1, b.count - lowerCount));
    }
    lowerLe = b.le;
    lowerCount = b.count;
  }
  return lowerLe;
}

/** What a `/metrics` answer needs: the exposition text and its content type. */
export interface MetricsExposition {
  readonly contentType: string;
  text(): Promise<string>;
}
