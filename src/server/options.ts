// The one documented options type of the control plane. `knowledgefs serve`
// fills it from flags; tests fill it directly. Every option's meaning and
// default is here, validated once at start with a message naming the option.

import { hostname } from 'node:os';
import { join } from 'node:path';
import { KnowledgeError } from '../core/errors.js';
import type { Log } from '../core/text/log-line.js';
import { resolveS3Config, type S3Config } from '../store/objects/store-config.js';

export interface ControlPlaneOptions {
  /** Data directory: `directory.json`, `account/`, `teams/<id>/`. Required unless `store` is given. */
  readonly dataDir?: string;
  /**
   * Serve packs from a publication in object storage (`s3://BUCKET/PREFIX`,
   * written by `knowledgefs publish`) instead of a data directory. Then
   * `stateFile` and `auditLog` are required (there is no data directory to
   * default them into).
   */
  readonly store?: string | undefined;
  /** S3-compatible endpoint. Default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS's. */
  readonly s3Endpoint?: string | undefined;
  /** Longest one object-store request may take. Default 3 000 ms (below the mount's 5 s request timeout). */
  readonly s3TimeoutMs?: number;
  /** Where credentials and region come from (AWS_*). Default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** How often replicas look for a new publication (one conditional GET). Default 500 ms. */
  readonly publicationPollMs?: number;
  /** Bytes of blobs kept in memory. Default 256 MiB. */
  readonly blobCacheBytes?: number;
  /** Spill directory for blobs evicted from memory. Default none. */
  readonly blobCacheDir?: string | undefined;
  /** Bytes of blobs kept in `blobCacheDir`. Default 4 GiB. */
  readonly blobCacheDiskBytes?: number;
  /** Session state file. Default `<dataDir>/.knowledgefs/state.json`. Unused with `stateUrl`. */
  readonly stateFile?: string;
  /**
   * Session state in PostgreSQL (`postgres://…` or `postgresql://…`) instead
   * of the state file: what lets several replicas share sessions.
   */
  readonly stateUrl?: string | undefined;
  /** Heartbeat of the PostgreSQL notification connection; revocations reach every replica within twice this. Default 1 000 ms. */
  readonly stateHeartbeatMs?: number;
  /**
   * Also apply the contract migrations this release knows (they remove or
   * change what older releases use): only once every replica runs this
   * release. Needs `stateUrl`. Default false: they are left pending and logged.
   */
  readonly migrateContract?: boolean;
  /** Admin bearer token. Required (the CLI resolves flag / env / generated file). */
  readonly adminToken: string;
  /** External membership service; absent = memberships from directory.json. */
  readonly membershipUrl?: string | undefined;
  /** Per-request timeout of the membership service. Default 2 000 ms. */
  readonly membershipTimeoutMs?: number;
  /**
   * Where decisions go: a file (one JSON line per decision; default
   * `<dataDir>/.knowledgefs/audit.log`), `-` (JSON lines on stdout, for a log
   * collector), or `postgres` (batched into the state database, shared by
   * every replica; needs `stateUrl`).
   */
  readonly auditLog?: string;
  /** With `auditLog: 'postgres'`: decisions older than this are dropped, a day's partition at a time. Default 30 days. */
  readonly auditRetentionMs?: number;
  /** With `auditLog` `-` or `postgres`: decisions held while the sink is slow or down; beyond it the oldest are dropped and counted. Default 10 000. */
  readonly auditBufferRecords?: number;
  /** The name of this replica in every audit record. Default the host name (the CLI adds `:PORT`). */
  readonly replicaId?: string;
  /** Watch the data directory (inotify) and rescan what changed at once. Default true. */
  readonly watch?: boolean;
  /** Pause between full rescans while the watch works (a safety net for lost events). Default 30 000 ms. */
  readonly watchScanIntervalMs?: number;
  /** Pause between full rescans without a working watch (`watch` false, or the watch failed). Default 1 000 ms. */
  readonly scanIntervalMs?: number;
  /** Files larger than this are skipped (one log line). Default 64 MiB. */
  readonly maxFileSize?: number;
  /** Request bodies larger than this are refused with 413. Default 64 KiB. */
  readonly maxBodyBytes?: number;
  /** Longest long-poll a client may ask for with `wait=`. Default 30 s. */
  readonly maxWaitMs?: number;
  /**
   * How often a waiting plan long-poll asks the membership service again
   * (other changes wake it at once). Default 2 000 ms.
   */
  readonly membershipRecheckMs?: number;
  /** Plan long-polls one session may hold at once; more are answered 429. Default 4. */
  readonly maxLongPollsPerSession?: number;
  /** Prefetch batches (`x-kfs-priority: prefetch`) served at once; more are answered 503 + Retry-After. Default 4. */
  readonly maxPrefetchBatches?: number;
  /** Where log lines go. Default stderr. */
  readonly log?: Log;
  /** Clock for audit times and the reminder's date. Default Date.now. */
  readonly now?: () => number;
}

