// `knowledgefs audit`: the fleet's decisions read back from the state
// database (`serve --audit-log postgres`), every replica's, oldest first.
// --session and --since narrow them; --json prints one AuditRecord per line
// (the same fields as the file and stdout forms).

import { Option, type Command } from 'commander';
import pg from 'pg';
import { KnowledgeError } from '../../core/errors.js';
import { parseDuration } from '../../core/text/units.js';
import type { AuditRecord } from '../../server/access/audit-log.js';
import { queryAudit } from '../../server/access/pg-audit-query.js';
import { isStateUrl } from '../../server/options.js';
import { pgErrorText } from '../../server/state/postgres/pg-error-text.js';
import { redactUrl } from '../../server/state/postgres/pg-state-url.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { optionParser, parsedOption } from '../option-parser.js';
import { STATE_URL_ENV, checkedStateUrl, stateUrlFromEnv } from '../state-url.js';
import { formatTable } from '../text-table.js';
import { parseCount } from './socket-command.js';

interface AuditFlags {
  state?: string;
  session?: string;
  since?: number;
  limit: number;
  json?: boolean;
}

const DEFAULT_LIMIT = 1_000;

function rowOf(r: AuditRecord): string[] {
  return [r.time, r.replica, r.session, r.action, r.scope, r.result, r.rule, r.requestId ?? ''];
}

export function formatAudit(records: readonly AuditRecord[]): string {
  if (records.length === 0) return 'no decisions\n';
  return `${formatTable([['time', 'replica', 'session', 'action', 'scope', 'result', 'rule', 'request'], ...records.map(rowOf)]).join('\n')}\n`;
}

export function registerAudit(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('audit')
    .description('Read the decisions every replica wrote to the state database (serve --audit-log postgres): what a session got, from which replica, and by which rule.')
    .option('--state <url>', `the state database, postgres://USER@HOST:PORT/DB (else $${STATE_URL_ENV}; no password here: use $${STATE_URL_ENV}, $PGPASSWORD or ~/.pgpass)`)
    .option('--session <id>', "only this session's decisions")
    .addOption(new Option('--since <duration>', 'only decisions of the last DURATION (e.g. 15m, 2h, 7d)').argParser(optionParser(parseDuration)))
    .addOption(parsedOption('--limit <n>', 'at most the newest N decisions', (t) => parseCount(t, 1, 1_000_000), DEFAULT_LIMIT, String(DEFAULT_LIMIT)))
    .option('--json', 'one JSON object per line, the fields of the audit log (stable for tools)')
    .addHelpText(
      'after',
      `
Decisions are shown oldest first, each with the replica that made it.

Examples:
  KNOWLEDGEFS_STATE_URL=postgres://kfs:secret@db/kfs knowledgefs audit --session s_3f9c… --since 1h
  knowledgefs audit --state postgres://kfs@db.internal/kfs --since 15m --json | jq 'select(.result == "deny")'`,
    )
    .action(async (flags: AuditFlags) => {
      let url: string | undefined;
      if (flags.state !== undefined) {
        if (!isStateUrl(flags.state)) throw new KnowledgeError('invalid_argument', '--state: expected postgres://USER@HOST:PORT/DATABASE');
        url = checkedStateUrl(flags.state);
      } else url = stateUrlFromEnv(ctx);
      if (url === undefined) throw new KnowledgeError('invalid_argument', `say where the decisions are: --state postgres://… or $${STATE_URL_ENV}`);
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000, query_timeout: 30_000, application_name: 'knowledgefs-audit' });
      try {
        await client.connect();
      } catch (err) {
        throw new KnowledgeError('unavailable', `cannot connect to PostgreSQL at ${redactUrl(url)}: ${pgErrorText(err)}`, { cause: err });
      }
      let records: AuditRecord[];
      try {
        records = await queryAudit(client, { session: flags.session, sinceMs: flags.since === undefined ? undefined : Date.now() - flags.since, limit: flags.limit });
      } catch (err) {
        const missing = (err as { code?: string }).code === '42P01';
        throw new KnowledgeError('unavailable', missing ? `no decision log in ${redactUrl(url)}: no replica has run with --audit-log postgres there` : `reading decisions from ${redactUrl(url)}: ${pgErrorText(err)}`, { cause: err });
      } finally {
        await client.end().catch(() => undefined);
      }
      records.reverse();
      ctx.stdout.write(flags.json ? records.map((r) => `${JSON.stringify(r)}\n`).join('') : formatAudit(records));
      result.code = EXIT.ok;
    });
}
