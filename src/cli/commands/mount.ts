// `knowledgefs mount MOUNTPOINT`: the runner's FUSE daemon, in the
// foreground. Prints exactly one stdout line when ready,
// `mounted MOUNTPOINT (<files> files, <scopes> scopes)`; progress and
// problems go to stderr. SIGINT/SIGTERM unmount and exit 0.
//
// The runner token comes from --token-file or $KNOWLEDGEFS_TOKEN, never
// from argv, and is never logged. The control plane unreachable at start is
// exit 4 at once (no retry loop: a supervisor or entrypoint restarts the
// daemon; once mounted, the daemon rides out outages by itself).

import { Option, type Command } from 'commander';
import { resolve } from 'node:path';
import { KnowledgeError } from '../../core/errors.js';
import { parseListenAddress } from '../../core/text/listen-address.js';
import type { LogFormat } from '../../core/text/log-line.js';
import { addLogOptions, startLogging } from '../log-sink.js';
import { controlSocketPath } from '../../client/socket-path.js';
import { parseDuration, parseSize, formatDurationFlag, formatSizeFlag } from '../../core/text/units.js';
import { keepYoungGenerationSmall } from '../../daemon/heap.js';
import { resolveGroup } from '../../daemon/group.js';
import { devFdMountpointProblem, parseFuseFd } from '../../daemon/fuse/handed-mount.js';
import { runMountDaemon } from '../../daemon/run-mount.js';
import { MOUNT_DEFAULTS } from '../../daemon/options.js';
import { DEFAULT_FUSE_BINDING, FUSE_BINDING_ENV, FUSE_BINDINGS, parseFuseBinding, type FuseBindingChoice } from '../../daemon/fuse/fuse-binding.js';
import type { CliContext, CommandResult } from '../context.js';
import { armStopDeadline } from '../stop-deadline.js';
import { EXIT } from '../exit-codes.js';
import { optionParser, parseOnOff, parsedOption } from '../option-parser.js';
import { readTokenFile } from '../token-file.js';

export const TOKEN_ENV = 'KNOWLEDGEFS_TOKEN';

interface MountFlags {
  server: string;
  tokenFile?: string;
  prefetchThreshold: number;
  prefetchContent: boolean;
  cacheDir?: string;
  cacheSize: number;
  cacheDirSize: number;
  grantTtl: number;
  kernelOpens: boolean;
  syncInterval: number;
  requestTimeout: number;
  socket?: string;
  allowOther?: boolean;
  group?: number;
  metricsListen?: string;
  fuseBinding?: FuseBindingChoice;
  fuseFd?: number;
  logFormat: LogFormat;
  logFile?: string;
}

/** --fuse-binding, else $KNOWLEDGEFS_FUSE_BINDING, else auto. */
function resolveFuseBinding(flags: MountFlags, ctx: CliContext): FuseBindingChoice {
  if (flags.fuseBinding !== undefined) return flags.fuseBinding;
  const fromEnv = ctx.env[FUSE_BINDING_ENV];
  if (fromEnv !== undefined && fromEnv.trim() !== '') return parseFuseBinding(fromEnv, `$${FUSE_BINDING_ENV}`);
  return DEFAULT_FUSE_BINDING;
}

/**
 * The token from --token-file or $KNOWLEDGEFS_TOKEN. The variable is removed
 * from the environment first thing, so no process the daemon starts
 * (fusermount at unmount, the stale-mount probe) inherits it.
 * /proc/PID/environ still shows the environment the process started with.
 */
export async function resolveToken(flags: Pick<MountFlags, 'tokenFile'>, ctx: Pick<CliContext, 'cwd' | 'env'>): Promise<string> {
  const fromEnv = ctx.env[TOKEN_ENV]?.trim();
  delete ctx.env[TOKEN_ENV];
  if (flags.tokenFile !== undefined) return readTokenFile(resolve(ctx.cwd, flags.tokenFile), '--token-file');
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  throw new KnowledgeError('invalid_argument', `no runner token: pass --token-file FILE or set $${TOKEN_ENV}`);
}

