// `knowledgefs status`: what the mount daemon is doing, from its control
// socket (same socket rule as `read`). The text form is one screen for a
// person; --json prints the DaemonStatus as the socket answers it.
//
// Every number comes from the daemon's metrics registry (daemon/socket/activity.ts),
// so it matches what `mount --metrics-listen` exports.

import type { Command } from 'commander';
import { formatBytes } from '../../core/text/units.js';
import type { DaemonStatus } from '../../core/wire.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { formatTable } from '../text-table.js';
import { DAEMON_USER_OPTION, callDaemon } from './socket-command.js';

const count = (n: number) => n.toLocaleString('en-US');
const ms = (n: number | null) => (n === null ? '-' : n < 1 ? `${n.toFixed(2)}ms` : n < 100 ? `${n.toFixed(1)}ms` : `${Math.round(n)}ms`);

function duration(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds * 10) / 10}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m ${Math.round(seconds % 60)}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** The one-screen text form. */
export function formatStatus(s: DaemonStatus): string {
  const lines = [
    `mount      ${s.mountpoint}`,
    `session    ${s.sessionId}, plan ${s.planVersion.slice(0, 12)}: ${count(s.files)} files in ${s.scopes.length} scopes (${s.scopes.join(', ') || 'none'})`,
    `prefetch   ${count(s.prefetch.done)}/${count(s.prefetch.total)} files`,
    ...(s.fuseBinding === undefined ? [] : [`fuse       ${s.fuseBinding}`]),
  ];
  const a = s.activity;
  if (a === undefined) return `${lines.join('\n')}\n`;
  const rate = a.cache.hitRate === null ? 'no lookups yet' : `${(a.cache.hitRate * 100).toFixed(1)}% hits`;
  lines.push(
    `uptime     ${duration(a.uptimeSeconds)}`,
    `sync       plan confirmed ${duration(a.sync.planAgeSeconds)} ago; ${count(a.sync.checks)} checks, ${count(a.sync.errors)} failed`,
    `cache      ${rate} (${count(a.cache.hits)} hits, ${count(a.cache.misses)} misses); ${formatBytes(a.cache.memoryBytes)} in memory, ${formatBytes(a.cache.diskBytes)} on disk`,
    `fetches    ${count(a.fetches.files)} files, ${count(a.fetches.batches)} batches (${count(a.fetches.readAheads)} read-aheads), ${count(a.fetches.errors)} failed; ${formatBytes(a.fetches.bytes)} received`,
    `grants     ${count(a.grants.asked)} asked, ${count(a.grants.reused)} reused`,
    `EIO        ${count(a.eio)}`,
  );
  if (a.operations.length > 0) {
    const rows = [['operation', 'count', 'mean', 'p99', 'errors']];
    for (const op of a.operations) {
      const errors = Object.entries(op.errors).map(([errno, n]) => `${errno} ${count(n)}`).join(', ');
      rows.push([op.op, count(op.count), ms(op.meanMs), ms(op.p99Ms), errors || '-']);
    }
    lines.push('', ...formatTable(rows, [1, 2, 3]));
  }
  return `${lines.join('\n')}\n`;
}

export function registerStatus(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('status')
    .description('Show what the mount daemon is doing: FUSE operations and latency, cache, fetches, prefetch, grants, sync lag, EIO.')
    .option('--socket <path>', "the mount daemon's control socket (default: $KNOWLEDGEFS_SOCKET or the standard path)")
    .option(...DAEMON_USER_OPTION)
    .option('--json', 'print the status as one JSON object')
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs status
  knowledgefs status --json | jq .activity.sync.planAgeSeconds`,
    )
    .action(async (opts: { socket?: string; daemonUser?: string; json?: boolean }) => {
      const status = await callDaemon(ctx, result, opts, (client) => client.status());
      if (status === undefined) return;
      ctx.stdout.write(opts.json ? `${JSON.stringify(status)}\n` : formatStatus(status));
      result.code = EXIT.ok;
    });
}
