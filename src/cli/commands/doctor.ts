// `knowledgefs doctor`: the first thing to run when a mount won't come up.
// Checks the machine (/dev/fuse, libfuse, fusermount, permissions), then,
// when given a server, the control plane and the runner token, then the mount
// daemon's control socket and (optionally) a mount point. Prints one line per
// check — `ok`, `FAIL`, `note` or `skip`, what was found, and for problems the
// fix — and exits 0 when nothing FAILed, 1 otherwise. `--json` prints the same
// results as one object. The token is read here and sent as a header only; it
// is never printed.

import { Option, type Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { DaemonUnreachableError } from '../../client/errors.js';
import { KnowledgeClient } from '../../client/knowledge-client.js';
import { isKnowledgeError } from '../../core/errors.js';
import { controlSocketPath } from '../../client/socket-path.js';
import { parseDuration } from '../../core/text/units.js';
import type { CliContext, CommandResult } from '../context.js';
import { optionParser } from '../option-parser.js';
import {
  checkDevFuse,
  checkFusermount,
  checkFuseNative,
  checkLibfuse,
  checkMountpoint,
  checkPermissions,
  checkServer,
  systemProbes,
  type CheckResult,
  type Probes,
} from './doctor-checks.js';

export const DOCTOR_FAILED = 1;

export interface DoctorOptions {
  readonly server?: string | undefined;
  readonly tokenFile?: string | undefined;
  readonly socket?: string | undefined;
  readonly mountpoint?: string | undefined;
  readonly timeoutMs?: number | undefined;
}

async function readToken(o: DoctorOptions, env: NodeJS.ProcessEnv): Promise<{ token?: string; source?: string; error?: string }> {
  if (o.tokenFile !== undefined) {
    const source = `--token-file ${o.tokenFile}`;
    try {
      const token = (await readFile(o.tokenFile, 'utf8')).trim();
      return token === '' ? { source, error: `${o.tokenFile} is empty` } : { token, source };
    } catch (err) {
      return { source, error: `cannot read ${o.tokenFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}` };
    }
  }
  const fromEnv = env.KNOWLEDGEFS_TOKEN?.trim();
  return fromEnv ? { token: fromEnv, source: 'KNOWLEDGEFS_TOKEN' } : {};
}

async function checkDaemon(socketPath: string, timeoutMs: number): Promise<CheckResult> {
  const name = 'mount daemon';
  const client = new KnowledgeClient({ socketPath, timeoutMs });
  try {
    const s = await client.status();
    const prefetch = s.prefetch.total > 0 ? `, prefetched ${s.prefetch.done}/${s.prefetch.total}` : '';
    return { name, status: 'ok', detail: `${socketPath}: ${s.mountpoint} mounted, ${s.files} files in ${s.scopes.join(', ')}${prefetch}` };
  } catch (err) {
    const message = isKnowledgeError(err) ? err.message : String(err);
    if (err instanceof DaemonUnreachableError && err.reason === 'no_daemon') {
      return { name, status: 'skip', detail: `no daemon on ${socketPath} (expected before \`knowledgefs mount\`; elsewhere set --socket or KNOWLEDGEFS_SOCKET)` };
    }
    return { name, status: 'FAIL', detail: message, fix: 'run doctor as the user that started `knowledgefs mount`, or restart the daemon' };
  } finally {
    client.close();
  }
}

/** Every check, in order. `probes` defaults to this machine. */
export async function runDoctor(o: DoctorOptions, env: NodeJS.ProcessEnv, probes: Probes = systemProbes(env)): Promise<CheckResult[]> {
  const timeoutMs = o.timeoutMs ?? 5_000;
  const token = await readToken(o, env);
  const server = o.server ?? (env.KNOWLEDGEFS_SERVER?.trim() || undefined);
  const results: CheckResult[] = [
    await checkDevFuse(probes),
    await checkLibfuse(probes),
    await checkFuseNative(probes),
    await checkFusermount(probes),
    await checkPermissions(probes),
    ...(await checkServer({ server, token: token.token, tokenSource: token.source, tokenError: token.error, timeoutMs })),
  ];
  // An empty --socket is checked as given (and fails), as `mount` refuses it.
  const socketPath = o.socket === '' ? '' : controlSocketPath(o.socket, env);
  results.push(await checkDaemon(socketPath, timeoutMs));
  if (o.mountpoint !== undefined) results.push(await checkMountpoint(resolve(o.mountpoint), timeoutMs));
  return results;
}

export function formatChecks(results: readonly CheckResult[]): string {
  const width = Math.max(...results.map((r) => r.name.length));
  const lines = results.map((r) => {
    const fix = r.fix !== undefined && r.status !== 'ok' && r.status !== 'skip' ? ` — fix: ${r.fix}` : '';
    return `${r.status.padEnd(4)}  ${r.name.padEnd(width)}  ${r.detail}${fix}`;
  });
  const failed = results.filter((r) => r.status === 'FAIL').length;
  lines.push(failed === 0 ? 'all checks passed' : `${failed} check${failed === 1 ? '' : 's'} failed`);
  return `${lines.join('\n')}\n`;
}

interface DoctorFlags {
  server?: string;
  tokenFile?: string;
  socket?: string;
  mountpoint?: string;
  timeout: number;
  json?: boolean;
}

export function registerDoctor(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('doctor')
    .description('Check that this machine can mount knowledge/ and reach its control plane; print what to fix.')
    .option('--server <url>', 'control plane URL to check (default: $KNOWLEDGEFS_SERVER)')
    .option('--token-file <file>', 'runner token to check against the control plane (default: $KNOWLEDGEFS_TOKEN)')
    .option('--socket <path>', "the mount daemon's control socket (default: $KNOWLEDGEFS_SOCKET or the standard path)")
    .option('--mountpoint <dir>', 'also check this mount point (mounted, not mounted, or stale)')
    .addOption(new Option('--timeout <duration>', 'bound on each network check').argParser(optionParser(parseDuration)).default(5_000, '5s'))
    .option('--json', 'print {"ok", "checks": [{name, status, detail, fix?}]}')
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs doctor
  knowledgefs doctor --server http://127.0.0.1:7070 --token-file /run/secrets/kfs-token
  knowledgefs doctor --mountpoint /workspace/knowledge --json

Exit status: 0 when no check FAILed (notes and skips are fine), 1 otherwise.`,
    )
    .action(async (flags: DoctorFlags) => {
      const results = await runDoctor(
        {
          server: flags.server,
          tokenFile: flags.tokenFile === undefined ? undefined : resolve(ctx.cwd, flags.tokenFile),
          socket: flags.socket,
          mountpoint: flags.mountpoint === undefined ? undefined : resolve(ctx.cwd, flags.mountpoint),
          timeoutMs: flags.timeout,
        },
        ctx.env,
      );
      const ok = results.every((r) => r.status !== 'FAIL');
      if (flags.json) ctx.stdout.write(`${JSON.stringify({ ok, checks: results })}\n`);
      else ctx.stdout.write(formatChecks(results));
      result.code = ok ? 0 : DOCTOR_FAILED;
    });
}
