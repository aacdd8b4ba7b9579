// `knowledgefs manifest` and `knowledgefs reminder`: the stable prompt prefix
// and the volatile tail, fetched from the mount daemon's control socket (the
// control plane assembles both). Plain output is the text exactly as served,
// so a harness can hash or cache it; --json adds the sha256 (manifest) or the
// changed/deleted lists (reminder).

import type { Command } from 'commander';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import type { KnowledgeClient } from '../../client/knowledge-client.js';
import { DAEMON_USER_OPTION, callDaemon, type SocketCommandOptions } from './socket-command.js';

async function run<T extends { text: string }>(
  ctx: CliContext,
  result: CommandResult,
  opts: SocketCommandOptions,
  fetch: (client: KnowledgeClient) => Promise<T>,
): Promise<void> {
  const value = await callDaemon(ctx, result, opts, fetch);
  if (value === undefined) return;
  ctx.stdout.write(opts.json ? `${JSON.stringify({ ok: true, ...value })}\n` : value.text);
  result.code = EXIT.ok;
}

export function registerManifest(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('manifest')
    .description('Print the session\'s manifest: browsing guidance and the DUTY.md of each advertised and mounted scope.')
    .option('--socket <path>', 'the mount daemon\'s control socket (default: $KNOWLEDGEFS_SOCKET or the standard path)')
    .option(...DAEMON_USER_OPTION)
    .option('--json', 'print {"ok": true, text, sha256}')
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs manifest
  knowledgefs manifest --json        # key a prompt cache on .sha256`,
    )
    .action(async (opts: SocketCommandOptions) => {
      await run(ctx, result, opts, (c) => c.manifest());
    });
}

export function registerReminder(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('reminder')
    .description('Print today\'s date and the files read earlier that changed or vanished since (each reported once).')
    .option('--socket <path>', 'the mount daemon\'s control socket (default: $KNOWLEDGEFS_SOCKET or the standard path)')
    .option(...DAEMON_USER_OPTION)
    .option('--json', 'print {"ok": true, text, date, changed, deleted}')
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs reminder
  knowledgefs reminder --socket /run/knowledgefs/control.sock --json`,
    )
    .action(async (opts: SocketCommandOptions) => {
      await run(ctx, result, opts, (c) => c.reminder());
    });
}
