// CLI entry: commander parses, each command module does its work with an
// injected context and returns an exit code. Usage errors are one line and
// exit 2.

import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { createRequire } from 'node:module';
import { isKnowledgeError } from '../core/errors.js';
import { EXIT, EXIT_FOR_CODE } from './exit-codes.js';
import { processContext, type CliContext } from './context.js';
import { registerServe } from './commands/serve.js';
import { registerSession } from './commands/session.js';
import { registerMount } from './commands/mount.js';
import { registerRead } from './commands/read.js';
import { registerManifest, registerReminder } from './commands/manifest.js';
import { registerDoctor } from './commands/doctor.js';

const require = createRequire(import.meta.url);
const { version } = require('../../package.json') as { version: string };

/** Each command's action stores its exit code here. */
export interface CommandResult {
  code: number;
}

export function buildProgram(ctx: CliContext, result: CommandResult): Command {
  const program = new Command('knowledgefs')
    .description('A knowledge/ directory for AI agents that only ever shows what the session may load.')
    .version(version, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
    })
    .exitOverride();
  registerServe(program, ctx, result);
  registerSession(program, ctx, result);
  registerMount(program, ctx, result);
  registerRead(program, ctx, result);
  registerManifest(program, ctx, result);
  registerReminder(program, ctx, result);
  registerDoctor(program, ctx, result);
  for (const cmd of program.commands) cmd.exitOverride().configureOutput(program.configureOutput());
  return program;
}

/** Wraps a commander option parser so a bad value is a one-line usage error. */
export function optionParser<T>(parse: (text: string) => T): (text: string) => T {
  return (text) => {
    try {
      return parse(text);
    } catch (err) {
      throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
    }
  };
}

export async function main(argv: readonly string[], ctx: CliContext = processContext()): Promise<number> {
  const result: CommandResult = { code: EXIT.ok };
  const program = buildProgram(ctx, result);
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
