// `knowledgefs mcp`: the read tool, the manifest and the reminder as a stdio
// MCP server for agent harnesses (src/mcp/). The harness starts it with a
// cleared environment, so the socket is best given with --socket. It talks to
// the mount daemon's control socket like `knowledgefs read` does, and stays up
// when the daemon is not there yet (tools then answer "temporary").
// It speaks MCP 2026-07-28 and, to clients that open with `initialize`,
// 2025-11-25 and older.

import { createRequire } from 'node:module';
import { Option, type Command } from 'commander';
import { DAEMON_USER_ENV } from '../../client/daemon-user.js';
import { DAEMON_USER_OPTION } from './socket-command.js';
import { KnowledgeClient } from '../../client/knowledge-client.js';
import { controlSocketPath } from '../../client/socket-path.js';
import { KnowledgeError } from '../../core/errors.js';
import { formatDurationFlag, parseDuration } from '../../core/text/units.js';
import { guidanceText } from '../../mcp/guidance.js';
import { createKnowledgeMcpServer, type ReminderMode } from '../../mcp/knowledge-mcp-server.js';
import { manifestListenTracker } from '../../mcp/listen-tracker.js';
import { ManifestWatch } from '../../mcp/manifest-watch.js';
import { serveOverStdio } from '../../mcp/serve-stdio.js';
import { parsedOption } from '../option-parser.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';

interface McpOptions {
  socket?: string;
  daemonUser?: string;
  reminder: ReminderMode;
  instructions: 'guidance' | 'manifest';
  fsTools?: boolean;
  manifestPoll: number;
}

const DEFAULT_MANIFEST_POLL_MS = 2_000;

/** A poll interval of at least 100 ms: the daemon asks the control plane each time. */
function parsePollInterval(text: string): number {
  const ms = parseDuration(text);
  if (ms < 100) throw new KnowledgeError('invalid_argument', `--manifest-poll must be at least 100ms, not "${text}"`);
  return ms;
}

const require = createRequire(import.meta.url);
const { version } = require('../../../package.json') as { version: string };

export function registerMcp(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('mcp')
    .description('Serve the read tool, the manifest and the reminder to an agent harness over MCP (stdio).')
    .option('--socket <path>', 'the mount daemon\'s control socket (default: $KNOWLEDGEFS_SOCKET or the standard path; MCP clients usually clear the environment, so give it here)')
    .option(...DAEMON_USER_OPTION)
    .addOption(new Option('--reminder <mode>', 'tool-result: append the reminder to tool results when files read earlier changed or were removed; off: never').choices(['tool-result', 'off']).default('tool-result'))
    .addOption(new Option('--instructions <what>', 'the server instructions sent when a client connects: guidance (short, fixed) or manifest (the session\'s manifest, read at start)').choices(['guidance', 'manifest']).default('guidance'))
    .option('--fs-tools', 'also serve list_knowledge and search_knowledge, which walk the local mount like ls and grep (for hosts without a shell)')
    .addOption(parsedOption('--manifest-poll <duration>', 'while a client subscribes to knowledgefs://manifest, how often to ask the daemon whether it changed (also right after a read mounts a team)', parsePollInterval, DEFAULT_MANIFEST_POLL_MS, formatDurationFlag(DEFAULT_MANIFEST_POLL_MS)))
    .addHelpText(
      'after',
      `
Serves tool read_knowledge {path, offset?, limit?}, resource knowledgefs://manifest
and prompt knowledge_manifest. A client subscribed to the manifest is told when it
changes. Speaks MCP 2026-07-28, and 2025-11-25 and older to clients that ask.
stdout carries JSON-RPC only; logs go to stderr. Exits 0 when stdin closes.

Examples:
  knowledgefs mcp --socket /run/knowledgefs/control.sock
  knowledgefs mcp --socket /run/knowledgefs/control.sock --fs-tools --instructions manifest`,
    )
    .action(async (opts: McpOptions) => {
      const log = (line: string) => { ctx.stderr.write(`knowledgefs mcp: ${line}\n`); };
      const client = new KnowledgeClient({ socketPath: controlSocketPath(opts.socket, ctx.env), cwd: ctx.cwd, daemonUser: opts.daemonUser ?? ctx.env[DAEMON_USER_ENV] });
      const fsTools = opts.fsTools === true;
      let instructions = guidanceText(fsTools);
      if (opts.instructions === 'manifest') {
        try {
          instructions = (await client.manifest()).text;
        } catch (err) {
          log(`--instructions manifest: ${err instanceof Error ? err.message : String(err)}; sending the guidance instead`);
        }
      }
      const watch = new ManifestWatch({ sha256: async () => (await client.manifest()).sha256, intervalMs: opts.manifestPoll, log });
      const serverOptions = { reminder: opts.reminder, fsTools, instructions, cwd: ctx.cwd, version, log, watch };
      log(`serving on stdio for the mount daemon at ${client.socketPath}`);
      const why = await serveOverStdio(
        (era) => createKnowledgeMcpServer(client, serverOptions, era),
        { stdin: ctx.stdin ?? process.stdin, stdout: ctx.stdout },
        ctx.stopSignal(),
        { log, observe: manifestListenTracker(watch) },
      );
      watch.close();
      client.close();
      log(`${why}, stopped`);
      // The client going away (or a stop signal) is the normal end; a transport that gave up is not.
      result.code = why === 'connection lost' ? EXIT.failure : EXIT.ok;
    });
}
