// `knowledgefs serve`: the embedded control plane in the foreground.
// Prints exactly one stdout line when ready, `listening on http://HOST:PORT`;
// logs go to stderr. SIGINT/SIGTERM close cleanly and exit 0.
//
// Admin token: --admin-token-file, else $KNOWLEDGEFS_ADMIN_TOKEN, else the
// file DATA/.knowledgefs/admin-token (created with a fresh random token, mode
// 0600, on first start; reused after), whose path is printed on stderr.
//
// Session state: --state FILE (default DATA/.knowledgefs/state.json), or
// PostgreSQL for replicas: --state postgres://USER@HOST/DB, or the whole URL
// in $KNOWLEDGEFS_STATE_URL. A password is refused on the command line (any
// local user can read argv); it goes in the variable, $PGPASSWORD or
// ~/.pgpass. Logs show the URL without its password.

import type { Command } from 'commander';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import { parseListenAddress } from '../../core/listen-address.js';
import { parseDuration, parseSize, formatDurationFlag, formatSizeFlag } from '../../core/units.js';
import { serveControlPlane } from '../../server/control-plane.js';
import { DEFAULTS, internalDir, isStateUrl } from '../../server/options.js';
import type { CliContext } from '../context.js';
import { EXIT } from '../exit-codes.js';
import type { CommandResult } from '../main.js';
import { parseOnOff, parsedOption } from '../option-parser.js';
import { ADMIN_TOKEN_ENV, readTokenFile } from '../token-file.js';
import { parseCount } from './socket-command.js';

interface ServeFlags {
  data: string;
  listen: string;
  state?: string;
  stateHeartbeat: number;
  adminTokenFile?: string;
  membershipUrl?: string;
  membershipTimeout: number;
  membershipRecheck: number;
  maxLongPolls: number;
  auditLog?: string;
  watch: boolean;
  watchScanInterval: number;
  scanInterval: number;
  maxFileSize: number;
  metricsListen?: string;
}

async function resolveAdminToken(flags: ServeFlags, dataDir: string, ctx: CliContext): Promise<string> {
  if (flags.adminTokenFile !== undefined) return readTokenFile(resolve(ctx.cwd, flags.adminTokenFile), '--admin-token-file');
  const fromEnv = ctx.env[ADMIN_TOKEN_ENV];
  if (fromEnv !== undefined && fromEnv.trim() !== '') return fromEnv.trim();
  const file = join(internalDir(dataDir), 'admin-token');
  let token: string;
  try {
    token = (await readFile(file, 'utf8')).trim();
  } catch {
    token = '';
  }
  if (token === '') {
    token = `kfsadmin_${randomBytes(32).toString('base64url')}`;
    await mkdir(internalDir(dataDir), { recursive: true, mode: 0o700 });
    await writeFile(file, `${token}\n`, { mode: 0o600 });
  }
  ctx.stderr.write(`admin token: ${file}\n`);
  return token;
}

export const STATE_URL_ENV = 'KNOWLEDGEFS_STATE_URL';

/** Where session state lives: a file path or a PostgreSQL URL (flag first, then the environment). */
function resolveState(flags: ServeFlags, ctx: CliContext): { stateFile?: string; stateUrl?: string } {
  if (flags.state !== undefined && isStateUrl(flags.state)) {
    let password = '';
    try {
      password = new URL(flags.state).password;
    } catch {
      throw new KnowledgeError('invalid_argument', '--state: not a valid URL (expected postgres://USER@HOST:PORT/DATABASE)');
    }
    if (password !== '') {
      throw new KnowledgeError(
        'invalid_argument',
        `--state: the URL carries a password, which every local user can read on the command line; put the whole URL in $${STATE_URL_ENV}, or the password in $PGPASSWORD or ~/.pgpass`,
      );
    }
    return { stateUrl: flags.state };
  }
  if (flags.state !== undefined) return { stateFile: resolve(ctx.cwd, flags.state) };
  const fromEnv = ctx.env[STATE_URL_ENV]?.trim();
  if (fromEnv === undefined || fromEnv === '') return {};
  if (!isStateUrl(fromEnv)) throw new KnowledgeError('invalid_argument', `$${STATE_URL_ENV} must be a postgres:// URL`);
  return { stateUrl: fromEnv };
}

