#!/usr/bin/env node
// What counting and timing every FUSE operation (fuse-op-meter.ts, the
// numbers behind `knowledgefs status` and the daemon's metrics) costs per
// operation, in-process: the fuse-native callback table with and without
// the meter, driven by the warm `grep -r` sequence per file (getattr, open,
// read, release) against a filesystem that answers from memory. Both are
// measured in the same run, alternating, and reported as µs per operation
// and as a ratio.
//
//   npm run build && node bench/fuse-meter-cost.mjs [files=200000]

import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dist = pathToFileURL(join(fileURLToPath(new URL('..', import.meta.url)), 'dist')).href;
const { buildOps, OP_KINDS } = await import(`${dist}/daemon/fuse/fuse-adapter.js`);
const { ErrnoMapper } = await import(`${dist}/daemon/fuse/errno.js`);
const { FuseOpMeter } = await import(`${dist}/daemon/fuse/fuse-op-meter.js`);

const files = Number(process.argv[2] ?? 200_000);
const stat = { mode: 0o100444, size: 64, uid: 0, gid: 0, mtime: new Date(), atime: new Date(), ctime: new Date(), nlink: 1, ino: 1 };
const bytes = Buffer.alloc(64, 120);
const fs = {
  getattr: () => stat,
  readdirPlus: () => ({ names: [], stats: [] }),
  access: () => undefined,
  statfs: () => ({}),
  open: () => 7,
  read: (_fd, target, length, position) => bytes.copy(target, 0, position, Math.min(bytes.length, position + length)),
  release: () => undefined,
};
const plain = buildOps(fs, new ErrnoMapper(() => undefined));
const metered = new FuseOpMeter().wrapOps(plain, OP_KINDS);

function run(ops) {
  const buf = Buffer.alloc(4096);
  const done = () => undefined;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < files; i++) {
    ops.getattr('/a', done);
    ops.open('/a', 0, done);
    ops.read('/a', 7, buf, 4096, 0, done);
    ops.release('/a', 7, done);
  }
  return Number(process.hrtime.bigint() - t0) / 1e3 / (files * 4);
}

const rounds = { plain: [], metered: [] };
run(plain);
run(metered);
for (let r = 0; r < 5; r++) {
  rounds.plain.push(run(plain));
  rounds.metered.push(run(metered));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p = median(rounds.plain);
const m = median(rounds.metered);
process.stdout.write(`${files} files × 4 ops, median of 5 rounds: plain ${p.toFixed(3)} µs/op, metered ${m.toFixed(3)} µs/op, +${(m - p).toFixed(3)} µs/op (×${(m / p).toFixed(2)})\n`);
