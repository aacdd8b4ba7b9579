// How a native (libfuse 3) session stops serving: a mount this process made
// is unmounted, and the process waits a bounded time for the kernel to close
// the session; a mount handed over as a descriptor (handed-mount.ts) is only
// let go, since whoever mounted it detaches it.

import type { NativeAddon } from './native-addon-api.js';
import { mountEntry } from './stale-mount.js';

/** Most time the unmount waits for the kernel to close the session before letting the process go. */
const UNMOUNT_WAIT_MS = 2000;

export interface NativeStop {
  readonly native: Pick<NativeAddon, 'unmount' | 'unref'>;
  readonly mountpoint: string;
  /** The mount was handed over as a descriptor (--fuse-fd). */
  readonly handed: boolean;
  /** True once the kernel has closed the session. */
  readonly hasEnded: () => boolean;
  /** Settles when the kernel closes the session. */
  readonly ended: Promise<void>;
  readonly log: (line: string) => void;
}

export async function stopNative(s: NativeStop): Promise<void> {
  if (s.handed) return release(s);
  // Detached underneath us (fusermount -uz, a container runtime): said once, and nothing left to wait for
  // once the kernel has closed the session (it may not have told us yet).
  if (s.hasEnded() || (await mountEntry(s.mountpoint)) === undefined) {
    s.log(`${s.mountpoint} was already detached; stopping`);
    if (s.hasEnded()) return;
  }
  s.native.unmount();
  // A reader still holding a file keeps the kernel's session open after a lazy unmount; don't wait for it forever.
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      s.native.unref();
      resolve();
    }, UNMOUNT_WAIT_MS);
  });
  await Promise.race([s.ended, gaveUp]);
  clearTimeout(timer);
}

/**
 * Stop serving a mount this process did not make. It cannot unmount (no
 * privilege, and libfuse's unmount of a `/dev/fd/N` session does nothing):
 * the descriptor closes when the process exits, and whoever mounted
 * detaches the mount point (mount-helper does, once this process exits).
 */
function release(s: NativeStop): Promise<void> {
  if (!s.hasEnded()) {
    s.native.unmount(); // ends the session loop at its next request
    s.native.unref();
  }
  return Promise.resolve();
}
