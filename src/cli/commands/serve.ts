// `knowledgefs serve`: the control plane in the foreground, over a data
// directory (`--data`, the embedded default) or a publication in object
// storage (`--store s3://...`, scale-out replicas).
// Prints exactly one stdout line when ready, `listening on http://HOST:PORT`;
// logs go to stderr. With `--audit-log -` stdout carries only the audit's
// JSON lines and the "listening on" line goes to stderr with the logs. SIGINT/SIGTERM close cleanly and exit 0. Object storage
// unreachable at start (or holding no valid publication) exits 4 with a
// message naming it; a bad flag exits 2.
//
// Admin token: --admin-token-file, else $KNOWLEDGEFS_ADMIN_TOKEN, else (with
// --data only) the file DATA/.knowledgefs/admin-token (created with a fresh
// random token, mode 0600, on first start; reused after), whose path is
// printed on stderr.
//
// Session state: --state FILE (default DATA/.knowledgefs/state.json), or
// PostgreSQL for replicas: --state postgres://USER@HOST/DB, or the whole URL
// in $KNOWLEDGEFS_STATE_URL. A password (in the userinfo or a query
// parameter such as ?password= or ?sslpassword=) is refused on the command
// line (any local user can read argv); it goes in the variable, $PGPASSWORD
// or ~/.pgpass. Logs show the URL without its secrets; clients never see it.

import type { Command } from 'commander';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import { parseListenAddress } from '../../core/text/listen-address.js';
import type { Log, LogFormat } from '../../core/text/log-line.js';
import { addLogOptions, startLogging } from '../log-sink.js';
import { parseDuration, parseSize, formatDurationFlag, formatSizeFlag } from '../../core/text/units.js';
import { serveControlPlane } from '../../server/control-plane.js';
import { AUDIT_TO_POSTGRES, AUDIT_TO_STDOUT, DEFAULTS, internalDir, isStateUrl } from '../../server/options.js';
import { STATE_URL_ENV, checkedStateUrl, stateUrlFromEnv } from '../state-url.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { parseOnOff, parsedOption } from '../option-parser.js';
import { STORE_ENVIRONMENT, addS3Options, type StoreFlags } from '../store-flags.js';
import { ADMIN_TOKEN_ENV, readTokenFile } from '../token-file.js';
import { parseCount } from './socket-command.js';

interface ServeFlags extends StoreFlags {
  data?: string;
  publicationPoll: number;
  blobCache: number;
  blobCacheDir?: string;
  blobCacheDisk: number;
  listen: string;
  state?: string;
  stateHeartbeat: number;
  migrateContract?: boolean;
  adminTokenFile?: string;
  membershipUrl?: string;
  membershipTimeout: number;
  membershipRecheck: number;
  maxLongPolls: number;
  maxPrefetchBatches: number;
  auditLog?: string;
  auditRetention: number;
  auditBuffer: number;
  replicaId?: string;
  watch: boolean;
  watchScanInterval: number;
  scanInterval: number;
  maxFileSize: number;
  metricsListen?: string;
  logFormat: LogFormat;
  logFile?: string;
}

async function resolveAdminToken(flags: ServeFlags, dataDir: string | undefined, ctx: CliContext, log: Log): Promise<string> {
  if (flags.adminTokenFile !== undefined) return readTokenFile(resolve(ctx.cwd, flags.adminTokenFile), '--admin-token-file');
  const fromEnv = ctx.env[ADMIN_TOKEN_ENV];
  if (fromEnv !== undefined && fromEnv.trim() !== '') return fromEnv.trim();
  if (dataDir === undefined) throw new KnowledgeError('config', `with --store, the admin token must come from --admin-token-file or $${ADMIN_TOKEN_ENV} (every replica needs the same one)`);
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
  log(`admin token: ${file}`);
  return token;
}

