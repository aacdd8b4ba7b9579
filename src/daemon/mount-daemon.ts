// The mount daemon's lifecycle once the first plan is in hand (its start,
// `runMountDaemon`, is in run-mount.ts):
//
//   tree → mount → control socket → print "mounted …" → sync loop and
//   prefetch in the background → on stop: stop both, close the socket,
//   unmount, close the client.
//
// The tree is one immutable value swapped whole (`setTree`); every part
// reads it through `() => this.tree`, so a plan is applied atomically. It
// also knows each scope's version, so plan requests ask for what changed
// only (plan-changes.ts).
// Nothing here touches the mount point after mounting (that would deadlock
// the FUSE loop running on this same event loop).

import type { Log } from '../core/text/log-line.js';
import { DAEMON_METRICS as D } from '../core/metrics.js';
import type { Plan } from '../core/session/plan.js';
import { Tree, type TreeOptions } from '../core/tree/tree.js';
import type { DaemonStatus } from '../core/wire.js';
import { listenMetrics, type MetricsListener } from '../metrics/metrics-listener.js';
import type { PrometheusMetrics } from '../metrics/prometheus-metrics.js';
import { readActivity } from './socket/activity.js';
import { CHANGE_MARGIN_MS, ChangedFiles } from './fuse/changed-files.js';
import { ContentCache } from './content/content-cache.js';
import { startControlSocket, type ReadToolBackend } from './socket/control-socket.js';
import type { ControlClient } from './control-plane/control-client.js';
import { ContentFetcher } from './content/fetcher.js';
import { KnowledgeFilesystem } from './filesystem.js';
import type { FuseMount } from './fuse/fuse-adapter.js';
import { bindingTraits, chooseFuseBinding, DEFAULT_FUSE_BINDING, describeBinding, mountBinding, type ChosenBinding, type FuseBinding } from './fuse/fuse-binding.js';
import { FuseOpMeter } from './fuse/fuse-op-meter.js';
import { GrantCache } from './content/grant-cache.js';
import { MOUNT_DEFAULTS, type MountOptions } from './options.js';
import { planSource } from './sync/plan-changes.js';
import { BATCH_BYTES, BATCH_FILES, Prefetcher } from './content/prefetch.js';
import { DirectoryReadAhead, readAheadBytes } from './content/read-ahead.js';
import { SyncLoop } from './sync/sync-loop.js';

export interface MountDaemonIo {
  /** stdout: only the "mounted …" line goes here. */
  readonly out: (line: string) => void;
  /** stderr: progress and problems. */
  readonly log: Log;
  /** Injected in tests to wrap the real client with faults. */
  readonly client?: ControlClient;
}

export class MountDaemon {
  private tree: Tree;
  private readonly treeOpts: TreeOptions;
  readonly client: ControlClient;
  readonly cache: ContentCache;
  readonly fetcher: ContentFetcher;
  readonly grants: GrantCache;
  readonly fs: KnowledgeFilesystem;
  readonly sync: SyncLoop;
  readonly prefetch: Prefetcher;
  /** Paths changed at recent swaps, when the binding shares one page cache per path. */
  readonly changedFiles: ChangedFiles | undefined;
  /** The FUSE binding this daemon mounts with (auto resolved). */
  readonly binding: FuseBinding;
  private readonly chosenBinding: ChosenBinding;
  readonly readAhead: DirectoryReadAhead;
  /** Every number `knowledgefs status` and `--metrics-listen` report: made at the first ask (`metrics()`). */
  private metricsLoad: Promise<PrometheusMetrics> | undefined;
  private readonly meter = new FuseOpMeter();
  private readonly startedAt = Date.now();
  private metricsListener: MetricsListener | undefined;
  private pendingSync: Promise<void> | undefined;
  private fuse: FuseMount | undefined;
  private socket: { close(): Promise<void> } | undefined;

