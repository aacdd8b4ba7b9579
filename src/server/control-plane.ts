// Assembles the embedded control plane: directory.json, the directory pack
// store with its rescan loop, the membership source, session state, audit
// log, router and HTTP adapter. `createControlPlaneServer` builds everything
// without listening; `serveControlPlane` also listens and reports its URL.
//
// Start-up order: directory.json must be valid (else KnowledgeError('config')),
// state must load, and the first scan must finish before the first request,
// so a plan never shows a half-scanned tree. The first scan also places the
// watches (data-watch.ts). Afterwards a watched change is rescanned (only its
// directory and what is below it, or directory.json) about 50 ms later, and everything is rescanned
// every watchScanIntervalMs as a safety net; without a working watch, every
// scanIntervalMs. Scans never overlap (rescan-loop.ts).

import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { stat } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { KnowledgeError } from '../core/errors.js';
import { httpUrl, type ListenAddress } from '../core/listen-address.js';
import { CONTROL_PLANE_METRICS as M } from '../core/metrics.js';
import { listenMetrics, type MetricsListener } from '../metrics/metrics-listener.js';
import { PrometheusMetrics } from '../metrics/prometheus-metrics.js';
import { formatDurationFlag } from '../core/units.js';
import { fileAuditSink, type AuditSink } from './audit-log.js';
import { DataWatch, emptyWork, fullWork, mergeWork, type ScanWork, type WatchFunction } from './data-watch.js';
import type { RouteContext } from './context.js';
import { DirectorySource } from './directory-source.js';
import { DirPackStore } from './dir-pack-store.js';
import { createHttpServer } from './http-adapter.js';
import { directoryMembership, httpMembership, meteredMembership, type MembershipSource } from './membership.js';
import { resolveOptions, type ControlPlaneOptions, type ResolvedOptions } from './options.js';
import type { PackStore } from './pack-store.js';
import { PlanWakeups } from './plan-wakeups.js';
import { RescanLoop } from './rescan-loop.js';
import { createRouter, type Handler } from './router.js';
import { openSessionState } from './open-session-state.js';
import type { PersistedState, StateChange } from './session-registry.js';
import type { SessionState } from './session-state.js';
import type { StateStore } from './state-file.js';

/** Replaceable parts, for tests that wrap the real ones (count calls, inject faults). */
export interface ControlPlaneDeps {
  readonly wrapPackStore?: (store: PackStore) => PackStore;
  readonly membership?: MembershipSource;
  readonly wrapMembership?: (source: MembershipSource) => MembershipSource;
  /** The state file's store (embedded mode), e.g. wrapped to fail. */
  readonly stateStore?: StateStore<PersistedState, StateChange>;
  /** Wraps the session state, whichever it is (tests count calls, inject faults). */
  readonly wrapSessions?: (sessions: SessionState) => SessionState;
  readonly audit?: AuditSink;
  /** Replaces fs.watch for the data-dir watch (tests make it fail). */
  readonly watch?: WatchFunction;
}

export interface ControlPlane {
  readonly options: ResolvedOptions;
  readonly server: Server;
  readonly handler: Handler;
  readonly store: DirPackStore;
  readonly sessions: SessionState;
  readonly directory: DirectorySource;
  readonly audit: AuditSink;
  /** This control plane's metrics (what `GET /metrics` answers). */
  readonly metrics: PrometheusMetrics;
  /** The data-dir watch; null with `watch: false`. */
  readonly watch: DataWatch | null;
  /** Rescans directory.json and the packs now (tests use it instead of waiting). */
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
  const dataStat = await stat(options.dataDir).catch(() => null);
  if (!dataStat?.isDirectory()) throw new KnowledgeError('config', `--data ${options.dataDir}: not a directory`);
  const directory = await DirectorySource.open(join(options.dataDir, 'directory.json'), options.log);
  // Changes noticed before the rescan loop exists (start-up) wait here for it.
  let loop: RescanLoop | null = null;
  const early = emptyWork();
  const watch = options.watch
    ? new DataWatch({
        root: options.dataDir,
        changed: (work) => (loop ? loop.notice(work) : mergeWork(early, work)),
        failed: (reason) => {
          options.log(`watching ${options.dataDir} stopped: ${reason}; rescanning everything every ${formatDurationFlag(options.scanIntervalMs)} (--scan-interval) instead`);
          // Events may have been lost: rescan everything now, then at the short interval.
          if (loop === null) mergeWork(early, fullWork());
          loop?.retime();
          loop?.notice(fullWork());
        },
        ...(deps.watch ? { watch: deps.watch } : {}),
      })
    : null;
  const metrics = new PrometheusMetrics(Object.values(M));
  const store = new DirPackStore(options.dataDir, { maxFileSize: options.maxFileSize, log: options.log, ...(watch ? { observer: watch } : {}) });
  // Scans are timed here, around the store, so every store is measured alike.
  const timedScan = async (kind: 'full' | 'partial', run: () => Promise<boolean>): Promise<boolean> => {
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
  };
  await timedScan('full', () => store.scan());
  // directory.json was read before its directory was watched.
  await directory.refresh();
  const opened = await openSessionState(options, deps.stateStore);
  const sessions = deps.wrapSessions ? deps.wrapSessions(opened) : opened;
  let membership =
    deps.membership ??
    (options.membershipUrl !== undefined
      ? httpMembership(options.membershipUrl, options.membershipTimeoutMs)
      : directoryMembership(directory));
  if (deps.wrapMembership) membership = deps.wrapMembership(membership);
  membership = meteredMembership(membership, options.membershipUrl !== undefined ? 'http' : 'directory', metrics);
  const audit = deps.audit ?? fileAuditSink(options.auditLog, options.log);
  const wakeups = new PlanWakeups(options.maxLongPollsPerSession);
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
  });
  const handler = createRouter(ctx);
  const shutdown = new AbortController();
  const server = createHttpServer(handler, { maxBodyBytes: options.maxBodyBytes, log: options.log, metrics }, shutdown.signal);
  let closed = false;

  const scan = async (work: ScanWork): Promise<void> => {
    try {
      let changed = false;
      if (work.full || work.directory) changed = await directory.refresh();
      if (work.full) {
        watch?.renew();
        changed = (await timedScan('full', () => store.scan())) || changed;
      } else if (work.layout || work.packs.size > 0) {
        changed = (await timedScan('partial', () => store.scan(work.packs))) || changed;
      }
      // Waiting plan long-polls recompute only when something changed.
      if (changed) wakeups.allChanged();
    } catch (err) {
      options.log(`rescan failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  loop = new RescanLoop({
    scan,
    fullIntervalMs: () => (watch?.healthy ? options.watchScanIntervalMs : options.scanIntervalMs),
  });
  const rescanLoop = loop;
  if (early.full || early.directory || early.layout || early.packs.size > 0) loop.notice(early);

  return {
    options,
    server,
    handler,
    store,
    sessions,
    directory,
    audit,
    metrics,
    watch,
    rescan: () => rescanLoop.now(),
    async close() {
      if (closed) return;
      closed = true;
      watch?.close();
      const scanEnded = rescanLoop.close();
      shutdown.abort();
      const serverClosed = server.listening
        ? new Promise<void>((resolve) => server.close(() => resolve()))
        : Promise.resolve();
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), 2_000);
      await serverClosed;
      clearTimeout(force);
      await scanEnded;
      await sessions.close();
      await audit.close();
    },
  };
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
