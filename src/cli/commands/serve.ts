import type { Command } from 'commander';
import type { CliContext } from '../context.js';
import type { CommandResult } from '../main.js';

export function registerServe(program: Command, _ctx: CliContext, _result: CommandResult): void {
  program.command('serve').description('(not built yet)');
}
