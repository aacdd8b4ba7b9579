// The mount daemon's options in one documented type: meaning, default and
// how each interacts with the others. `validateMountOptions` checks them at
// startup with one clear message per problem.

import type { ListenAddress } from '../core/text/listen-address.js';
import { KnowledgeError } from '../core/errors.js';
import { formatBytes } from '../core/text/units.js';
import type { ChosenBinding, FuseBindingChoice } from './fuse/fuse-binding.js';

export interface MountOptions {
  /** Absolute path where `knowledge/` appears; created when missing. */
  readonly mountpoint: string;
  /** Control plane base URL, e.g. `http://127.0.0.1:7700`, or several replicas' URLs separated by commas. */
  readonly serverUrl: string;
  /** Runner token (from --token-file or KNOWLEDGEFS_TOKEN); kept in memory only. */
  readonly token: string;
  /**
   * --prefetch-threshold (default 256 MiB). When every scope the session may
   * load totals at most this, the plan materialises all of them; otherwise
   * account + bound team + mounted teams. Keep it ≤ --cache-size (or set
   * --cache-dir) so prefetched content stays cached.
   */
  readonly prefetchThreshold: number;
  /** --prefetch-content on|off (default on): fetch all materialised content in the background after ready. */
  readonly prefetchContent: boolean;
  /** --cache-dir (default none): content-addressed spill of fetched bytes, verified when read back; survives restarts. */
  readonly cacheDir?: string | undefined;
  /** --cache-dir-size (default 1 GiB): bound of --cache-dir; least recently used files are deleted past it. */
  readonly cacheDirSize?: number;
  /** --cache-size (default 256 MiB): memory bound of the content cache. 0 = no memory cache (every open refetches unless --cache-dir). */
  readonly cacheSize: number;
  /**
   * --grant-ttl (default 5s): how long one per-scope open grant is reused.
   * Bounds how long an open can still succeed after a revocation; 0 asks the
   * control plane on every open (slower `grep -r`).
   */
  readonly grantTtlMs: number;
  /**
   * --kernel-opens on|off (default off): on the native binding, the kernel
   * opens files by itself (FUSE no-open: no OPEN, RELEASE or FLUSH reach the
   * daemon) and the grant bound holds through the entries it may keep
   * (kernel-grant-bound.ts). Off with --grant-ttl 0, which asks on every open.
   */
  readonly kernelOpens?: boolean;
  /**
   * --sync-interval (default 2s): the plan is polled (long-poll) at most this
   * often; edits, new files and revocations reach `ls` within about this
   * long plus the kernel's 1 s attribute cache.
   */
  readonly syncIntervalMs: number;
  /** --request-timeout (default 5s): bound on every control-plane call and on each `open`; past it → EIO. */
  readonly requestTimeoutMs: number;
  /** --socket: the local control socket (mode 0600) for read/manifest/reminder. */
  readonly socketPath: string;
  /** --allow-other: let other users (a non-root agent) use the mount; needs user_allow_other in /etc/fuse.conf unless root. */
  readonly allowOther: boolean;
  /**
   * --group: only this gid (besides the daemon's user and root) may read the
   * mount: files 0440 and directories 0550 owned by it, checked by the kernel
   * (default_permissions); implies allowOther.
   */
  readonly group?: number | undefined;
  /** Concurrent fetches during prefetch (default 8). */
  readonly prefetchConcurrency?: number;
  /** Kernel attribute/entry cache in seconds (default 1 on fuse-native; 1 h on native, which is told of changes). */
  readonly attrTimeoutSec?: number;
  /** Also serve the daemon's metrics on this address, without a token (`--metrics-listen`). */
  readonly metricsListen?: ListenAddress | undefined;
  /** --fuse-binding (default auto): which FUSE binding mounts (fuse-binding.ts). */
  readonly fuseBinding?: FuseBindingChoice;
  /**
   * --fuse-fd N (default none): a privileged step (`knowledgefs mount-helper`)
   * already mounted `mountpoint` and handed this process the open /dev/fuse
   * descriptor N; the daemon serves it and mounts nothing itself, so it needs
   * neither CAP_SYS_ADMIN nor /dev/fuse (handed-mount.ts). Native binding only;
   * --allow-other and --group must match how it was mounted.
   */
  readonly fuseFd?: number | undefined;
  /** The binding run-mount.ts chose, and why (for `status`); chosen again from fuseBinding when absent. */
  readonly fuseBindingChosen?: ChosenBinding;
}

export const MOUNT_DEFAULTS = {
  prefetchThreshold: 256 * 1024 * 1024,
  prefetchContent: true,
  cacheSize: 256 * 1024 * 1024,
  cacheDirSize: 1024 ** 3,
  grantTtlMs: 5000,
  syncIntervalMs: 2000,
  requestTimeoutMs: 5000,
  prefetchConcurrency: 8,
} as const;

const MAX_TIMEOUT_MS = 10 * 60_000;

export function validateMountOptions(o: MountOptions): void {
  const problems: string[] = [];
  if (o.token.trim() === '') problems.push('the runner token is empty');
  if (/\s/.test(o.token)) problems.push('the runner token contains whitespace');
  if (o.requestTimeoutMs < 100 || o.requestTimeoutMs > MAX_TIMEOUT_MS) problems.push('--request-timeout must be between 100ms and 10m');
  if (o.syncIntervalMs < 100 || o.syncIntervalMs > MAX_TIMEOUT_MS) problems.push('--sync-interval must be between 100ms and 10m');
  if (o.grantTtlMs > MAX_TIMEOUT_MS) problems.push('--grant-ttl must be at most 10m');
  if (o.socketPath === '') problems.push('--socket must not be empty');
  if (problems.length > 0) throw new KnowledgeError('invalid_argument', problems.join('; '));
}

/** One line describing the effective settings (no token), for the startup log. */
export function describeMountOptions(o: MountOptions): string {
  return [
    `server ${o.serverUrl}`,
    `prefetch-threshold ${formatBytes(o.prefetchThreshold)}`,
    `prefetch-content ${o.prefetchContent ? 'on' : 'off'}`,
    `cache-size ${formatBytes(o.cacheSize)}`,
    `cache-dir ${o.cacheDir === undefined ? '(none)' : `${o.cacheDir} (≤ ${formatBytes(o.cacheDirSize ?? MOUNT_DEFAULTS.cacheDirSize)})`}`,
    `grant-ttl ${o.grantTtlMs}ms`,
    `kernel-opens ${o.kernelOpens === true && o.grantTtlMs > 0 ? 'on' : 'off'}`,
    `sync-interval ${o.syncIntervalMs}ms`,
    `request-timeout ${o.requestTimeoutMs}ms`,
    `socket ${o.socketPath}`,
    ...(o.metricsListen !== undefined ? [`metrics-listen ${o.metricsListen.host}:${o.metricsListen.port}`] : []),
    `fuse-binding ${o.fuseBinding ?? 'auto'}`,
    ...(o.fuseFd !== undefined ? [`fuse-fd ${o.fuseFd} (mounted by another process)`] : []),
  ].join(', ');
}
