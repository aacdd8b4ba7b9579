// Assembles the embedded control plane: directory.json, the directory pack
// store with its rescan loop, the membership source, session state, audit
// log, router and HTTP adapter. `createControlPlaneServer` builds everything
// without listening; `serveControlPlane` also listens and reports its URL.
//
// Start-up order: directory.json must be valid (else KnowledgeError('config')),
// state must load, and the first scan must finish before the first request,
// so a plan never shows a half-scanned tree. Rescans run one after another
// (the next starts max(scanIntervalMs, 2 × the last scan's duration) after
// the previous ended), never overlap.

import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { stat } from 'node:fs/promises';
import { KnowledgeError } from '../core/errors.js';
import { fileAuditSink, type AuditSink } from './audit-log.js';
import type { RouteContext } from './context.js';
import { DirectorySource } from './directory-source.js';
import { DirPackStore } from './dir-pack-store.js';
import { createHttpServer } from './http-adapter.js';
import { directoryMembership, httpMembership, type MembershipSource } from './membership.js';
import { resolveOptions, type ControlPlaneOptions, type ResolvedOptions } from './options.js';
import type { PackStore } from './pack-store.js';
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
}

export interface ControlPlane {
  readonly options: ResolvedOptions;
  readonly server: Server;
  readonly handler: Handler;
  readonly store: DirPackStore;
  readonly registry: SessionRegistry;
  readonly directory: DirectorySource;
  readonly audit: AuditSink;
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
  const store = new DirPackStore(options.dataDir, { maxFileSize: options.maxFileSize, log: options.log });
  await store.scan();
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

  let timer: NodeJS.Timeout | null = null;
  let closed = false;
  let scanning: Promise<void> | null = null;
  const rescan = (): Promise<void> => {
    scanning ??= (async () => {
      try {
        await directory.refresh();
        await store.scan();
      } catch (err) {
        options.log(`rescan failed: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        scanning = null;
      }
    })();
    return scanning;
  };
  // The pause after a scan is at least twice the scan's own duration, so a
  // very large tree never keeps the scanner busy more than a third of the time.
  let lastScanMs = 0;
  const schedule = () => {
    if (closed) return;
    timer = setTimeout(() => {
      const started = performance.now();
      void rescan().then(() => {
        lastScanMs = performance.now() - started;
        schedule();
      });
    }, Math.max(options.scanIntervalMs, 2 * lastScanMs));
  };
  schedule();

  return {
    options,
    server,
    handler,
    store,
    registry,
    directory,
    audit,
    rescan,
    async close() {
      if (closed) return;
      closed = true;
      if (timer) clearTimeout(timer);
      shutdown.abort();
      const serverClosed = server.listening
        ? new Promise<void>((resolve) => server.close(() => resolve()))
        : Promise.resolve();
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), 2_000);
      await serverClosed;
      clearTimeout(force);
      await scanning;
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
