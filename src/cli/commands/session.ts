// `knowledgefs session create`: asks the control plane for a runner session
// and prints the CreateSessionResponse JSON (token included: hand it to the
// runner's mount, never to the agent). A 400 prints the server's message on
// one line and exits 2; an unreachable server exits 4.

import type { Command } from 'commander';
import { KnowledgeError } from '../../core/errors.js';
import { userNameError } from '../../core/user-name.js';
import type { CreateSessionRequest, CreateSessionResponse } from '../../core/wire.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT, EXIT_FOR_CODE } from '../exit-codes.js';
import { adminRequest, adminToken } from '../admin-request.js';
import { ADMIN_TOKEN_ENV } from '../token-file.js';

interface CreateFlags {
  server: string;
  adminTokenFile?: string;
  kind: string;
  creator: string;
  team?: string;
  json?: boolean;
}

export function createSession(server: string, token: string, body: CreateSessionRequest): Promise<CreateSessionResponse> {
  return adminRequest<CreateSessionResponse>(server, token, 'POST', '/v1/admin/sessions', 201, body);
}

export function registerSession(program: Command, ctx: CliContext, result: CommandResult): void {
  const session = program.command('session').description('Manage runner sessions on a control plane.');
  session
    .command('create')
    .description('Create a session and print {sessionId, token, kind, creator, team} as JSON.')
    .requiredOption('--server <url>', 'control plane URL, e.g. http://127.0.0.1:7420')
    .option('--admin-token-file <file>', `file holding the admin token (else $${ADMIN_TOKEN_ENV})`)
    .requiredOption('--kind <kind>', 'team | personal')
    .requiredOption('--creator <user>', 'the user creating the session (personal sessions load their teams)')
    .option('--team <id>', 'the team the session is bound to (required for team sessions)')
    .option('--json', 'print the JSON on one line')
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs session create --server http://127.0.0.1:7420 --admin-token-file data/.knowledgefs/admin-token \\
      --kind team --creator alice --team payments
  knowledgefs session create --server http://127.0.0.1:7420 --kind personal --creator alice --json`,
    )
    .action(async (flags: CreateFlags) => {
      if (flags.kind !== 'team' && flags.kind !== 'personal') {
        throw new KnowledgeError('invalid_argument', `--kind must be "team" or "personal", got "${flags.kind}"`);
      }
      if (flags.kind === 'team' && flags.team === undefined) throw new KnowledgeError('invalid_argument', 'a team session needs --team ID');
      const creatorError = userNameError('--creator', flags.creator);
      if (creatorError !== undefined) throw new KnowledgeError('invalid_argument', creatorError);
      const token = await adminToken(flags.adminTokenFile, ctx);
      try {
        const created = await createSession(flags.server, token, {
          kind: flags.kind,
          creator: flags.creator,
          ...(flags.team !== undefined ? { team: flags.team } : {}),
        });
        ctx.stdout.write(flags.json ? `${JSON.stringify(created)}\n` : `${JSON.stringify(created, null, 2)}\n`);
        result.code = EXIT.ok;
      } catch (err) {
        if (err instanceof KnowledgeError) {
          ctx.stderr.write(`knowledgefs: ${err.message.replace(/\s*\n\s*/g, ' ')}\n`);
          result.code = EXIT_FOR_CODE[err.code];
          return;
        }
        throw err;
      }
    });
}