export function registerMount(program: Command, ctx: CliContext, result: CommandResult): void {
  const d = MOUNT_DEFAULTS;
  const command = program
    .command('mount')
    .description('Mount knowledge/ for one session (FUSE, foreground): only what the session may load, read-only.')
    .argument('<mountpoint>', 'directory to mount on (created when missing); name it knowledge')
    .requiredOption('--server <url[,url...]>', 'control plane URL, e.g. http://127.0.0.1:7420; several replicas separated by commas (calls move to the next when one fails)')
    .option('--token-file <file>', `file holding the runner token (else $${TOKEN_ENV})`)
    .addOption(parsedOption('--prefetch-threshold <size>', 'materialise every loadable scope when they total at most this; else account + bound + mounted teams', parseSize, d.prefetchThreshold, formatSizeFlag(d.prefetchThreshold)))
    .addOption(parsedOption('--prefetch-content <on|off>', 'fetch all materialised content in the background after mounting', parseOnOff, d.prefetchContent, d.prefetchContent ? 'on' : 'off'))
    .option('--cache-dir <dir>', 'spill fetched content to this directory (content-addressed, verified on read; default: memory only)')
    .addOption(parsedOption('--cache-size <size>', 'memory bound of the content cache', parseSize, d.cacheSize, formatSizeFlag(d.cacheSize)))
    .addOption(parsedOption('--cache-dir-size <size>', 'disk bound of --cache-dir (least recently used files deleted past it)', parseSize, d.cacheDirSize, formatSizeFlag(d.cacheDirSize)))
    .addOption(parsedOption('--kernel-opens <on|off>', 'native binding: the kernel opens cached files without asking the daemon, its entries bounded by each scope\'s grant (off with --grant-ttl 0)', parseOnOff, false, 'off'))
    .addOption(parsedOption('--grant-ttl <duration>', 'reuse a per-scope open grant this long (0 = ask on every open); bounds how long opens survive a revocation', parseDuration, d.grantTtlMs, formatDurationFlag(d.grantTtlMs)))
    .addOption(parsedOption('--sync-interval <duration>', 'poll the plan at most this often; changes reach ls within about this long', parseDuration, d.syncIntervalMs, formatDurationFlag(d.syncIntervalMs)))
    .addOption(parsedOption('--request-timeout <duration>', 'bound on every control-plane call and every open; past it → EIO', parseDuration, d.requestTimeoutMs, formatDurationFlag(d.requestTimeoutMs)))
    .option('--socket <path>', 'local control socket for read/manifest/reminder (default: $KNOWLEDGEFS_SOCKET or the standard path); its directory is created 0700, and refused if another user owns or may write it')
    .option('--metrics-listen <host:port>', 'serve the daemon\'s Prometheus metrics (GET /metrics) on this address, without a token (default: none; `knowledgefs status` shows the same numbers)')
    .addOption(new Option('--group <name|gid>', 'let only this group (and the daemon user and root) read the mount: files 0440, directories 0550 owned by the group, checked by the kernel (default_permissions); implies --allow-other').argParser(optionParser(resolveGroup)))
    .option('--allow-other', 'let other users use the mount (a non-root agent user); needs user_allow_other in /etc/fuse.conf unless root')
    .addOption(
      new Option('--fuse-binding <binding>', `FUSE binding: native (libfuse 3 addon, long kernel caches told of every change), fuse-native (libfuse 2, 1 s caches), auto = native when its addon loads (default ${DEFAULT_FUSE_BINDING}, or $${FUSE_BINDING_ENV})`)
        .choices(FUSE_BINDINGS),
    )
    .addOption(
      new Option('--fuse-fd <n>', 'serve the FUSE descriptor N, already mounted at <mountpoint> by a privileged step (knowledgefs mount-helper); this process then needs no capabilities and no /dev/fuse (native binding only)')
        .argParser(optionParser(parseFuseFd)),
    );
  addLogOptions(command)
    .addHelpText(
      'after',
      `
Sizes take units (64MiB, 1GB); durations too (500ms, 2s, 5m).
Keep --prefetch-threshold ≤ --cache-size (or set --cache-dir) so prefetched content stays cached.

Examples:
  KNOWLEDGEFS_TOKEN=... knowledgefs mount /workspace/knowledge --server http://cp:7420
  KNOWLEDGEFS_TOKEN=... knowledgefs mount /workspace/knowledge --server http://cp-a:7420,http://cp-b:7420,http://cp-c:7420
  knowledgefs mount ./knowledge --server http://127.0.0.1:7420 --token-file /run/secrets/kfs-token --grant-ttl 0
  # mounted by root, served by an unprivileged user (see knowledgefs mount-helper --help)
  knowledgefs mount /workspace/knowledge --fuse-fd 3 --server http://cp:7420 --token-file /run/secrets/kfs-token`,
    )
    .action(async (mountpoint: string, flags: MountFlags) => {
      const notADirectory = devFdMountpointProblem(mountpoint);
      if (notADirectory !== undefined) throw new KnowledgeError('invalid_argument', notADirectory);
      const metricsListen = flags.metricsListen === undefined ? undefined : parseListenAddress(flags.metricsListen, '--metrics-listen');
      const token = await resolveToken(flags, ctx);
      keepYoungGenerationSmall(process.execArgv, process.env.NODE_OPTIONS);
      const logging = startLogging(flags, 'mount', ctx);
      const { log } = logging;
      const stop = ctx.stopSignal().then((signal) => {
        armStopDeadline(signal, log);
        return signal;
      });
      await runMountDaemon(
        {
          mountpoint: resolve(ctx.cwd, mountpoint),
          serverUrl: flags.server,
          token,
          prefetchThreshold: flags.prefetchThreshold,
          prefetchContent: flags.prefetchContent,
          cacheDir: flags.cacheDir === undefined ? undefined : resolve(ctx.cwd, flags.cacheDir),
          cacheSize: flags.cacheSize,
          cacheDirSize: flags.cacheDirSize,
          grantTtlMs: flags.grantTtl,
          kernelOpens: flags.kernelOpens,
          syncIntervalMs: flags.syncInterval,
          requestTimeoutMs: flags.requestTimeout,
          // An empty --socket is kept, for validateMountOptions to refuse by name.
          socketPath: flags.socket === '' ? '' : controlSocketPath(flags.socket, ctx.env),
          allowOther: flags.allowOther === true,
          group: flags.group,
          metricsListen,
          fuseBinding: resolveFuseBinding(flags, ctx),
          fuseFd: flags.fuseFd,
        },
        {
          out: (line) => ctx.stdout.write(`${line}\n`),
          log,
        },
        stop,
      ).finally(() => logging.close());
      result.code = EXIT.ok;
    });
}
