// Where `serve` and `mount` write their log lines: stderr, or `--log-file`
// (appended, mode 0600), in `--log-format` text or json (core/text/log-line.ts).
//
// The file is written synchronously, line by line, so lines never interleave
// and a crash loses none. `reopen()` (on SIGHUP) closes it and opens the path
// again, so a rename-based rotation (logrotate without copytruncate) moves
// on to the new file at once. Failing to write never stops the process: the
// problem goes to stderr, once.

import type { Command } from 'commander';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { KnowledgeError } from '../core/errors.js';
import { formatLogLine, parseLogFormat, type Log, type LogFields, type LogFormat } from '../core/text/log-line.js';
import type { CliContext } from './context.js';
import { parsedOption } from './option-parser.js';

export interface LogSinkOptions {
  readonly format: LogFormat;
  /** `serve`, `mount`: the `component` of every JSON line. */
  readonly component: string;
  /** Absolute path; absent = stderr. */
  readonly file?: string | undefined;
  readonly stderr: NodeJS.WritableStream;
}

export class LogSink {
  private fd: number | null = null;
  private failed = false;

  constructor(private readonly opts: LogSinkOptions) {
    if (opts.file !== undefined) this.fd = this.open(opts.file);
  }

  /** The `Log` the parts are given. */
  readonly log = (message: string, fields?: LogFields): void => {
    const line = formatLogLine(this.opts.format, new Date(), this.opts.component, message, fields);
    if (this.fd === null) {
      this.opts.stderr.write(line);
      return;
    }
    try {
      writeSync(this.fd, line);
    } catch (err) {
      this.complain(`cannot write to --log-file ${this.opts.file}: ${err instanceof Error ? err.message : String(err)}`);
      this.opts.stderr.write(line);
    }
  };

  /** Opens the log file again (after it was renamed by rotation). */
  reopen(): void {
    if (this.opts.file === undefined) return;
    try {
      const fd = this.open(this.opts.file);
      if (this.fd !== null) closeSync(this.fd);
      this.fd = fd;
      this.failed = false;
    } catch (err) {
      this.complain(err instanceof Error ? err.message : String(err));
    }
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private open(file: string): number {
    try {
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
      return openSync(file, 'a', 0o600);
    } catch (err) {
      throw new KnowledgeError('config', `cannot open --log-file ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private complain(message: string): void {
    if (this.failed) return;
    this.failed = true;
    this.opts.stderr.write(`${message}\n`);
  }
}

/** `--log-format` and `--log-file`, shared by `serve` and `mount`. */
export function addLogOptions(command: Command): Command {
  return command
    .addOption(parsedOption('--log-format <text|json>', 'log lines as plain text, or one JSON object a line (time, level, component, message, fields)', parseLogFormat, 'text', 'text'))
    .option('--log-file <file>', 'append log lines to this file (mode 0600) instead of stderr; reopened on SIGHUP for rotation');
}

/** Opens the chosen log destination and reopens it on every SIGHUP until `close`. */
export function startLogging(flags: { logFormat: LogFormat; logFile?: string }, component: string, ctx: CliContext): { log: Log; close(): void } {
  const sink = new LogSink({ format: flags.logFormat, component, file: flags.logFile === undefined ? undefined : resolve(ctx.cwd, flags.logFile), stderr: ctx.stderr });
  const stopHangup = ctx.onSignal?.('SIGHUP', () => {
    sink.reopen();
    sink.log('SIGHUP: log file reopened');
  });
  return {
    log: sink.log,
    close() {
      stopHangup?.();
      sink.close();
    },
  };
}