/** Where session state lives: a file path or a PostgreSQL URL (flag first, then the environment). */
function resolveState(flags: ServeFlags, ctx: CliContext): { stateFile?: string; stateUrl?: string } {
  if (flags.state !== undefined && isStateUrl(flags.state)) return { stateUrl: checkedStateUrl(flags.state) };
  if (flags.state !== undefined) return { stateFile: resolve(ctx.cwd, flags.state) };
  const fromEnv = stateUrlFromEnv(ctx);
  return fromEnv === undefined ? {} : { stateUrl: fromEnv };
}

export function registerServe(program: Command, ctx: CliContext, result: CommandResult): void {
  const command = program
    .command('serve')
    .description('Run the control plane: packs, sessions, CanLoadScope, plans, files, manifest, reminder.')
    .option('--data <dir>', 'data directory: directory.json, account/, teams/<id>/ (the embedded default)')
    .option('--store <s3-url>', 'serve the publication at s3://BUCKET/PREFIX (see `knowledgefs publish`) instead of --data; needs --state and --audit-log')
    .option('--listen <host:port>', 'address to listen on (port 0 picks a free port)', '127.0.0.1:7420')
    .option('--state <file|url>', `session state: a file (default DATA/.knowledgefs/state.json), or postgres://USER@HOST:PORT/DB to share it between replicas (else $${STATE_URL_ENV}; no password here: use $${STATE_URL_ENV}, $PGPASSWORD or ~/.pgpass)`)
    .addOption(parsedOption('--state-heartbeat <duration>', 'with PostgreSQL state: heartbeat of the notification connection; a revoked session is refused by every replica within twice this (with --store, also of the publications served, which gc keeps)', parseDuration, DEFAULTS.stateHeartbeatMs, formatDurationFlag(DEFAULTS.stateHeartbeatMs)))
    .option('--migrate-contract', 'with PostgreSQL state: also apply contract migrations (they remove or change what older releases use); only once every replica runs this release')
    .option('--admin-token-file <file>', `admin token file (else $${ADMIN_TOKEN_ENV}, else generated into DATA/.knowledgefs/admin-token)`)
    .option('--membership-url <url>', 'external membership service: GET <url>/users/<user>/teams (default: directory.json)')
    .addOption(parsedOption('--membership-timeout <duration>', 'timeout of one membership request', parseDuration, DEFAULTS.membershipTimeoutMs, formatDurationFlag(DEFAULTS.membershipTimeoutMs)))
    .addOption(parsedOption('--membership-recheck <duration>', 'how often a waiting plan long-poll asks the membership service again (other changes wake it at once); a revoked membership reaches a waiting plan within this', parseDuration, DEFAULTS.membershipRecheckMs, formatDurationFlag(DEFAULTS.membershipRecheckMs)))
    .addOption(parsedOption('--max-long-polls <n>', 'plan long-polls one session may hold at once; more are answered 429', (t) => parseCount(t, 1, 1000), DEFAULTS.maxLongPollsPerSession, String(DEFAULTS.maxLongPollsPerSession)))
    .addOption(parsedOption('--max-prefetch-batches <n>', 'mount daemons\' background prefetch batches served at once; more are answered 503 with Retry-After (the daemon asks again later), so agents\' opens never wait behind a fleet\'s prefetch', (t) => parseCount(t, 1, 10_000), DEFAULTS.maxPrefetchBatches, String(DEFAULTS.maxPrefetchBatches)))
    .option('--audit-log <file|-|postgres>', 'where decisions go: a file, one JSON line each (default DATA/.knowledgefs/audit.log); - for JSON lines on stdout (the "listening on" line then goes to stderr); postgres to batch them into the --state database, shared by every replica')
    .addOption(parsedOption('--audit-retention <duration>', 'with --audit-log postgres: keep decisions this long (daily partitions; at least 1d)', parseDuration, DEFAULTS.auditRetentionMs, formatDurationFlag(DEFAULTS.auditRetentionMs)))
    .addOption(parsedOption('--audit-buffer <n>', 'with --audit-log - or postgres: decisions held while the sink is slow or down; beyond it the oldest are dropped (knowledgefs_audit_dropped_total)', (t) => parseCount(t, 1, 10_000_000), DEFAULTS.auditBufferRecords, String(DEFAULTS.auditBufferRecords)))
    .option('--replica-id <name>', 'this replica\'s name in every audit record (default HOSTNAME:PORT of --listen; HOSTNAME:pPID with port 0)')
    .addOption(parsedOption('--watch <on|off>', 'watch the data directory with inotify and rescan a changed directory within ~50ms (off: for filesystems without inotify, e.g. NFS)', parseOnOff, true, 'on'))
    .addOption(parsedOption('--watch-scan-interval <duration>', 'pause between full rescans while the watch works (a safety net for lost events)', parseDuration, DEFAULTS.watchScanIntervalMs, formatDurationFlag(DEFAULTS.watchScanIntervalMs)))
    .addOption(parsedOption('--scan-interval <duration>', "pause between full rescans with --watch off or a failed watch (at least twice the last scan's duration)", parseDuration, DEFAULTS.scanIntervalMs, formatDurationFlag(DEFAULTS.scanIntervalMs)))
    .option('--metrics-listen <host:port>', 'also serve GET /metrics without a token on this address (default: only GET /metrics on --listen, with the admin token)')
    .addOption(parsedOption('--max-file-size <size>', 'files larger than this are skipped with a log line', parseSize, DEFAULTS.maxFileSize, formatSizeFlag(DEFAULTS.maxFileSize)));
  addLogOptions(command);
  addS3Options(command, DEFAULTS.s3TimeoutMs, "with --store: longest one object-store request may take (keep it below the mounts' --request-timeout)")
    .addOption(parsedOption('--publication-poll <duration>', 'with --store: how often to look for a new publication (one conditional GET)', parseDuration, DEFAULTS.publicationPollMs, formatDurationFlag(DEFAULTS.publicationPollMs)))
    .addOption(parsedOption('--blob-cache <size>', 'with --store: file bytes kept in memory', parseSize, DEFAULTS.blobCacheBytes, formatSizeFlag(DEFAULTS.blobCacheBytes)))
    .option('--blob-cache-dir <dir>', 'with --store: spill blobs evicted from memory to this directory (verified again when read back)')
    .addOption(parsedOption('--blob-cache-disk <size>', 'with --blob-cache-dir: bytes kept on disk', parseSize, DEFAULTS.blobCacheDiskBytes, formatSizeFlag(DEFAULTS.blobCacheDiskBytes)))
    .addHelpText(
      'after',
      `
Examples:
  knowledgefs serve --data ./examples/knowledge-base
  knowledgefs serve --data /srv/knowledge --listen 0.0.0.0:7420 --admin-token-file /run/secrets/kfs-admin
  knowledgefs serve --data /srv/knowledge --membership-url http://people.internal:8080 --membership-timeout 1s
  knowledgefs serve --data /srv/knowledge --metrics-listen 127.0.0.1:9464   # Prometheus scrapes here, no token
  knowledgefs serve --data /srv/knowledge --log-format json --log-file /var/log/knowledgefs/serve.log
  KNOWLEDGEFS_STATE_URL=postgres://kfs:secret@db.internal/knowledgefs knowledgefs serve --data /srv/knowledge --listen 0.0.0.0:7420
  knowledgefs serve --data /srv/knowledge --audit-log - | fluent-bit …        # decisions as JSON lines on stdout
  KNOWLEDGEFS_STATE_URL=postgres://kfs:secret@db/kfs knowledgefs serve --data /srv/knowledge --audit-log postgres --replica-id cp-1
  knowledgefs serve --store s3://knowledge-prod/kfs --s3-endpoint http://minio:9000 --state postgres://kfs@db/kfs \\
      --audit-log /var/log/kfs/audit.log --admin-token-file /run/secrets/kfs-admin

${STORE_ENVIRONMENT}`,
    )
    .action(async (flags: ServeFlags) => {
      // Listen for SIGINT/SIGTERM from the start, so a signal during start-up still ends in a clean stop.
      const stopping = ctx.stopSignal();
      // Registered first, so on SIGHUP the log file is reopened before the audit log's line is written.
      const logging = startLogging(flags, 'serve', ctx);
      const { log } = logging;
      // SIGHUP (logrotate's signal) reopens the audit log; until the control plane runs it is ignored, not fatal.
      let reopen: () => void = () => undefined;
      const stopHangup = ctx.onSignal?.('SIGHUP', () => reopen());
      if (flags.data === undefined && flags.store === undefined) throw new KnowledgeError('config', 'say where the packs are: --data DIR (a data directory) or --store s3://BUCKET/PREFIX (a publication)');
      if (flags.data !== undefined && flags.store !== undefined) throw new KnowledgeError('config', '--data and --store exclude each other: packs come from the data directory or from object storage');
      const dataDir = flags.data === undefined ? undefined : resolve(ctx.cwd, flags.data);
      const { host, port } = parseListenAddress(flags.listen);
      const metricsListen = flags.metricsListen === undefined ? undefined : parseListenAddress(flags.metricsListen, '--metrics-listen');
      const state = resolveState(flags, ctx);
      // A mistyped --data must not get a generated admin token (and directories) created under it.
      if (dataDir !== undefined && !(await stat(dataDir).then((s) => s.isDirectory(), () => false))) {
        throw new KnowledgeError('config', `--data ${dataDir}: not a directory (it needs directory.json, account/ and teams/<id>/)`);
      }
      const adminToken = await resolveAdminToken(flags, dataDir, ctx, log);
      const cp = await serveControlPlane({
        ...(dataDir !== undefined ? { dataDir } : {}),
        store: flags.store,
        s3Endpoint: flags.s3Endpoint,
        s3TimeoutMs: flags.s3Timeout,
        env: ctx.env,
        publicationPollMs: flags.publicationPoll,
        blobCacheBytes: flags.blobCache,
        blobCacheDiskBytes: flags.blobCacheDisk,
        ...(flags.blobCacheDir !== undefined ? { blobCacheDir: resolve(ctx.cwd, flags.blobCacheDir) } : {}),
        host,
        port,
        adminToken,
        membershipUrl: flags.membershipUrl,
        membershipTimeoutMs: flags.membershipTimeout,
        membershipRecheckMs: flags.membershipRecheck,
        maxLongPollsPerSession: flags.maxLongPolls,
        maxPrefetchBatches: flags.maxPrefetchBatches,
        watch: flags.watch,
        watchScanIntervalMs: flags.watchScanInterval,
        scanIntervalMs: flags.scanInterval,
        maxFileSize: flags.maxFileSize,
        log,
        ...(metricsListen !== undefined ? { metricsListen } : {}),
        ...state,
        stateHeartbeatMs: flags.stateHeartbeat,
        migrateContract: flags.migrateContract === true,
        ...(flags.auditLog !== undefined ? { auditLog: flags.auditLog === AUDIT_TO_STDOUT || flags.auditLog === AUDIT_TO_POSTGRES ? flags.auditLog : resolve(ctx.cwd, flags.auditLog) } : {}),
        auditRetentionMs: flags.auditRetention,
        auditBufferRecords: flags.auditBuffer,
        replicaId: flags.replicaId ?? `${hostname()}:${port === 0 ? `p${process.pid}` : port}`,
      });
      const files = cp.store.scopes().reduce((n, s) => n + s.files.length, 0);
      const { what, upkeep } = cp.source.describe();
      log(`serving ${what}: ${cp.store.scopes().length} scopes, ${files} files, ${await cp.sessions.describe()}; ${upkeep}`);
      if (cp.metricsUrl !== undefined) log(`metrics on ${cp.metricsUrl} (no token)`);
      // With the audit log on stdout, stdout carries only JSON lines.
      if (flags.auditLog === AUDIT_TO_STDOUT) log(`listening on ${cp.url}`);
      else ctx.stdout.write(`listening on ${cp.url}\n`);
      reopen = () => {
        log(`SIGHUP: reopening the audit log ${cp.options.auditLog}`);
        void cp.audit.reopen();
      };
      const signal = await stopping;
      stopHangup?.();
      log(`${signal}: shutting down`);
      await cp.close();
      logging.close();
      result.code = EXIT.ok;
    });
}