  constructor(
    readonly opts: MountOptions,
    private readonly io: MountDaemonIo,
    firstPlan: Plan,
    client: ControlClient,
  ) {
    this.client = client;
    const uid = process.getuid?.() ?? 0;
    this.treeOpts =
      opts.group === undefined
        ? { uid, gid: process.getgid?.() ?? 0, emptyDirMtimeMs: Date.now() }
        : // One group may read: the kernel checks these bits (default_permissions below).
          { uid, gid: opts.group, fileMode: 0o440, dirMode: 0o550, emptyDirMtimeMs: Date.now() };
    this.tree = Tree.fromPlan(firstPlan, undefined, this.treeOpts);
    this.cache = new ContentCache({ maxBytes: opts.cacheSize, dir: opts.cacheDir, dirMaxBytes: opts.cacheDirSize ?? MOUNT_DEFAULTS.cacheDirSize, log: io.log });
    this.fetcher = new ContentFetcher({ client, cache: this.cache, log: io.log, onStale: () => this.requestSync() });
    this.grants = new GrantCache(client, opts.grantTtlMs);
    this.chosenBinding = opts.fuseBindingChosen ?? chooseFuseBinding(opts.fuseBinding ?? DEFAULT_FUSE_BINDING);
    this.binding = this.chosenBinding.binding;
    const traits = bindingTraits(this.binding);
    this.changedFiles = traits.versionsSharePageCache
      ? new ChangedFiles((opts.attrTimeoutSec ?? traits.defaultAttrTimeoutSec) * 1000 + CHANGE_MARGIN_MS)
      : undefined;
    this.fs = new KnowledgeFilesystem({
      tree: () => this.tree,
      grants: this.grants,
      fetcher: this.fetcher,
      readAhead: (this.readAhead = new DirectoryReadAhead({
        fetcher: this.fetcher,
        tree: () => this.tree,
        maxFiles: BATCH_FILES,
        maxBytes: readAheadBytes(BATCH_BYTES, opts.cacheSize, opts.cacheDir !== undefined),
      })),
      requestTimeoutMs: opts.requestTimeoutMs,
      onDenied: (scope) => this.removeScope(scope),
      onMissing: () => this.requestSync(),
      changedFiles: this.changedFiles,
    });
    this.sync = new SyncLoop({
      client: planSource(client, () => this.tree),
      threshold: opts.prefetchThreshold,
      intervalMs: opts.syncIntervalMs,
      currentVersion: () => this.tree.version,
      apply: (plan) => this.applyPlan(plan),
      revoked: (message) => this.revoke(message),
      log: io.log,
    });
    this.prefetch = new Prefetcher({
      fetcher: this.fetcher,
      concurrency: opts.prefetchConcurrency ?? MOUNT_DEFAULTS.prefetchConcurrency,
      cacheBytes: opts.cacheSize,
      hasDiskCache: opts.cacheDir !== undefined,
      log: io.log,
    });
    // The first plan was fetched just before the daemon was built.
    this.sync.confirmedAt = Date.now();
  }

  /**
   * The daemon's metrics registry. prom-client takes longer to load than the
   * rest of the daemon (~50 ms of a ~150 ms start), and every value is copied
   * from the parts' own totals at scrape time anyway, so it is loaded at the
   * first status or scrape (or at start with --metrics-listen), not before
   * the mount is ready.
   */
  metrics(): Promise<PrometheusMetrics> {
    this.metricsLoad ??= import('../metrics/prometheus-metrics.js').then(({ PrometheusMetrics }) => {
      const m = new PrometheusMetrics(Object.values(D), { tallied: [D.fuseDuration] });
      m.beforeScrape(() => this.exportTotals(m));
      return m;
    });
    return this.metricsLoad;
  }

  /** Copies the parts' running totals and state into the metrics (before each scrape). */
  private exportTotals(m: PrometheusMetrics): void {
    const { fetcher, grants, sync } = this;
    const fast = this.fuse?.answeredByBinding?.() ?? { opens: 0, releases: 0, opendirs: 0, releasedirs: 0 };
    this.meter.exportTo(m, { open: fast.opens, release: fast.releases, opendir: fast.opendirs, releasedir: fast.releasedirs });
    m.setTotal(D.cacheLookups, { result: 'hit' }, fetcher.hits);
    m.setTotal(D.cacheLookups, { result: 'miss' }, fetcher.misses);
    m.setTotal(D.fetches, { kind: 'file', result: 'ok' }, fetcher.fetches - fetcher.fetchErrors);
    m.setTotal(D.fetches, { kind: 'file', result: 'error' }, fetcher.fetchErrors);
    m.setTotal(D.fetches, { kind: 'batch', result: 'ok' }, fetcher.batches - fetcher.batchErrors);
    m.setTotal(D.fetches, { kind: 'batch', result: 'error' }, fetcher.batchErrors);
    m.setTotal(D.fetchedBytes, {}, fetcher.fetchedBytes);
    m.setTotal(D.readAheads, {}, this.readAhead.started);
    m.setTotal(D.grants, { result: 'asked' }, grants.requests);
    m.setTotal(D.grants, { result: 'reused' }, grants.reused + fast.opens);
    m.setTotal(D.syncs, { result: 'ok' }, sync.syncs);
    m.setTotal(D.syncs, { result: 'error' }, sync.errors);
    const cache = this.cache.stats();
    m.set(D.cacheBytes, { tier: 'memory' }, cache.bytes);
    m.set(D.cacheBytes, { tier: 'disk' }, cache.diskBytes);
    m.set(D.prefetchFiles, { state: 'total' }, this.prefetch.progress.total);
    m.set(D.prefetchFiles, { state: 'done' }, this.prefetch.progress.done);
    m.set(D.planAge, {}, (Date.now() - sync.confirmedAt) / 1000);
    m.set(D.planFiles, {}, this.tree.fileCount);
  }

  currentTree(): Tree {
    return this.tree;
  }