export interface ResolvedOptions {
  /** Set exactly when `s3` is not. */
  readonly dataDir: string | undefined;
  readonly s3: S3Config | undefined;
  readonly publicationPollMs: number;
  readonly blobCacheBytes: number;
  readonly blobCacheDir: string | undefined;
  readonly blobCacheDiskBytes: number;
  readonly stateFile: string;
  readonly stateUrl: string | undefined;
  readonly stateHeartbeatMs: number;
  readonly migrateContract: boolean;
  readonly adminToken: string;
  readonly membershipUrl: string | undefined;
  readonly membershipTimeoutMs: number;
  readonly auditLog: string;
  readonly auditRetentionMs: number;
  readonly auditBufferRecords: number;
  readonly replicaId: string;
  readonly watch: boolean;
  readonly watchScanIntervalMs: number;
  readonly scanIntervalMs: number;
  readonly maxFileSize: number;
  readonly maxBodyBytes: number;
  readonly maxWaitMs: number;
  readonly membershipRecheckMs: number;
  readonly maxLongPollsPerSession: number;
  readonly maxPrefetchBatches: number;
  readonly log: Log;
  readonly now: () => number;
}

export const DEFAULTS = {
  membershipTimeoutMs: 2_000,
  watchScanIntervalMs: 30_000,
  scanIntervalMs: 1_000,
  maxFileSize: 64 * 1024 * 1024,
  maxBodyBytes: 64 * 1024,
  maxWaitMs: 30_000,
  membershipRecheckMs: 2_000,
  maxLongPollsPerSession: 4,
  maxPrefetchBatches: 4,
  stateHeartbeatMs: 1_000,
  s3TimeoutMs: 3_000,
  publicationPollMs: 500,
  blobCacheBytes: 256 * 1024 * 1024,
  blobCacheDiskBytes: 4 * 1024 * 1024 * 1024,
  auditRetentionMs: 30 * 24 * 3600 * 1000,
  auditBufferRecords: 10_000,
} as const;

/** `--audit-log` values that are not file paths. */
export const AUDIT_TO_STDOUT = '-';
export const AUDIT_TO_POSTGRES = 'postgres';

const DAY_MS = 24 * 3600 * 1000;

/** True for the URLs `stateUrl` takes; anything else given to --state is a file path. */
export function isStateUrl(text: string): boolean {
  return /^postgres(ql)?:\/\//i.test(text);
}

/** `<dataDir>/.knowledgefs`: state, audit log and generated admin token live here by default. */
export function internalDir(dataDir: string): string {
  return join(dataDir, '.knowledgefs');
}

function positive(name: string, value: number | undefined, fallback: number, allowZero = false): number {
  const v = value ?? fallback;
  if (!Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
    throw new KnowledgeError('config', `${name} must be a ${allowZero ? 'non-negative' : 'positive'} number, got ${String(value)}`);
  }
  return v;
}

function wholeAtLeastOne(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < 1) throw new KnowledgeError('config', `${name} must be a whole number ≥ 1, got ${String(value)}`);
  return v;
}

/** Where state and the audit log go: under the data directory, or (object storage) where the flags say. */
function localFiles(o: ControlPlaneOptions): { stateFile: string; auditLog: string } {
  if (o.store !== undefined) {
    if (o.dataDir) throw new KnowledgeError('config', '--data and --store exclude each other: packs come from the data directory or from object storage');
    const noState = o.stateFile === undefined && o.stateUrl === undefined;
    const missing = [noState ? '--state' : null, o.auditLog === undefined ? '--audit-log' : null].filter((f) => f !== null);
    if (missing.length > 0) throw new KnowledgeError('config', `with --store, ${missing.join(' and ')} must be given (there is no data directory to keep them in)`);
    // With PostgreSQL state the file is never opened.
    return { stateFile: o.stateFile ?? '', auditLog: o.auditLog as string };
  }
  if (!o.dataDir) throw new KnowledgeError('config', 'the data directory is required (--data DIR), or object storage (--store s3://BUCKET/PREFIX)');
  return { stateFile: o.stateFile ?? join(internalDir(o.dataDir), 'state.json'), auditLog: o.auditLog ?? join(internalDir(o.dataDir), 'audit.log') };
}

