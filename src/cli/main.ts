// CLI entry: commander parses, each command module does its work with an
// injected context and returns an exit code. Usage errors are one line and
// exit 2.

import { Command, CommanderError } from 'commander';
import { createRequire } from 'node:module';
import { isKnowledgeError } from '../core/errors.js';
import { EXIT, EXIT_FOR_CODE } from './exit-codes.js';
import { processContext, type CliContext, type CommandResult } from './context.js';

export { optionParser } from './option-parser.js';

const require = createRequire(import.meta.url);
const { version } = require('../../package.json') as { version: string };

type Register = (program: Command, ctx: CliContext, result: CommandResult) => void;

// Commands are loaded on demand: `knowledgefs read` is called by agents over
// and over and must not pay for loading the control plane or the FUSE binding.
const COMMANDS: Record<string, () => Promise<Register>> = {
  serve: async () => (await import('./commands/serve.js')).registerServe,
  session: async () => (await import('./commands/session.js')).registerSession,
  mount: async () => (await import('./commands/mount.js')).registerMount,
  'mount-helper': async () => (await import('./commands/mount-helper.js')).registerMountHelper,
  read: async () => (await import('./commands/read.js')).registerRead,
  'can-load': async () => (await import('./commands/can-load.js')).registerCanLoad,
  manifest: async () => (await import('./commands/manifest.js')).registerManifest,
  reminder: async () => (await import('./commands/manifest.js')).registerReminder,
  doctor: async () => (await import('./commands/doctor.js')).registerDoctor,
  status: async () => (await import('./commands/status.js')).registerStatus,
  mcp: async () => (await import('./commands/mcp.js')).registerMcp,
  publish: async () => (await import('./commands/publish.js')).registerPublish,
  gc: async () => (await import('./commands/gc.js')).registerGc,
  explain: async () => (await import('./commands/explain.js')).registerExplain,
  audit: async () => (await import('./commands/audit.js')).registerAudit,
};

const TOP_LEVEL_EXAMPLES = `
Examples:
  # control plane over a data directory (account/, teams/<id>/, directory.json)
  knowledgefs serve --data /srv/knowledge --listen 127.0.0.1:7420
  # a session for one agent run; prints {sessionId, token}
  knowledgefs session create --server http://127.0.0.1:7420 --admin-token-file admin.token \\
      --kind personal --creator alice --team payments
  # at runner start: mount knowledge/ for that session
  KNOWLEDGEFS_TOKEN=kfs_... knowledgefs mount /workspace/knowledge --server http://127.0.0.1:7420
  # the same with the daemon unprivileged: root mounts, user kfs serves (no capabilities)
  knowledgefs mount-helper /workspace/knowledge --user kfs -- knowledgefs mount /workspace/knowledge --fuse-fd 3 --server ... --token-file ...
  # from the agent harness
  knowledgefs read knowledge/team_search/DUTY.md
  knowledgefs can-load team_search --for skill          # before offering a team's skill, tool or sub-agent
  knowledgefs manifest --json
  knowledgefs mcp --socket /run/knowledgefs/control.sock     # the same, as an MCP server
  knowledgefs doctor --server http://127.0.0.1:7420 --token-file runner.token
  # why a session sees what it sees (admin)
  knowledgefs explain --server http://127.0.0.1:7420 --admin-token-file admin.token --session s_...
  # what a session got from every replica (serve --audit-log postgres)
  knowledgefs audit --state postgres://kfs@db/kfs --session s_... --since 1h
  # what a publication bucket no longer needs (a dry run; --delete with --state to remove it)
  knowledgefs gc --store s3://knowledge-prod/kfs
  # in the runner: what the mount is doing (operations, cache, sync lag, EIO)
  knowledgefs status

Exit codes: 0 ok, 1 no such file, 2 usage, 3 denied (with guidance), 4 unavailable, 5 other failure.
`;

/** The command named on the command line (also `help <command>`), if it is one of ours. */
function requestedCommand(args: readonly string[]): string | undefined {
  const [first, second] = args;
  if (first === 'help' && second !== undefined && second in COMMANDS) return second;
  return first !== undefined && first in COMMANDS ? first : undefined;
}

/** `knowledgefs --version` alone needs no command module. */
const onlyVersion = (args: readonly string[]): boolean => args.length === 1 && (args[0] === '--version' || args[0] === '-V');

/** `only`: register just that command; `[]`: none (version); absent: all (top-level help). */
export async function buildProgram(
  ctx: CliContext,
  result: CommandResult,
  only?: string | readonly [],
): Promise<Command> {
  const program = new Command('knowledgefs')
    .description('A knowledge/ directory for AI agents that only ever shows what the session may load.')
    .version(version, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
    })
    .addHelpText('after', TOP_LEVEL_EXAMPLES)
    .exitOverride();
  const names = only === undefined ? Object.keys(COMMANDS) : typeof only === 'string' ? [only] : [];
  const registers = await Promise.all(names.map((name) => (COMMANDS[name] as () => Promise<Register>)()));
  for (const register of registers) register(program, ctx, result);
  for (const cmd of program.commands) cmd.exitOverride().configureOutput(program.configureOutput());
  return program;
}

export async function main(argv: readonly string[], ctx: CliContext = processContext()): Promise<number> {
  const result: CommandResult = { code: EXIT.ok };
  const args = argv.slice(2);
  const program = await buildProgram(ctx, result, requestedCommand(args) ?? (onlyVersion(args) ? [] : undefined));
  try {
    await program.parseAsync([...argv]);
    return result.code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version are not errors; commander already printed the message.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (isKnowledgeError(err)) {
      ctx.stderr.write(`knowledgefs: ${err.message}\n`);
      return EXIT_FOR_CODE[err.code];
    }
    throw err;
  }
}
