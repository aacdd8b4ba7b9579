// `knowledgefs mount`'s start:
//
//   check FUSE → clean a stale mount (or, with --fuse-fd, check the mount
//   a privileged step made: handed-mount.ts) → session + first plan (fail fast:
//   control plane unreachable at start is exit 4, a supervisor restarts us)
//   → the MountDaemon (tree, mount, control socket, "mounted …") → run
//   until stopped.
//
// This module loads only what the start needs before the first request
// goes out; the rest of the daemon (tree, caches, FUSE adapter, control
// socket) loads while the control plane answers, not before asking it.

import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { KnowledgeError, isKnowledgeError } from '../core/errors.js';
import type { Plan } from '../core/session/plan.js';
import { prepareCacheDirectory } from './content/cache-directory.js';
import { HttpControlClient } from './control-plane/http-control-client.js';
import { chooseFuseBinding, DEFAULT_FUSE_BINDING, describeBinding, type ChosenBinding } from './fuse/fuse-binding.js';
import { describeFuseProblems, fuseProblems } from './fuse/fuse-check.js';
import { FUSE_NATIVE_ABSENT, fuseNativeInstalled } from './fuse/fuse-native-presence.js';
import { checkHandedMount, handedMountBinding } from './fuse/handed-mount.js';
import type { MountDaemonIo } from './mount-daemon.js';
import { describeMountOptions, validateMountOptions, type MountOptions } from './options.js';
import { cleanStaleMount } from './fuse/stale-mount.js';

function startupError(err: unknown, serverUrl: string): KnowledgeError {
  if (!isKnowledgeError(err)) return new KnowledgeError('internal', err instanceof Error ? err.message : String(err));
  if (err.code === 'unavailable') {
    return new KnowledgeError('unavailable', `${err.message}. Is \`knowledgefs serve\` running at ${serverUrl}? Check --server.`);
  }
  if (err.code === 'unauthorized') {
    return new KnowledgeError('unauthorized', `the control plane at ${serverUrl} rejected the runner token (wrong token, or the session was deleted)`);
  }
  return err;
}

/** Runs the daemon until `stop` resolves. Throws KnowledgeError for anything that prevents mounting. */
export async function runMountDaemon(opts: MountOptions, io: MountDaemonIo, stop: Promise<unknown>): Promise<void> {
  validateMountOptions(opts);
  // Before anything else: a --cache-dir another user could change is refused without contacting the server.
  if (opts.cacheDir !== undefined) prepareCacheDirectory(opts.cacheDir);
  const mountpoint = resolve(opts.mountpoint);
  const choice = opts.fuseBinding ?? DEFAULT_FUSE_BINDING;
  let chosen: ChosenBinding;
  if (opts.fuseFd === undefined) {
    chosen = chooseFuseBinding(choice);
    const problems = fuseProblems(undefined, chosen.binding);
    if (problems.length > 0) throw new KnowledgeError('config', describeFuseProblems(problems));
    const cleaned = await cleanStaleMount(mountpoint);
    if (cleaned !== undefined) io.log(cleaned);
    await mkdir(mountpoint, { recursive: true });
  } else {
    // Mounted already by a privileged step: no /dev/fuse, fusermount or mount point to prepare here.
    chosen = chooseFuseBinding(handedMountBinding(choice));
    await checkHandedMount(opts.fuseFd, mountpoint, { allowOther: opts.allowOther || opts.group !== undefined, defaultPermissions: opts.group !== undefined });
  }
  const binding = chosen.binding;
  const effective: MountOptions = { ...opts, mountpoint, fuseBinding: binding, fuseBindingChosen: chosen };

  const t0 = performance.now();
  const client = io.client ?? new HttpControlClient({ serverUrl: opts.serverUrl, token: opts.token, requestTimeoutMs: opts.requestTimeoutMs });
  const daemon = await (async () => {
    // The first plan stays inside this function: only the tree built from it outlives start-up.
    let plan: Plan | null;
    // Both requests at once (one round trip less); the session's answer decides the error when both fail.
    const asked = Promise.allSettled([client.session(), client.plan({ threshold: opts.prefetchThreshold })]);
    const loading = import('./mount-daemon.js');
    loading.catch(() => undefined); // awaited below unless the requests fail first
    try {
      const [session, first] = await asked;
      if (session.status === 'rejected') throw session.reason;
      if (first.status === 'rejected') throw first.reason;
      plan = first.value;
      if (plan === null) throw new KnowledgeError('unavailable', 'control plane answered 304 to a plan request without a version');
    } catch (err) {
      await client.close();
      throw startupError(err, opts.serverUrl);
    }
    const { MountDaemon } = await loading;
    io.log(`fuse binding: ${describeBinding(chosen)}`);
    if (!fuseNativeInstalled()) io.log(FUSE_NATIVE_ABSENT);
    io.log(`knowledgefs mount: ${describeMountOptions(effective)}`);
    const t1 = performance.now();
    const built = new MountDaemon(effective, io, plan, client);
    const t2 = performance.now();
    await built.start();
    const t3 = performance.now();
    // "session + plan" also covers loading the rest of the daemon when that outlasts the requests.
    io.log(`ready in ${Math.round(t3 - t0)} ms (session + plan ${Math.round(t1 - t0)} ms, tree ${Math.round(t2 - t1)} ms, mount ${Math.round(t3 - t2)} ms)`);
    return built;
  })();
  await stop;
  await daemon.stop();
}
