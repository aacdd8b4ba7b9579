// `knowledgefs session create`: asks the control plane for a runner session
// and prints the CreateSessionResponse JSON (token included: hand it to the
// runner's mount, never to the agent). A 400 prints the server's message on
// one line and exits 2; an unreachable server exits 4.

import type { Command } from 'commander';
import { resolve } from 'node:path';
import { request } from 'undici';
import { KnowledgeError, isErrorCode } from '../../core/errors.js';
import type { CreateSessionRequest, CreateSessionResponse } from '../../core/wire.js';
import type { CliContext } from '../context.js';
import { EXIT, EXIT_FOR_CODE } from '../exit-codes.js';
import type { CommandResult } from '../main.js';
import { ADMIN_TOKEN_ENV, readTokenFile } from '../token-file.js';

interface CreateFlags {
  server: string;
  adminTokenFile?: string;
  kind: string;
  creator: string;
  team?: string;
  json?: boolean;
}

export async function createSession(server: string, adminToken: string, body: CreateSessionRequest): Promise<CreateSessionResponse> {
  const url = `${server.replace(/\/+$/, '')}/v1/admin/sessions`;
  let res;
  try {
    res = await request(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new KnowledgeError('unavailable', `cannot reach the control plane at ${server}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new KnowledgeError('unavailable', `the control plane at ${server} answered HTTP ${res.statusCode} with a body that is not JSON`);
  }
  if (res.statusCode === 201) return parsed as CreateSessionResponse;
  const error = (parsed as { error?: { code?: unknown; message?: unknown } }).error;
  const code = isErrorCode(error?.code) ? error.code : 'unavailable';
  const message = typeof error?.message === 'string' ? error.message : `HTTP ${res.statusCode}`;
  throw new KnowledgeError(code, message);
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
      let token: string;
      if (flags.adminTokenFile !== undefined) token = await readTokenFile(resolve(ctx.cwd, flags.adminTokenFile), '--admin-token-file');
      else if (ctx.env[ADMIN_TOKEN_ENV]?.trim()) token = (ctx.env[ADMIN_TOKEN_ENV] as string).trim();
      else throw new KnowledgeError('invalid_argument', `an admin token is needed: --admin-token-file FILE or $${ADMIN_TOKEN_ENV}`);
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
