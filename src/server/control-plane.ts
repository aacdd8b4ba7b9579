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
import { KnowledgeError } from '../core/errors.js';
import { formatDurationFlag } from '../core/units.js';
import { fileAuditSink, type AuditSink } from './audit-log.js';
import { DataWatch, emptyWork, fullWork, mergeWork, type ScanWork, type WatchFunction } from './data-watch.js';
import type { RouteContext } from './context.js';
import { DirectorySource } from './directory-source.js';
import { DirPackStore } from './dir-pack-store.js';
import { createHttpServer } from './http-adapter.js';
import { directoryMembership, httpMembership, type MembershipSource } from './membership.js';
import { resolveOptions, type ControlPlaneOptions, type ResolvedOptions } from './options.js';
import type { PackStore } from './pack-store.js';
import { RescanLoop } from './rescan-loop.js';
import { createRouter, type Handler } from './router.js';
import { SessionRegistry, type PersistedState, type StateChange } from './session-registry.js';
import { fileStateStore, type StateStore } from './state-file.js';

/** Replaceable parts, for tests that wrap the real ones (count calls, inject faults). */
export interface ControlPlaneDeps {
  readonly wrapPackStore?: (store: PackStore) => PackStore;
  readonly membership?: MembershipSource;
  readonly wrapMembership?: (source: MembershipSource) => MembershipSource;
  readonly stateStore?: StateStore<PersistedState, StateChange>;
  readonly audit?: AuditSink;
  /** Replaces fs.watch for the data-dir watch (tests make it fail). */
  readonly watch?: WatchFunction;
}

export interface ControlPlane {
  readonly options: ResolvedOptions;
  readonly server: Server;
  readonly handler: Handler;
  readonly store: DirPackStore;
  readonly registry: SessionRegistry;
  readonly directory: DirectorySource;
  readonly audit: AuditSink;
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
  const store = new DirPackStore(options.dataDir, { maxFileSize: options.maxFileSize, log: options.log, ...(watch ? { observer: watch } : {}) });
  await store.scan();
  // directory.json was read before its directory was watched.
  await directory.refresh();
  const registry = await SessionRegistry.open(deps.stateStore ?? fileStateStore<PersistedState, StateChange>(options.stateFile));
  let membership =
    deps.membership ??
    (options.membershipUrl !== undefined
      ? httpMembership(options.membershipUrl, options.membershipTimeoutMs)
      : directoryMembership(directory));
  if (deps.wrapMembership) membership = deps.wrapMembership(membership);
  const audit = deps.audit ?? fileAuditSink(options.auditLog, options.log);
  const ctx: RouteContext = {
    options,
    store: deps.wrapPackStore ? deps.wrapPackStore(store) : store,
    registry,
    membership,
    directory,
    audit,
  };
  const handler = createRouter(ctx);
  const shutdown = new AbortController();
  const server = createHttpServer(handler, { maxBodyBytes: options.maxBodyBytes, log: options.log }, shutdown.signal);
  let closed = false;

  const scan = async (work: ScanWork): Promise<void> => {
    try {
      if (work.full || work.directory) await directory.refresh();
      if (work.full) {
        watch?.renew();
        await store.scan();
      } else if (work.layout || work.packs.size > 0) {
        await store.scan(work.packs);
      }
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
    registry,
    directory,
    audit,
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
      await registry.close();
      await audit.close();
    },
  };
}

/** Parses `HOST:PORT` (`[::1]:0` for IPv6); port 0 picks a free port. */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new KnowledgeError('invalid_argument', `invalid --listen "${text}" (expected HOST:PORT, e.g. 127.0.0.1:7420)`);
  return { host: m[1] ?? m[2] ?? '127.0.0.1', port };
}

export async function serveControlPlane(
  input: ControlPlaneOptions & { host?: string; port?: number },
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
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return { ...cp, url: `http://${urlHost}:${port}`, host, port };
}
