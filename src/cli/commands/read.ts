// `knowledgefs read PATH`: the agent's read tool. It asks the mount daemon's
// control socket, which gets a fresh control-plane decision, so this is the
// one path that brings in an eligible team that is not on disk yet (and
// mounts it). Plain output is the file's text; past 100 000 characters a
// stderr line says how to page on. Errors go to stderr (or stdout as JSON
// with --json) with the exit code of their kind: a personal session's
// hidden denial prints exactly what a missing file prints.

import type { Command } from 'commander';
import { READ_OUTPUT_CAP, type ReadResult } from '../../client/knowledge-client.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { optionParser } from '../option-parser.js';
import { DAEMON_USER_OPTION, callDaemon, parseCount, shellQuote, type SocketCommandOptions } from './socket-command.js';

interface ReadOptions extends SocketCommandOptions {
  offset?: number;
  limit?: number;
}

function truncationLine(typed: string, res: ReadResult, limit: number | undefined): string {
  const next = res.nextOffset ?? res.totalChars;
  const limitFlag = limit === undefined ? '' : ` --limit ${limit}`;
  return `… truncated at character ${next} of ${res.totalChars}; continue with: knowledgefs read ${shellQuote(typed)} --offset ${next}${limitFlag}\n`;
}

export function registerRead(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('read')
    .description('Print a knowledge file; loads (and mounts) an eligible team that is not on disk yet.')
    .argument('<path>', 'as ls/find print it: knowledge/<scope>/<path>, or an absolute path under the mount')
    .option('--socket <path>', 'the mount daemon\'s control socket (default: $KNOWLEDGEFS_SOCKET or the standard path)')
    .option(...DAEMON_USER_OPTION)
    .option('--offset <n>', 'characters to skip before printing', optionParser((t) => parseCount(t, 0)))
    .option('--limit <n>', `characters to print at most (1..${READ_OUTPUT_CAP}, default ${READ_OUTPUT_CAP})`, optionParser((t) => parseCount(t, 1, READ_OUTPUT_CAP)))
    .option('--json', 'print {"ok", path, content, sha256, size, offset, totalChars, truncated, nextOffset, mounted} or {"ok": false, "error"}')
    .addHelpText(
      'after',
      `
Exit codes: 0 ok; 1 no such file (also a file this session may not load); 2 usage;
3 denied, with what to do (team session asking for another team);
4 unavailable (the control plane or the membership source is down: the message says which).

Examples:
  knowledgefs read knowledge/team_search/DUTY.md
  knowledgefs read knowledge/account/policies/on-call.md --offset 100000`,
    )
    .action(async (path: string, opts: ReadOptions) => {
      const res = await callDaemon(ctx, result, opts, (client) =>
        client.read(path, {
          ...(opts.offset === undefined ? {} : { offset: opts.offset }),
          ...(opts.limit === undefined ? {} : { limit: opts.limit }),
        }),
      );
      if (res === undefined) return;
      if (opts.json) {
        ctx.stdout.write(`${JSON.stringify({ ok: true, ...res })}\n`);
      } else {
        ctx.stdout.write(res.content);
        if (res.truncated) {
          const sep = res.content === '' || res.content.endsWith('\n') ? '' : '\n';
          ctx.stderr.write(`${sep}${truncationLine(path, res, opts.limit)}`);
        }
      }
      result.code = EXIT.ok;
    });
}
