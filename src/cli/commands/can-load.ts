// `knowledgefs can-load SCOPE... --for knowledge|skill|tool|agent`: may this
// session use a resource of these scopes? A harness asks before it offers a
// skill, a team's MCP tool or a sub-agent to the model. It goes over the mount
// daemon's control socket like `read`, so it needs no token, and the control
// plane decides with the same CanLoadScope, audited with what it was for.
//
// Output: one line per allowed scope on stdout, one `knowledgefs: …` line per
// refusal on stderr (a personal session's refusal reads exactly like a scope
// that does not exist); with --json, one object per scope on stdout.

import type { Command } from 'commander';
import { RESOURCE_KINDS, type CanLoadAnswer, type ResourceKind } from '../../client/knowledge-client.js';
import { KnowledgeError } from '../../core/errors.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT, EXIT_FOR_CODE } from '../exit-codes.js';
import { DAEMON_USER_OPTION, callDaemon, type SocketCommandOptions } from './socket-command.js';

interface CanLoadFlags extends SocketCommandOptions {
  for?: string;
}

/** Several refusals: the exit code of the gravest (fail closed, then denied, then not found). */
export function exitCodeOf(answers: readonly CanLoadAnswer[]): number {
  let code: number = EXIT.ok;
  for (const a of answers) if (!a.allowed) code = Math.max(code, EXIT_FOR_CODE[a.error.code]);
  return code;
}

export function registerCanLoad(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('can-load')
    .description('Ask whether this session may use a resource of these scopes (a skill, an MCP tool, a sub-agent, knowledge); decided and audited by the control plane.')
    .argument('<scope...>', 'scopes as on the mount: account, team_<id>')
    .option('--for <kind>', `what the resource is: ${RESOURCE_KINDS.join(', ')} (recorded in the audit log)`)
    .option('--socket <path>', 'the mount daemon\'s control socket (default: $KNOWLEDGEFS_SOCKET or the standard path)')
    .option(...DAEMON_USER_OPTION)
    .option('--json', 'print one {"scope", "allowed", "error"?} object per scope, a line each; or {"ok": false, "error"} when nothing was decided')
    .addHelpText(
      'after',
      `
Exit codes: 0 every scope allowed; 1 a scope that does not exist (also one a
personal session may not use); 2 usage; 3 denied, with what to do (a team session
asking for another team); 4 unavailable (the membership source or the control
plane is down: refused, fail closed). With several refusals, the gravest: 4, then 3, then 1.

Examples:
  knowledgefs can-load team_payments --for skill
  knowledgefs can-load account team_search team_storage --for tool --json`,
    )
    .action(async (scopes: string[], flags: CanLoadFlags) => {
      if (flags.for === undefined || !(RESOURCE_KINDS as readonly string[]).includes(flags.for)) {
        throw new KnowledgeError('invalid_argument', `--for must be one of ${RESOURCE_KINDS.join(', ')}${flags.for === undefined ? '' : `, not "${flags.for}"`}`);
      }
      const kind = flags.for as ResourceKind;
      const res = await callDaemon(ctx, result, flags, (client) => client.canLoad(scopes, { for: kind }));
      if (res === undefined) return;
      for (const answer of res.answers) {
        if (flags.json) ctx.stdout.write(`${JSON.stringify(answer)}\n`);
        else if (answer.allowed) ctx.stdout.write(`${answer.scope}: allowed\n`);
        else ctx.stderr.write(`knowledgefs: ${answer.error.message}\n`);
      }
      result.code = exitCodeOf(res.answers);
    });
}
