// Assembles a control plane: the pack source (a data directory, or a
// publication in object storage: pack-source.ts), the membership source,
// session state, audit log, metrics, plan wakeups, router and HTTP adapter.
// `createControlPlaneServer` builds everything without listening;
// `serveControlPlane` also listens and reports its URL. The pack source is
// complete (first scan done, or first publication loaded) and state loaded
// before the first request, so a plan never shows half a tree.

import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import { KnowledgeError } from '../core/errors.js';
import { httpUrl, type ListenAddress } from '../core/text/listen-address.js';
import { CONTROL_PLANE_METRICS as M } from '../core/metrics.js';
import { listenMetrics, type MetricsListener } from '../metrics/metrics-listener.js';
import { PrometheusMetrics } from '../metrics/prometheus-metrics.js';
import type { ObjectStore } from '../store/objects/object-store.js';
import { meteredObjectStore } from '../store/objects/metered-object-store.js';
import { S3ObjectStore } from '../store/objects/s3-object-store.js';
import type { Writable } from 'node:stream';
import { fileAuditSink, streamAuditSink, type AuditSink } from './access/audit-log.js';
import { PgAuditSink } from './access/pg-audit-sink.js';
import type { DataWatch, WatchFunction } from './packs/data-watch.js';
import type { RouteContext } from './context.js';
import { openBucketPackSource } from './packs/bucket-pack-source.js';
import { openDirPackSource } from './packs/dir-pack-source.js';
import { createHttpServer } from './http/http-adapter.js';
import { directoryMembership, httpMembership, meteredMembership, type MembershipSource } from './access/membership.js';
import { AUDIT_TO_POSTGRES, AUDIT_TO_STDOUT, resolveOptions, type ControlPlaneOptions, type ResolvedOptions } from './options.js';
import type { DirectoryView, PackSource, SourceHooks } from './packs/pack-source.js';
import type { PackStore } from '../store/pack-store.js';
import { PlanWakeups } from './http/plan-wakeups.js';
import { PrefetchSlots } from './http/prefetch-slots.js';
import { createRouter, type Handler } from './http/router.js';
import { openSessionState } from './state/open-session-state.js';
import type { PersistedState, StateChange } from './state/file/session-registry.js';
import type { SessionState } from './state/session-state.js';
import type { StateStore } from './state/file/state-file.js';
import { BucketPackStore } from '../store/publication/bucket-pack-store.js';
import { PgReplicaHeartbeat } from './state/postgres/pg-replica-heartbeat.js';

/** Replaceable parts, for tests that wrap the real ones (count calls, inject faults). */
export interface ControlPlaneDeps {
  readonly wrapPackStore?: (store: PackStore) => PackStore;
  /** Wraps the object store of `store: s3://...` (tests count requests or inject faults). */
  readonly wrapObjectStore?: (store: ObjectStore) => ObjectStore;
  readonly membership?: MembershipSource;
  readonly wrapMembership?: (source: MembershipSource) => MembershipSource;
  /** The state file's store (embedded mode), e.g. wrapped to fail. */
  readonly stateStore?: StateStore<PersistedState, StateChange>;
  /** Wraps the session state, whichever it is (tests count calls, inject faults). */
  readonly wrapSessions?: (sessions: SessionState) => SessionState;
  readonly audit?: AuditSink;
  /** Where `auditLog: '-'` writes. Default process.stdout. */
  readonly auditStdout?: Writable;
  /** Replaces fs.watch for the data-dir watch (tests make it fail). */
  readonly watch?: WatchFunction;
}

export interface ControlPlane {
  readonly options: ResolvedOptions;
  readonly server: Server;
  readonly handler: Handler;
  readonly store: PackStore;
  readonly source: PackSource;
  readonly sessions: SessionState;
  readonly directory: DirectoryView;
  readonly audit: AuditSink;
  /** This control plane's metrics (what `GET /metrics` answers). */
  readonly metrics: PrometheusMetrics;
  /** The data-dir watch; null with `watch: false`. */
  readonly watch: DataWatch | null;
  /** Rescans directory.json and the packs (or reads the publication pointer) now (tests use it instead of waiting). */
  rescan(): Promise<void>;
  /** Stops scanning, ends long-polls, closes connections, flushes state and audit. */
  close(): Promise<void>;
}

