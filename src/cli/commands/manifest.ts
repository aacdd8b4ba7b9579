import type { Command } from 'commander';
import type { CliContext } from '../context.js';
import type { CommandResult } from '../main.js';

export function registerManifest(program: Command, _ctx: CliContext, _result: CommandResult): void {
  program.command('manifest').description('(not built yet)');
}

export function registerReminder(program: Command, _ctx: CliContext, _result: CommandResult): void {
  program.command('reminder').description('(not built yet)');
}
