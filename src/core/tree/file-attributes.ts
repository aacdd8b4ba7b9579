// The extended attributes of a file on the mount: read-only, from the tree
// alone (no request, whatever binding asks), so `getfattr -d` shows where a
// file's bytes came from as cheaply as `stat` shows their size:
//
//   user.knowledgefs.sha256         the bytes' sha256, as the plan names them
//   user.knowledgefs.scope_version  the version of the file's scope in that plan
//   user.knowledgefs.commit         the commit that last changed it (git data directories)
//   user.knowledgefs.source         its source URL (serve/publish --source-url)
//   user.knowledgefs.published_at   when these bytes were published (or first scanned)
//
// The last three only when the control plane said so (an older control plane
// says nothing of provenance). Directories have none. A path not in the tree
// has no attributes to ask for: the binding answers ENOENT before this.

import type { FileNode, Tree } from './tree.js';

export const XATTR_PREFIX = 'user.knowledgefs.';

/** The attributes of `node` in `tree`, in the order listxattr gives them (values are UTF-8 text, no newline). */
export function fileAttributes(tree: Tree, node: FileNode): Map<string, string> {
  const attrs = new Map<string, string>();
  attrs.set(`${XATTR_PREFIX}sha256`, node.sha256);
  const version = tree.scopeVersion(node.scope);
  if (version !== undefined) attrs.set(`${XATTR_PREFIX}scope_version`, version);
  const p = tree.fileProvenance(node);
  if (p?.commit != null) attrs.set(`${XATTR_PREFIX}commit`, p.commit);
  if (p?.source != null) attrs.set(`${XATTR_PREFIX}source`, p.source);
  if (p !== undefined) attrs.set(`${XATTR_PREFIX}published_at`, p.publishedAt);
  return attrs;
}