export interface ListeningControlPlane extends ControlPlane {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** `http://HOST:PORT/metrics` of the token-less metrics listener, when `metricsListen` was given. */
  readonly metricsUrl: string | undefined;
}

export async function createControlPlaneServer(input: ControlPlaneOptions, deps: ControlPlaneDeps = {}): Promise<ControlPlane> {
  const options = resolveOptions(input);
  const metrics = new PrometheusMetrics(Object.values(M));
  const wakeups = new PlanWakeups(options.maxLongPollsPerSession);
  const hooks: SourceHooks = {
    // Scans are timed here, around the store, so every store is measured alike.
    async timedScan(kind, run) {
      const started = performance.now();
      let result: 'ok' | 'error' = 'error';
      try {
        const changed = await run();
        result = 'ok';
        return changed;
      } finally {
        metrics.observe(M.packScanDuration, { kind }, (performance.now() - started) / 1000);
        metrics.inc(M.packScans, { kind, result });
      }
    },
    // Waiting plan long-polls recompute only when something changed; gc hears of a new publication at once.
    changed: () => {
      wakeups.allChanged();
      void heartbeat?.beat();
    },
    metrics,
  };
  let heartbeat: PgReplicaHeartbeat | null = null;
  const source = await openPackSource(options, deps, hooks);
  const { store, directory, watch } = source;
  const opened = await openSessionState(options, deps.stateStore, () => metrics.inc(M.stateRoundTrips, {}));
  // Replicas of a publication record which ones they serve, for `knowledgefs gc` (after the state migrated).
  if (store instanceof BucketPackStore && options.stateUrl !== undefined) {
    const bucket = store;
    heartbeat = new PgReplicaHeartbeat({ url: options.stateUrl, served: () => bucket.servedPointers, log: options.log, intervalMs: Math.max(options.stateHeartbeatMs, 1_000) });
    await heartbeat.start();
  }
  const sessions = deps.wrapSessions ? deps.wrapSessions(opened) : opened;
  let membership =
    deps.membership ??
    (options.membershipUrl !== undefined
      ? httpMembership(options.membershipUrl, options.membershipTimeoutMs)
      : directoryMembership(directory));
  if (deps.wrapMembership) membership = deps.wrapMembership(membership);
  membership = meteredMembership(membership, options.membershipUrl !== undefined ? 'http' : 'directory', metrics);
  let audit: AuditSink;
  try {
    audit = deps.audit ?? (await openAuditSink(options, deps, metrics));
  } catch (err) {
    await source.close();
    await sessions.close();
    throw err;
  }
  // Mounts and revocations wake the session's long-polls, whichever replica made them.
  const unfollow = sessions.onChange((id) => wakeups.sessionChanged(id));
  const ctx: RouteContext = {
    options,
    store: deps.wrapPackStore ? deps.wrapPackStore(store) : store,
    sessions,
    membership,
    directory,
    audit,
    metrics,
    exposition: metrics,
    wakeups,
    prefetchSlots: new PrefetchSlots(options.maxPrefetchBatches),
  };
  metrics.beforeScrape(() => {
    const sessions = ctx.sessions.stats();
    metrics.set(M.sessions, { kind: 'team' }, sessions.team);
    metrics.set(M.sessions, { kind: 'personal' }, sessions.personal);
    metrics.set(M.mountedTeams, {}, sessions.mountedTeams);
    const scopes = store.scopes();
    metrics.set(M.scopes, {}, scopes.length);
    metrics.set(M.packFiles, {}, scopes.reduce((n, s) => n + s.files.length, 0));
    metrics.set(M.packBytes, {}, scopes.reduce((n, s) => n + s.totalBytes, 0));
    const cache = store.cacheCounts?.();
    if (cache !== undefined) {
      metrics.setTotal(M.blobCache, { result: 'hit' }, cache.hits);
      metrics.setTotal(M.blobCache, { result: 'miss' }, cache.misses);
    }
  });
  const handler = createRouter(ctx);
  const shutdown = new AbortController();
  const server = createHttpServer(handler, { maxBodyBytes: options.maxBodyBytes, log: options.log, metrics }, shutdown.signal);
  let closed = false;

  return {
    options,
    server,
    handler,
    store,
    source,
    sessions,
    directory,
    audit,
    metrics,
    watch,
    rescan: () => source.refresh(),
    async close() {
      if (closed) return;
      closed = true;
      const scanEnded = source.close();
      shutdown.abort();
      const serverClosed = server.listening
        ? new Promise<void>((resolve) => server.close(() => resolve()))
        : Promise.resolve();
      // server.close() closes idle keep-alive connections itself; the rest get 2 s to finish.
      const force = setTimeout(() => server.closeAllConnections(), 2_000).unref();
      await serverClosed;
      // Stryker disable next-line CallExpression: an unref'd timer left to fire calls closeAllConnections on a closed server, which finds nothing
      clearTimeout(force);
      await scanEnded;
      unfollow();
      await heartbeat?.close();
      await sessions.close();
      await audit.close();
    },
  };
}

