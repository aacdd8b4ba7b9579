// `knowledgefs gc --store s3://BUCKET/PREFIX [--keep N] [--grace DURATION]
// [--state URL] [--delete]`: removes what no publication worth keeping
// names (src/store/gc.ts). A dry run unless --delete: it prints what it
// would remove, with counts and bytes. Progress goes to stderr
// (`gc: listed 12 000 objects…`), the summary to stdout.
//
// --delete needs --state (or $KNOWLEDGEFS_STATE_URL): the publications
// replicas serve are recorded there, and so is the lock that lets one gc
// delete at a time (src/server/pg-gc-lock.ts).

import type { Command } from 'commander';
import pg from 'pg';
import { KnowledgeError } from '../../core/errors.js';
import { formatBytes, formatDurationFlag, parseDuration } from '../../core/text/units.js';
import { isStateUrl } from '../../server/options.js';
import { loadMigrations, migrate } from '../../server/state/postgres/pg-migrations.js';
import { PgGcLock } from '../../server/state/postgres/pg-gc-lock.js';
import { pgErrorText } from '../../server/state/postgres/pg-error-text.js';
import { servedWithin } from '../../server/state/postgres/pg-replica-heartbeat.js';
import { redactUrl } from '../../server/state/postgres/pg-state-url.js';
import { collectGarbage, type GcKind, type GcProgress, type GcResult, type Tally } from '../../store/gc/gc.js';
import { REUSE_YOUNGER_THAN_MS } from '../../store/publication/publish.js';
import { formatStoreUrl, parseStoreUrl } from '../../store/objects/store-config.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { parsedOption } from '../option-parser.js';
import { STATE_URL_ENV, checkedStateUrl, stateUrlFromEnv } from '../state-url.js';
import { STORE_ENVIRONMENT, addS3Options, openObjectStore, type StoreFlags } from '../store-flags.js';

interface GcFlags extends StoreFlags {
  store: string;
  keep: number;
  grace: number;
  lockTtl: number;
  state?: string;
  delete?: boolean;
  json?: boolean;
}

const GC_TIMEOUT_MS = 30_000;
export const DEFAULT_KEEP = 3;
export const DEFAULT_GRACE_MS = 24 * 3_600_000;
const DEFAULT_LOCK_TTL_MS = 120_000;

/** 1234567 → "1 234 567". */
export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
}

function objects(t: Tally): string {
  return `${formatCount(t.objects)} ${t.objects === 1 ? 'object' : 'objects'}, ${formatBytes(t.bytes)}`;
}

export function formatGcResult(r: GcResult, where: string, graceMs: number): string {
  const lines: string[] = [];
  lines.push(`gc ${where}: ${r.roots.length} ${r.roots.length === 1 ? 'publication' : 'publications'} kept, grace ${formatDurationFlag(graceMs)}`);
  for (const root of r.roots) lines.push(`  ${root.publishedAt}  ${root.id.slice(0, 12)}  ${root.reasons.join(', ')}`);
  lines.push(`listed ${objects(r.listed)}: kept ${objects(r.marked)} they name, ${objects(r.young)} younger than the grace, ${objects(r.other)} other (current.json, keys outside the layout)`);
  const kinds = Object.entries(r.sweptByKind)
    .filter(([, t]) => t.objects > 0)
    .map(([kind, t]) => `${formatCount(t.objects)} ${t.objects === 1 ? SINGULAR[kind as GcKind] : kind} (${formatBytes(t.bytes)})`);
  lines.push(`${r.deleted ? 'deleted' : 'would delete'} ${objects(r.swept)}${kinds.length > 0 ? `: ${kinds.join(', ')}` : ''}`);
  if (r.spared.objects > 0) lines.push(`spared ${objects(r.spared)} listed as garbage: written again, named by a new publication, or gone by the time their batch was checked`);
  if (!r.deleted && r.swept.objects > 0) lines.push('dry run: nothing was deleted; run again with --delete to delete them');
  return `${lines.join('\n')}\n`;
}

const SINGULAR: Record<GcKind, string> = { blobs: 'blob', indexes: 'index', directories: 'directory', publications: 'publication' };

function parseKeep(text: string): number {
  const n = Number(text);
  if (!/^\d{1,4}$/.test(text) || n < 1) throw new Error(`expected a number of publications from 1 to 9999, not "${text}"`);
  return n;
}