  async start(): Promise<void> {
    this.fuse = await mountBinding(this.binding, this.opts.mountpoint, this.fs, {
      allowOther: this.opts.allowOther || this.opts.group !== undefined,
      defaultPermissions: this.opts.group !== undefined,
      requestTimeoutMs: this.opts.requestTimeoutMs,
      attrTimeoutSec: this.opts.attrTimeoutSec,
      entryTimeoutSec: this.opts.attrTimeoutSec,
      tree: () => this.tree,
      log: this.io.log,
      meter: this.meter,
      fuseFd: this.opts.fuseFd,
      kernelOpens: this.opts.kernelOpens === true && this.opts.grantTtlMs > 0,
    });
    try {
      this.socket = await startControlSocket(this.opts.socketPath, this.backend(), this.io.log, this.opts.group);
    } catch (err) {
      await this.fuse.unmount();
      throw err;
    }
    if (this.opts.metricsListen !== undefined) {
      try {
        this.metricsListener = await listenMetrics(this.opts.metricsListen, await this.metrics(), this.io.log);
      } catch (err) {
        await this.socket.close().catch(() => undefined);
        await this.fuse.unmount();
        throw err;
      }
      this.io.log(`metrics on ${this.metricsListener.url} (no token)`);
    }
    this.io.out(`mounted ${this.opts.mountpoint} (${this.tree.fileCount} files, ${this.tree.scopes.length} scopes)`);
    this.sync.start();
    if (this.opts.prefetchContent) void this.prefetch.schedule(this.tree);
  }

  async stop(): Promise<void> {
    this.prefetch.cancel();
    await this.sync.stop();
    await this.socket?.close().catch(() => undefined);
    await this.metricsListener?.close();
    await this.fuse?.unmount();
    await this.client.close();
  }

  /** Fetch the plan now; concurrent callers share one request. */
  refreshPlan(): Promise<void> {
    this.pendingSync ??= this.sync.refreshNow().finally(() => {
      this.pendingSync = undefined;
    });
    return this.pendingSync;
  }

  async status(): Promise<DaemonStatus> {
    return {
      mountpoint: this.opts.mountpoint,
      sessionId: this.tree.sessionId,
      planVersion: this.tree.version,
      files: this.tree.fileCount,
      scopes: [...this.tree.scopes],
      prefetch: { done: this.prefetch.progress.done, total: this.prefetch.progress.total },
      fuseBinding: describeBinding(this.chosenBinding),
      activity: await readActivity(await this.metrics(), this.startedAt),
    };
  }

  private backend(): ReadToolBackend {
    return {
      mountpoint: this.opts.mountpoint,
      hasFile: (scopePath) => this.tree.fileByScopePath(scopePath) !== undefined,
      read: (req) => this.client.read(req),
      canLoad: (req) => this.client.canLoad(req),
      manifest: () => this.client.manifest(),
      reminder: () => this.client.reminder(),
      refreshPlan: () => this.refreshPlan(),
      status: () => this.status(),
    };
  }

  private requestSync(): void {
    this.refreshPlan().catch(() => undefined);
  }

  private applyPlan(plan: Plan): void {
    const before = this.tree;
    this.setTree(Tree.fromPlan(plan, before, this.treeOpts));
    for (const scope of before.scopes) if (!this.tree.hasScope(scope)) this.grants.forget(scope);
    const added = this.tree.scopes.filter((s) => !before.hasScope(s));
    const removed = before.scopes.filter((s) => !this.tree.hasScope(s));
    const changes = [
      `${this.tree.fileCount} files`,
      added.length > 0 ? `added ${added.join(', ')}` : '',
      removed.length > 0 ? `removed ${removed.join(', ')}` : '',
    ].filter(Boolean);
    this.io.log(`sync: plan ${plan.version.slice(0, 12)} (${changes.join('; ')})`);
    if (this.opts.prefetchContent) void this.prefetch.schedule(this.tree);
  }

  /**
   * Every swap goes through here: changed paths are recorded (a binding with
   * one page cache per path makes their opens wait), and the binding hears
   * of it (a long-caching one invalidates what changed).
   */
  private setTree(next: Tree): void {
    const before = this.tree;
    this.tree = next;
    this.changedFiles?.record(next.changedPaths);
    this.fuse?.treeChanged?.(before, next);
  }

  private removeScope(scope: string): void {
    if (!this.tree.hasScope(scope)) return;
    this.setTree(this.tree.withoutScope(scope));
    this.grants.forget(scope);
    this.io.log(`${scope}: the control plane refused an open; removed from the mount`);
    this.requestSync();
  }

  private revoke(message: string): void {
    if (this.tree.fileCount === 0 && this.tree.scopes.length === 0) return;
    this.setTree(Tree.empty(this.treeOpts, this.tree));
    this.grants.forgetAll();
    this.io.log(`sync: ${message}; the session is no longer valid, the mount is now empty`);
  }
}