export function resolveOptions(o: ControlPlaneOptions): ResolvedOptions {
  const { stateFile, auditLog } = localFiles(o);
  if (!o.adminToken || o.adminToken.length < 16) {
    throw new KnowledgeError('config', 'the admin token must be at least 16 characters');
  }
  if (o.membershipUrl !== undefined) {
    let url: URL;
    try {
      url = new URL(o.membershipUrl);
    } catch {
      throw new KnowledgeError('config', `--membership-url: not a URL: ${o.membershipUrl}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new KnowledgeError('config', `--membership-url: expected http:// or https://, got ${url.protocol}`);
    }
  }
  if (o.stateUrl !== undefined) {
    let ok = isStateUrl(o.stateUrl);
    try {
      new URL(o.stateUrl);
    } catch {
      ok = false;
    }
    if (!ok) throw new KnowledgeError('config', 'the session-state URL must look like postgres://USER@HOST:PORT/DATABASE');
  }
  if (o.migrateContract === true && o.stateUrl === undefined) {
    throw new KnowledgeError('config', '--migrate-contract needs PostgreSQL session state (--state postgres://… or $KNOWLEDGEFS_STATE_URL): a state file has no migrations');
  }
  if (auditLog === AUDIT_TO_POSTGRES && o.stateUrl === undefined) {
    throw new KnowledgeError('config', '--audit-log postgres writes decisions to the state database: it needs --state postgres://… (or $KNOWLEDGEFS_STATE_URL)');
  }
  const auditRetentionMs = positive('--audit-retention', o.auditRetentionMs, DEFAULTS.auditRetentionMs);
  if (auditRetentionMs < DAY_MS) throw new KnowledgeError('config', `--audit-retention must be at least 1d (decisions are kept in daily partitions), got ${auditRetentionMs} ms`);
  const replicaId = o.replicaId ?? hostname();
  if (!/^[\x21-\x7e]{1,128}$/.test(replicaId)) throw new KnowledgeError('config', `--replica-id must be 1-128 printable characters without spaces, got ${JSON.stringify(replicaId)}`);
  const s3 =
    o.store === undefined
      ? undefined
      : resolveS3Config({ store: o.store, endpoint: o.s3Endpoint, timeoutMs: positive('--s3-timeout', o.s3TimeoutMs, DEFAULTS.s3TimeoutMs), env: o.env ?? process.env });
  return {
    // Stryker disable next-line ConditionalExpression: with --store a data directory was refused above, so o.dataDir is undefined either way
    dataDir: o.store === undefined ? o.dataDir : undefined,
    s3,
    publicationPollMs: positive('--publication-poll', o.publicationPollMs, DEFAULTS.publicationPollMs),
    blobCacheBytes: positive('--blob-cache', o.blobCacheBytes, DEFAULTS.blobCacheBytes),
    blobCacheDir: o.blobCacheDir,
    blobCacheDiskBytes: positive('--blob-cache-disk', o.blobCacheDiskBytes, DEFAULTS.blobCacheDiskBytes),
    stateFile,
    stateUrl: o.stateUrl,
    stateHeartbeatMs: positive('--state-heartbeat', o.stateHeartbeatMs, DEFAULTS.stateHeartbeatMs),
    migrateContract: o.migrateContract === true,
    adminToken: o.adminToken,
    membershipUrl: o.membershipUrl?.replace(/\/+$/, ''),
    membershipTimeoutMs: positive('--membership-timeout', o.membershipTimeoutMs, DEFAULTS.membershipTimeoutMs),
    auditLog,
    auditRetentionMs,
    auditBufferRecords: wholeAtLeastOne('auditBufferRecords', o.auditBufferRecords, DEFAULTS.auditBufferRecords),
    replicaId,
    watch: o.watch ?? true,
    watchScanIntervalMs: positive('--watch-scan-interval', o.watchScanIntervalMs, DEFAULTS.watchScanIntervalMs),
    scanIntervalMs: positive('--scan-interval', o.scanIntervalMs, DEFAULTS.scanIntervalMs),
    maxFileSize: positive('--max-file-size', o.maxFileSize, DEFAULTS.maxFileSize),
    maxBodyBytes: positive('maxBodyBytes', o.maxBodyBytes, DEFAULTS.maxBodyBytes),
    maxWaitMs: positive('maxWaitMs', o.maxWaitMs, DEFAULTS.maxWaitMs, true),
    membershipRecheckMs: positive('--membership-recheck', o.membershipRecheckMs, DEFAULTS.membershipRecheckMs),
    maxLongPollsPerSession: wholeAtLeastOne('--max-long-polls', o.maxLongPollsPerSession, DEFAULTS.maxLongPollsPerSession),
    maxPrefetchBatches: wholeAtLeastOne('--max-prefetch-batches', o.maxPrefetchBatches, DEFAULTS.maxPrefetchBatches),
    log: o.log ?? ((line) => process.stderr.write(`${line}\n`)),
    now: o.now ?? Date.now,
  };
}