export function registerGc(program: Command, ctx: CliContext, result: CommandResult): void {
  const command = program
    .command('gc')
    .description('Remove from a publication bucket the blobs and indexes no publication worth keeping names (a dry run unless --delete).')
    .requiredOption('--store <s3-url>', 'the publication: s3://BUCKET or s3://BUCKET/PREFIX');
  addS3Options(command, GC_TIMEOUT_MS, 'longest one object-store request may take')
    .addOption(parsedOption('--keep <n>', 'publications of the history to keep, newest first (the current one is always kept)', parseKeep, DEFAULT_KEEP, String(DEFAULT_KEEP)))
    .addOption(parsedOption('--grace <duration>', 'keep every object younger than this, every publication current within it, and every one a replica served within it; longer than the longest publish', parseDuration, DEFAULT_GRACE_MS, formatDurationFlag(DEFAULT_GRACE_MS)))
    .option('--state <url>', `the replicas' PostgreSQL state, postgres://USER@HOST:PORT/DB (else $${STATE_URL_ENV}): which publications they serve, and the gc lock; required with --delete`)
    .addOption(parsedOption('--lock-ttl <duration>', 'the gc lock expires this long after its last renewal (a killed gc\'s lock is taken over after it)', parseDuration, DEFAULT_LOCK_TTL_MS, formatDurationFlag(DEFAULT_LOCK_TTL_MS)))
    .option('--delete', 'delete; without it, only print what would be deleted')
    .option('--json', 'print the result as one JSON object')
    .addHelpText(
      'after',
      `
Keeps the current publication, the last --keep of the history (publications/), every
publication that was current within --grace, and every one a replica reported serving
within --grace; deletes only objects none of them names that are older than --grace.
Safe while replicas serve and publishes run. Interrupted, it leaves the bucket servable;
run it again to finish. One gc deletes at a time per store (a lock in PostgreSQL).

${STORE_ENVIRONMENT}

Examples:
  knowledgefs gc --store s3://knowledge-prod/kfs                        # dry run
  KNOWLEDGEFS_STATE_URL=postgres://kfs@db/kfs knowledgefs gc --store s3://knowledge-prod/kfs --delete
  knowledgefs gc --store s3://knowledge-prod/kfs --keep 10 --grace 48h --json`,
    )
    .action(async (flags: GcFlags) => {
      const where = formatStoreUrl(parseStoreUrl(flags.store));
      if (flags.state !== undefined && !isStateUrl(flags.state)) {
        throw new KnowledgeError('invalid_argument', `--state: expected the replicas' PostgreSQL, postgres://USER@HOST:PORT/DB, not "${flags.state}" (gc has no use for a state file)`);
      }
      const stateUrl = flags.state !== undefined ? checkedStateUrl(flags.state) : stateUrlFromEnv(ctx);
      if (flags.delete && stateUrl === undefined) {
        throw new KnowledgeError(
          'invalid_argument',
          `--delete needs --state postgres://… (or $${STATE_URL_ENV}): without it gc cannot know which publications replicas still serve, nor take the gc lock`,
        );
      }
      if (flags.delete && flags.grace < REUSE_YOUNGER_THAN_MS) {
        ctx.stderr.write(`gc: warning: --grace ${formatDurationFlag(flags.grace)} is shorter than the ${formatDurationFlag(REUSE_YOUNGER_THAN_MS)} a publish may reuse a stored blob for: a publish running now could lose one (a replica would then refuse that publication); use such a grace only in tests\n`);
      }
      if (stateUrl === undefined) {
        ctx.stderr.write('gc: no --state: publications replicas serve are not known; this dry run keeps only the current one, the history\'s last and those current within the grace\n');
      }
      const store = openObjectStore(flags.store, flags, ctx);
      const pool = stateUrl === undefined ? null : new pg.Pool({ connectionString: stateUrl, max: 2, connectionTimeoutMillis: 10_000, application_name: 'knowledgefs-gc' });
      pool?.on('error', () => undefined);
      let lock: PgGcLock | null = null;
      const tty = (ctx.stderr as NodeJS.WriteStream).isTTY === true;
      const progress = (p: GcProgress) => {
        const line = p.phase === 'listed' ? `gc: listed ${formatCount(p.done)} objects…` : `gc: deleted ${formatCount(p.done)}/${formatCount(p.total ?? p.done)} objects…`;
        ctx.stderr.write(tty ? `\r${line}` : `${line}\n`);
      };
      try {
        let served = null;
        if (pool !== null) {
          try {
            const client = await pool.connect();
            try {
              await migrate(client, await loadMigrations());
            } finally {
              client.release();
            }
            if (flags.delete) lock = await PgGcLock.take(pool, store.description, flags.lockTtl);
            served = (await servedWithin(pool, flags.grace, (line) => ctx.stderr.write(`gc: ${line}\n`))).map((s) => s.pointer);
          } catch (err) {
            if (err instanceof KnowledgeError) throw err;
            throw new KnowledgeError('unavailable', `gc: PostgreSQL at ${redactUrl(stateUrl as string)}: ${pgErrorText(err)}`, { cause: err });
          }
        }
        const held = lock;
        const outcome = await collectGarbage({
          store,
          keep: flags.keep,
          graceMs: flags.grace,
          delete: flags.delete === true,
          served,
          ...(held !== null ? { beforeDelete: () => held.check() } : {}),
          log: (line) => ctx.stderr.write(`gc: ${line}\n`),
          progress,
        });
        if (tty) ctx.stderr.write('\n');
        ctx.stdout.write(flags.json ? `${JSON.stringify({ store: where, ...outcome })}\n` : formatGcResult(outcome, where, flags.grace));
        result.code = EXIT.ok;
      } finally {
        await lock?.release();
        await pool?.end().catch(() => undefined);
        await store.close();
      }
    });
}
