// What the addon may answer by itself (its fast path, native-fuse-adapter.ts):
// which node ids it may open without asking, the scope each belongs to, and
// every scope's grant deadline. Kept here so that whatever the addon is told
// is also known here, and taken back here: a node leaves when a tree swap
// replaces or removes it or its scope, or the kernel forgets it.
//
// A grant the fast path used is asked for again before it expires (the core
// never sees those opens, so it would not renew it by itself).

import type { Tree, TreeNode } from '../../core/tree/tree.js';
import { FAST_DIR_SCOPE, type NativeAddon } from './native-addon-api.js';

/**
 * A grant the addon's fast path used is asked for again once this share of
 * its life has passed, so a `grep -r` running across its expiry never waits
 * for the control plane (the TTL still counts from each request). Half: the
 * other half (2.5 s by default) covers a control plane slow to answer under
 * load; at 80 % a busy one let grants lapse mid-`grep`.
 */
const RENEW_AT = 0.5;

type FastPathAddon = Pick<NativeAddon, 'fastGrant' | 'fastTakeUsed' | 'fastAllow' | 'fastDrop' | 'fastCounts'>;

export class NativeFastPath {
  /** Nodes the addon may open itself, as it was told: files, and directories (opendir). */
  private readonly nodes = new Map<number, TreeNode>();
  /** A small number per scope, as the addon knows scopes. */
  private readonly scopeIds = new Map<string, number>();
  /** Per scope: the timer that renews its grant ahead of expiry if the fast path used it. */
  private readonly renewals = new Map<string, NodeJS.Timeout>();
  private ended = false;

  constructor(
    private readonly native: FastPathAddon,
    private readonly renewGrant: (scope: string) => void,
  ) {}

  /**
   * The core's deadline for `scope` moved: the addon hears it, and shortly
   * before it passes the grant is asked for again if the addon answered
   * opens of that scope meanwhile.
   */
  grantChanged(scope: string, untilMs: number): void {
    const id = this.scopeId(scope);
    this.native.fastGrant(id, untilMs);
    clearTimeout(this.renewals.get(scope));
    this.renewals.delete(scope);
    if (untilMs === 0 || this.ended) return;
    const life = untilMs - Date.now();
    if (life <= 0) return;
    const timer = setTimeout(() => {
      this.renewals.delete(scope);
      if (this.native.fastTakeUsed(id)) this.renewGrant(scope);
    }, life * RENEW_AT);
    timer.unref();
    this.renewals.set(scope, timer);
  }

  private scopeId(scope: string): number {
    let id = this.scopeIds.get(scope);
    if (id === undefined) {
      id = this.scopeIds.size;
      this.scopeIds.set(scope, id);
    }
    return id;
  }

  counts(): { opens: number; releases: number; opendirs: number; releasedirs: number } {
    const [opens, releases, opendirs, releasedirs] = this.native.fastCounts();
    return { opens, releases, opendirs, releasedirs };
  }

  /** An open (or opendir) of `node` (node id `ino`) succeeded: later ones may be answered by the addon, while `current` still has it. */
  allow(ino: number, node: TreeNode, current: Tree): void {
    if (this.ended || this.nodes.has(ino) || current.get(node.path)?.stat.ino !== ino) return;
    this.nodes.set(ino, node);
    this.native.fastAllow(ino, node.kind === 'dir' ? FAST_DIR_SCOPE : this.scopeId(node.scope));
  }

  drop(ino: number): void {
    if (this.nodes.delete(ino)) this.native.fastDrop(ino);
  }

  /** Before anything else on a swap: no node the new tree replaced or lost, or of a scope it lost, stays on the fast path. */
  dropReplaced(after: Tree): void {
    for (const [ino, node] of this.nodes) {
      if ((node.kind === 'file' && !after.hasScope(node.scope)) || after.get(node.path)?.stat.ino !== ino) this.drop(ino);
    }
  }

  /** The kernel closed the session: nothing more is allowed or renewed. */
  end(): void {
    this.ended = true;
    this.nodes.clear();
    for (const timer of this.renewals.values()) clearTimeout(timer);
    this.renewals.clear();
  }
}