export function registerServe(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('serve')
    .description('Run the embedded control plane: packs, sessions, CanLoadScope, plans, files, manifest, reminder.')
    .requiredOption('--data <dir>', 'data directory: directory.json, account/, teams/<id>/')
    .option('--listen <host:port>', 'address to listen on (port 0 picks a free port)', '127.0.0.1:7420')
    .option('--state <file|url>', `session state: a file (default DATA/.knowledgefs/state.json), or postgres://USER@HOST:PORT/DB to share it between replicas (else $${STATE_URL_ENV}; no password here: use $${STATE_URL_ENV}, $PGPASSWORD or ~/.pgpass)`)
    .addOption(parsedOption('--state-heartbeat <duration>', 'with PostgreSQL state: heartbeat of the notification connection; a revoked session is refused by every replica within twice this', parseDuration, DEFAULTS.stateHeartbeatMs, formatDurationFlag(DEFAULTS.stateHeartbeatMs)))
    .option('--admin-token-file <file>', `admin token file (else $${ADMIN_TOKEN_ENV}, else generated into DATA/.knowledgefs/admin-token)`)
    .option('--membership-url <url>', 'external membership service: GET <url>/users/<user>/teams (default: directory.json)')
    .addOption(parsedOption('--membership-timeout <duration>', 'timeout of one membership request', parseDuration, DEFAULTS.membershipTimeoutMs, formatDurationFlag(DEFAULTS.membershipTimeoutMs)))
    .addOption(parsedOption('--membership-recheck <duration>', 'how often a waiting plan long-poll asks the membership service again (other changes wake it at once); a revoked membership reaches a waiting plan within this', parseDuration, DEFAULTS.membershipRecheckMs, formatDurationFlag(DEFAULTS.membershipRecheckMs)))
    .addOption(parsedOption('--max-long-polls <n>', 'plan long-polls one session may hold at once; more are answered 429', (t) => parseCount(t, 1, 1000), DEFAULTS.maxLongPollsPerSession, String(DEFAULTS.maxLongPollsPerSession)))
    .option('--audit-log <file>', 'audit log, one JSON line per decision (default DATA/.knowledgefs/audit.log)')
    .addOption(parsedOption('--watch <on|off>', 'watch the data directory with inotify and rescan a changed directory within ~50ms (off: for filesystems without inotify, e.g. NFS)', parseOnOff, true, 'on'))
    .addOption(parsedOption('--watch-scan-interval <duration>', 'pause between full rescans while the watch works (a safety net for lost events)', parseDuration, DEFAULTS.watchScanIntervalMs, formatDurationFlag(DEFAULTS.watchScanIntervalMs)))
    .addOption(parsedOption('--scan-interval <duration>', "pause between full rescans with --watch off or a failed watch (at least twice the last scan's duration)", parseDuration, DEFAULTS.scanIntervalMs, formatDurationFlag(DEFAULTS.scanIntervalMs)))
    .option('--metrics-listen <host:port>', 'also serve GET /metrics without a token on this address (default: only GET /metrics on --listen, with the admin token)')
    .addOption(parsedOption('--max-file-size <size>', 'files larger than this are skipped with a log line', parseSize, DEFAULTS.maxFileSize, formatSizeFlag(DEFAULTS.maxFileSize)))
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs serve --data ./examples/knowledge-base
  knowledgefs serve --data /srv/knowledge --listen 0.0.0.0:7420 --admin-token-file /run/secrets/kfs-admin
  knowledgefs serve --data /srv/knowledge --membership-url http://people.internal:8080 --membership-timeout 1s
  knowledgefs serve --data /srv/knowledge --metrics-listen 127.0.0.1:9464   # Prometheus scrapes here, no token
  KNOWLEDGEFS_STATE_URL=postgres://kfs:secret@db.internal/knowledgefs knowledgefs serve --data /srv/knowledge --listen 0.0.0.0:7420`,
    )
    .action(async (flags: ServeFlags) => {
      // Listen for SIGINT/SIGTERM from the start, so a signal during start-up still ends in a clean stop.
      const stopping = ctx.stopSignal();
      const dataDir = resolve(ctx.cwd, flags.data);
      const { host, port } = parseListenAddress(flags.listen);
      const metricsListen = flags.metricsListen === undefined ? undefined : parseListenAddress(flags.metricsListen, '--metrics-listen');
      const state = resolveState(flags, ctx);
      // A mistyped --data must not get a generated admin token (and directories) created under it.
      if (!(await stat(dataDir).then((s) => s.isDirectory(), () => false))) {
        throw new KnowledgeError('config', `--data ${dataDir}: not a directory (it needs directory.json, account/ and teams/<id>/)`);
      }
      const adminToken = await resolveAdminToken(flags, dataDir, ctx);
      const log = (line: string) => ctx.stderr.write(`${line}\n`);
      const cp = await serveControlPlane({
        dataDir,
        host,
        port,
        adminToken,
        membershipUrl: flags.membershipUrl,
        membershipTimeoutMs: flags.membershipTimeout,
        membershipRecheckMs: flags.membershipRecheck,
        maxLongPollsPerSession: flags.maxLongPolls,
        watch: flags.watch,
        watchScanIntervalMs: flags.watchScanInterval,
        scanIntervalMs: flags.scanInterval,
        maxFileSize: flags.maxFileSize,
        log,
        ...(metricsListen !== undefined ? { metricsListen } : {}),
        ...state,
        stateHeartbeatMs: flags.stateHeartbeat,
        ...(flags.auditLog !== undefined ? { auditLog: resolve(ctx.cwd, flags.auditLog) } : {}),
      });
      const files = cp.store.scopes().reduce((n, s) => n + s.files.length, 0);
      const rescans = cp.watch?.healthy
        ? `watching ${cp.watch.size} directories, full rescan every ${formatDurationFlag(cp.options.watchScanIntervalMs)}`
        : `full rescan every ${formatDurationFlag(cp.options.scanIntervalMs)}`;
      log(`serving ${dataDir}: ${cp.store.scopes().length} scopes, ${files} files, ${await cp.sessions.describe()}; ${rescans}`);
      if (cp.metricsUrl !== undefined) log(`metrics on ${cp.metricsUrl} (no token)`);
      ctx.stdout.write(`listening on ${cp.url}\n`);
      const signal = await stopping;
      log(`${signal}: shutting down`);
      await cp.close();
      result.code = EXIT.ok;
    });
}
