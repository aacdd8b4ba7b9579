// `knowledgefs mcp`: the read tool, the manifest and the reminder as a stdio
// MCP server for agent harnesses (src/mcp/). The harness starts it with a
// cleared environment, so the socket is best given with --socket. It talks to
// the mount daemon's control socket like `knowledgefs read` does, and stays up
// when the daemon is not there yet (tools then answer "temporary").

import { createRequire } from 'node:module';
import { Option, type Command } from 'commander';
import { KnowledgeClient } from '../../client/knowledge-client.js';
import { controlSocketPath } from '../../client/socket-path.js';
import { guidanceText } from '../../mcp/guidance.js';
import { createKnowledgeMcpServer, type ReminderMode } from '../../mcp/knowledge-mcp-server.js';
import { serveOverStdio } from '../../mcp/serve-stdio.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';

interface McpOptions {
  socket?: string;
  reminder: ReminderMode;
  instructions: 'guidance' | 'manifest';
  fsTools?: boolean;
}

const require = createRequire(import.meta.url);
const { version } = require('../../../package.json') as { version: string };

export function registerMcp(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('mcp')
    .description('Serve the read tool, the manifest and the reminder to an agent harness over MCP (stdio).')
    .option('--socket <path>', 'the mount daemon\'s control socket (default: $KNOWLEDGEFS_SOCKET or the standard path; MCP clients usually clear the environment, so give it here)')
    .addOption(new Option('--reminder <mode>', 'tool-result: append the reminder to tool results when files read earlier changed or were removed; off: never').choices(['tool-result', 'off']).default('tool-result'))
    .addOption(new Option('--instructions <what>', 'the server instructions sent when a client connects: guidance (short, fixed) or manifest (the session\'s manifest, read at start)').choices(['guidance', 'manifest']).default('guidance'))
    .option('--fs-tools', 'also serve list_knowledge and search_knowledge, which walk the local mount like ls and grep (for hosts without a shell)')
    .addHelpText(
      'after',
      `
Serves tool read_knowledge {path, offset?, limit?}, resource knowledgefs://manifest
and prompt knowledge_manifest. stdout carries JSON-RPC only; logs go to stderr.
Exits 0 when stdin closes.

Examples:
  knowledgefs mcp --socket /run/knowledgefs/control.sock
  knowledgefs mcp --socket /run/knowledgefs/control.sock --fs-tools --instructions manifest`,
    )
    .action(async (opts: McpOptions) => {
      const log = (line: string) => { ctx.stderr.write(`knowledgefs mcp: ${line}\n`); };
      const client = new KnowledgeClient({ socketPath: controlSocketPath(opts.socket, ctx.env), cwd: ctx.cwd });
      const fsTools = opts.fsTools === true;
      let instructions = guidanceText(fsTools);
      if (opts.instructions === 'manifest') {
        try {
          instructions = (await client.manifest()).text;
        } catch (err) {
          log(`--instructions manifest: ${err instanceof Error ? err.message : String(err)}; sending the guidance instead`);
        }
      }
      const server = createKnowledgeMcpServer(client, { reminder: opts.reminder, fsTools, instructions, cwd: ctx.cwd, version, log });
      log(`serving on stdio for the mount daemon at ${client.socketPath}`);
      const why = await serveOverStdio(server, { stdin: ctx.stdin ?? process.stdin, stdout: ctx.stdout }, ctx.stopSignal(), log);
      client.close();
      log(`${why}, stopped`);
      // The client going away (or a stop signal) is the normal end; a transport that gave up is not.
      result.code = why === 'connection lost' ? EXIT.failure : EXIT.ok;
    });
}