/** A file, stdout (`-`) or the state database (`postgres`); the buffering sinks count what they drop. */
async function openAuditSink(options: ResolvedOptions, deps: ControlPlaneDeps, metrics: PrometheusMetrics): Promise<AuditSink> {
  if (options.auditLog === AUDIT_TO_STDOUT) {
    return streamAuditSink(deps.auditStdout ?? process.stdout, options.auditBufferRecords, options.log, (n) => metrics.inc(M.auditDropped, { sink: 'stdout' }, n));
  }
  if (options.auditLog === AUDIT_TO_POSTGRES) {
    return PgAuditSink.open({
      url: options.stateUrl as string,
      log: options.log,
      retentionMs: options.auditRetentionMs,
      bufferRecords: options.auditBufferRecords,
      onDrop: (n) => metrics.inc(M.auditDropped, { sink: 'postgres' }, n),
      now: options.now,
    });
  }
  return fileAuditSink(options.auditLog, options.log);
}

async function openPackSource(options: ResolvedOptions, deps: ControlPlaneDeps, hooks: SourceHooks): Promise<PackSource> {
  if (options.s3 === undefined) return openDirPackSource({ ...options, dataDir: options.dataDir as string }, hooks, deps.watch);
  const s3 = new S3ObjectStore(options.s3);
  const objectStore = meteredObjectStore(deps.wrapObjectStore ? deps.wrapObjectStore(s3) : s3, hooks.metrics);
  try {
    return await openBucketPackSource(options, hooks, objectStore);
  } catch (err) {
    await objectStore.close();
    throw err;
  }
}

export async function serveControlPlane(
  input: ControlPlaneOptions & { host?: string; port?: number; metricsListen?: ListenAddress },
  deps: ControlPlaneDeps = {},
): Promise<ListeningControlPlane> {
  const cp = await createControlPlaneServer(input, deps);
  const host = input.host ?? '127.0.0.1';
  try {
    await new Promise<void>((resolve, reject) => {
      cp.server.once('error', reject);
      cp.server.listen(input.port ?? 0, host, () => {
        cp.server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await cp.close();
    throw new KnowledgeError('config', `cannot listen on ${host}:${input.port ?? 0}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const port = (cp.server.address() as AddressInfo).port;
  let metricsListener: MetricsListener | undefined;
  if (input.metricsListen !== undefined) {
    try {
      metricsListener = await listenMetrics(input.metricsListen, cp.metrics, cp.options.log);
    } catch (err) {
      await cp.close();
      throw err;
    }
  }
  return {
    ...cp,
    url: httpUrl(host, port),
    host,
    port,
    metricsUrl: metricsListener?.url,
    async close() {
      await metricsListener?.close();
      await cp.close();
    },
  };
}
