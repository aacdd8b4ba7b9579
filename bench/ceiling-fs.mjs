#!/usr/bin/env node
// The ceiling of the binding: the smallest fuse-native filesystem that serves
// a directory's files from memory, with every cache setting at its best
// (kernel page cache kept across opens, 60 s attr/entry timeouts). No
// network, no authorisation, no hashing: whatever our mount costs above this
// is ours; whatever this costs above local disk is fuse-native + libfuse2.
//
// Usage: node bench/ceiling-fs.mjs SRC_DIR MOUNTPOINT [--policy best|ours]
// Loads SRC_DIR into memory, mounts, prints `mounted MOUNTPOINT (N files)`
// on stdout; SIGINT/SIGTERM unmount and exit 0. Same modes as the real
// mount: files 0444, directories 0555. Writes are EROFS.
//
// `--policy ours` keeps the binding and the in-memory data but uses our
// mount's kernel cache policy instead (auto_cache, 1 s attr/entry timeouts:
// what freshness after a sync requires), so the bench can split the gap to
// the ceiling into "cache policy" and "our per-operation work".
//
// This process must never touch its own mount point (the FUSE loop runs on
// this event loop): the orchestrator drives the mount from other processes.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Fuse = require('fuse-native');

const [src, mnt, policyFlag, policyValue] = process.argv.slice(2);
const policy = policyFlag === '--policy' ? policyValue : 'best';
if (!src || !mnt || (policy !== 'best' && policy !== 'ours')) {
  process.stderr.write('usage: node bench/ceiling-fs.mjs SRC_DIR MOUNTPOINT [--policy best|ours]\n');
  process.exit(2);
}

const uid = process.getuid();
const gid = process.getgid();
const nodes = new Map(); // '/a/b' -> { stat, names?: string[], data?: Buffer }
let fileCount = 0;

function dirStat(mtime) {
  return { mode: 0o040555, size: 4096, nlink: 2, uid, gid, mtime, atime: mtime, ctime: mtime, blocks: 8 };
}

function load(dir, fusePath) {
  const st = statSync(dir);
  const names = readdirSync(dir).sort();
  nodes.set(fusePath, { stat: dirStat(st.mtime), names });
  for (const name of names) {
    const full = join(dir, name);
    const child = fusePath === '/' ? `/${name}` : `${fusePath}/${name}`;
    const cst = statSync(full);
    if (cst.isDirectory()) {
      load(full, child);
    } else if (cst.isFile()) {
      const data = readFileSync(full);
      const stat = { mode: 0o100444, size: data.length, nlink: 1, uid, gid, mtime: cst.mtime, atime: cst.mtime, ctime: cst.mtime, blocks: Math.ceil(data.length / 512) };
      nodes.set(child, { stat, data });
      fileCount++;
    }
  }
}

load(src, '/');

const EROFS = Fuse.EROFS;
const readOnly = (...args) => args[args.length - 1](EROFS);

const ops = {
  getattr(path, cb) {
    const node = nodes.get(path);
    if (!node) return cb(Fuse.ENOENT);
    return cb(0, node.stat);
  },
  fgetattr(path, _fd, cb) {
    const node = nodes.get(path);
    if (!node) return cb(Fuse.ENOENT);
    return cb(0, node.stat);
  },
  readdir(path, cb) {
    const node = nodes.get(path);
    if (!node) return cb(Fuse.ENOENT);
    if (!node.names) return cb(Fuse.ENOTDIR);
    return cb(0, node.names);
  },
  open(path, flags, cb) {
    const node = nodes.get(path);
    if (!node) return cb(Fuse.ENOENT);
    if ((flags & 3) !== 0) return cb(EROFS);
    return cb(0, 1);
  },
  release(_path, _fd, cb) {
    return cb(0);
  },
  read(path, _fd, buf, len, pos, cb) {
    const node = nodes.get(path);
    if (!node || !node.data) return cb(Fuse.ENOENT);
    if (pos >= node.data.length) return cb(0);
    const n = node.data.copy(buf, 0, pos, Math.min(node.data.length, pos + len));
    return cb(n);
  },
  write: readOnly, create: readOnly, unlink: readOnly, rename: readOnly, mkdir: readOnly,
  rmdir: readOnly, truncate: readOnly, ftruncate: readOnly, chmod: readOnly, chown: readOnly,
  utimens: readOnly, symlink: readOnly, link: readOnly, mknod: readOnly,
};

const cacheOptions = policy === 'best'
  ? { kernelCache: true, entryTimeout: 60, attrTimeout: 60 }
  : { autoCache: true, entryTimeout: 1, attrTimeout: 1 };
const fuse = new Fuse(mnt, ops, { force: true, mkdir: true, fsname: 'kfs-ceiling', ...cacheOptions });

let closing = false;
function shutdown() {
  if (closing) return;
  closing = true;
  fuse.unmount((err) => {
    if (err) process.stderr.write(`ceiling-fs: unmount failed: ${err.message}\n`);
    process.exit(err ? 1 : 0);
  });
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);

fuse.mount((err) => {
  if (err) {
    process.stderr.write(`ceiling-fs: mount failed: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`mounted ${mnt} (${fileCount} files)\n`);
});
