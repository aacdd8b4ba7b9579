// The node ids the kernel holds, with its lookup count of each (LOOKUP and
// READDIRPLUS entries add one, FORGET takes some away). A node id the kernel
// holds resolves to its node even after the tree moved on, until the kernel
// forgets it; a directory's id resolves to the current tree's directory
// while its path stays a directory with that id.

import { KnowledgeError } from '../../core/errors.js';
import { ROOT_INO, type Tree, type TreeNode } from '../../core/tree/tree.js';

interface Held {
  node: TreeNode;
  lookups: number;
}

export class KernelNodes {
  private readonly held = new Map<number, Held>();

  /** The kernel took one more lookup of `node` (a LOOKUP, or an entry of a READDIRPLUS). */
  hold(node: TreeNode): void {
    const held = this.held.get(node.stat.ino);
    if (held === undefined) this.held.set(node.stat.ino, { node, lookups: 1 });
    else {
      held.node = node;
      held.lookups++;
    }
  }

  /** FORGET's (node id, count) pairs; `gone` hears each node id the kernel no longer holds. */
  forget(pairs: Float64Array, gone: (ino: number) => void): void {
    for (let i = 0; i + 1 < pairs.length; i += 2) {
      const ino = pairs[i]!;
      const held = this.held.get(ino);
      if (held === undefined) continue;
      held.lookups -= pairs[i + 1]!;
      if (held.lookups <= 0) {
        this.held.delete(ino);
        gone(ino);
      }
    }
  }

  /** The kernel may have cached something of `ino`: the root, or a node id it looked up and has not forgotten. */
  holds(ino: number): boolean {
    return ino === ROOT_INO || this.held.has(ino);
  }

  /** The node the kernel was given for `ino`, if it still holds it (the root is never held: undefined). */
  given(ino: number): TreeNode | undefined {
    return this.held.get(ino)?.node;
  }

  /** The node behind a node id the kernel holds: the current one for a directory still there, else the one it was given. */
  nodeOf(ino: number, tree: Tree): TreeNode {
    if (ino === ROOT_INO) return tree.get('/') as TreeNode;
    const held = this.held.get(ino);
    if (held === undefined) throw new KnowledgeError('not_found', `unknown node id ${ino}`);
    if (held.node.kind === 'dir') {
      const now = tree.get(held.node.path);
      if (now?.kind === 'dir' && now.stat.ino === ino) held.node = now;
    }
    return held.node;
  }

  /** Node ids held of any of `scopes`. */
  *ofScopes(scopes: ReadonlySet<string>): Iterable<number> {
    for (const [ino, held] of this.held) if (scopes.has(held.node.scope)) yield ino;
  }

  /** True while the kernel holds an entry of a file of `scope`. */
  holdsFileOf(scope: string): boolean {
    for (const held of this.held.values()) if (held.node.kind === 'file' && held.node.scope === scope) return true;
    return false;
  }

  /**
   * The entries (parent node id, name) through which the kernel reaches the
   * files of `scope` it holds, as `tree` places them: what to invalidate so
   * that its next path walk to any of them asks the daemon.
   */
  *fileEntriesOf(scope: string, tree: Tree): Iterable<{ parentIno: number; name: string }> {
    for (const held of this.held.values()) {
      const node = held.node;
      if (node.kind !== 'file' || node.scope !== scope) continue;
      const cut = node.path.lastIndexOf('/');
      const parent = tree.get(cut <= 0 ? '/' : node.path.slice(0, cut));
      if (parent?.kind === 'dir' && this.holds(parent.stat.ino)) yield { parentIno: parent.stat.ino, name: node.path.slice(cut + 1) };
    }
  }

  clear(): void {
    this.held.clear();
  }
}
