// FUSE requests a filesystem process receives while a command runs: strace
// on every thread of the process, each read(2) of /dev/fuse is one request,
// and its header's opcode says which. The counts are what explain the
// times (a warm `grep -r` that needs no LOOKUP or READ is fast). strace
// slows the process down, so these runs are never timed.

import { readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { run, start, stop } from './proc.mjs';

// fuse_in_header.opcode (linux/fuse.h)
const OPCODES = {
  1: 'LOOKUP', 2: 'FORGET', 3: 'GETATTR', 4: 'SETATTR', 14: 'OPEN', 15: 'READ', 17: 'STATFS', 18: 'RELEASE',
  20: 'FLUSH', 22: 'GETXATTR', 23: 'LISTXATTR', 26: 'INIT', 27: 'OPENDIR', 28: 'READDIR', 29: 'RELEASEDIR',
  34: 'ACCESS', 36: 'INTERRUPT', 42: 'BATCH_FORGET', 44: 'READDIRPLUS', 47: 'LSEEK',
};

export const HAS_STRACE = (await run('command -v strace >/dev/null')).code === 0;

function fuseFds(pid) {
  const fds = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) === '/dev/fuse') fds.push(fd);
    } catch {
      // closed meanwhile
    }
  }
  return fds;
}

/** Runs `cmd` while counting the FUSE requests process `pid` reads: { total, byOp }. */
export async function countFuseOps(pid, cmd, outFile) {
  const fds = fuseFds(pid);
  if (fds.length === 0) throw new Error(`process ${pid} has no /dev/fuse open`);
  const tracer = start(`strace-${pid}`, 'strace', ['-f', '-qq', '-p', String(pid), '-e', 'trace=read', '-e', `read=${fds.join(',')}`, '-o', outFile]);
  try {
    await new Promise((r) => setTimeout(r, 1500)); // attached to every thread
    const r = await run(cmd);
    if (r.code !== 0) throw new Error(`exit ${r.code}: ${cmd}`);
    await new Promise((r2) => setTimeout(r2, 500)); // late FORGETs and RELEASEs
  } finally {
    await stop(tracer);
  }
  // With -f each line starts with the thread id; a read that blocks is split into
  // "read(FD, <unfinished ...>" and "<... read resumed>…= N", and its data dump
  // follows whichever line completes it.
  const byOp = {};
  let total = 0;
  let expectHeader = false;
  const pending = new Map();
  for (const line of readFileSync(outFile, 'utf8').split('\n')) {
    const call = /^(\d+)\s+read\((\d+),/.exec(line);
    const resumed = /^(\d+)\s+<\.\.\. read resumed>/.exec(line);
    if (call || resumed) {
      const tid = (call ?? resumed)[1];
      const fd = call ? call[2] : pending.get(tid);
      if (/<unfinished \.\.\.>/.test(line)) {
        pending.set(tid, fd);
        expectHeader = false;
        continue;
      }
      pending.delete(tid);
      expectHeader = fd !== undefined && fds.includes(fd) && /= \d+/.test(line) && !/= 0$/.test(line);
      continue;
    }
    const m = /\|\s+00000\s+((?:[0-9a-f]{2}\s+){8})/.exec(line);
    if (expectHeader && m) {
      const b = m[1].trim().split(/\s+/).map((h) => parseInt(h, 16));
      const opcode = b[4] | (b[5] << 8) | (b[6] << 16) | (b[7] << 24);
      const name = OPCODES[opcode] ?? `op${opcode}`;
      byOp[name] = (byOp[name] ?? 0) + 1;
      total++;
      expectHeader = false;
    }
  }
  rmSync(outFile, { force: true });
  return { total, byOp };
}
