// The shell commands measured on every filesystem, run as an agent would run
// them, in child processes. Each pipes into `wc` so the output is one number
// that must agree across filesystems (a fast wrong answer is not a result).

import { run } from './proc.mjs';
import { GREP_TOKEN, BIG_FILE } from '../corpus.mjs';

const q = (p) => `'${p.replace(/'/g, `'\\''`)}'`;

export const HAS_RG = (await run('command -v rg >/dev/null')).code === 0;

/** The warm battery, in table order. */
export function battery(root) {
  const cmds = [
    { id: 'grep', label: 'grep -r (warm)', cmd: `grep -r ${GREP_TOKEN} ${q(root)} | wc -l` },
    { id: 'find', label: 'find | wc -l', cmd: `find ${q(root)} | wc -l` },
    { id: 'lsR', label: 'ls -lR', cmd: `ls -lR ${q(root)} | wc -l` },
  ];
  if (HAS_RG) cmds.push({ id: 'rg', label: 'rg (warm)', cmd: `rg ${GREP_TOKEN} ${q(root)} | wc -l` });
  // Every byte of every file, in one process: the byte count is the same on every filesystem (headers are fixed-size).
  cmds.push({ id: 'tar', label: 'tar cf - (warm)', cmd: `tar cf - -C ${q(root)} . | wc -c` });
  cmds.push({ id: 'cat', label: 'cat 1 MB file', cmd: `cat ${q(`${root}/${BIG_FILE}`)} | wc -c` });
  return cmds;
}

export function grepCommand(root) {
  return `grep -r ${GREP_TOKEN} ${q(root)} | wc -l`;
}

/** One timed run; a failing command is an error, not a fast sample. */
export async function timed(cmd, timeoutMs = 600_000) {
  const r = await run(cmd, { timeoutMs });
  if (r.timedOut) throw new Error(`timed out after ${timeoutMs} ms: ${cmd}`);
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${cmd}: ${r.stderr.trim().slice(0, 300)}`);
  return { ms: r.ms, output: r.stdout.trim() };
}
