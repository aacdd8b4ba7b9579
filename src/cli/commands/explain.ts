// `knowledgefs explain`: for one session, what it is told, what its mount
// shows, what it may load and why (GET /v1/admin/explain, admin token). The
// text form fits one screen; --json prints the ExplainResponse unchanged,
// the stable form for tools.

import type { Command } from 'commander';
import { formatBytes, formatSizeFlag, parseSize } from '../../core/text/units.js';
import { MOUNT_DEFAULTS } from '../../daemon/options.js';
import type { ExplainResponse, ExplainScope } from '../../core/wire.js';
import { adminRequest, adminToken } from '../admin-request.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { parsedOption } from '../option-parser.js';
import { formatTable } from '../text-table.js';
import { ADMIN_TOKEN_ENV } from '../token-file.js';

interface ExplainFlags {
  server: string;
  adminTokenFile?: string;
  session: string;
  path?: string;
  threshold: number;
  json?: boolean;
}

/** `knowledge/team_x/a.md`, `/workspace/knowledge/team_x/a.md` or `team_x/a.md` → `team_x/a.md`. */
export function scopePathOf(text: string): string {
  const m = /(?:^|\/)knowledge\/(.+)$/.exec(text);
  return m?.[1] ?? text.replace(/^\/+/, '');
}

const yes = (b: boolean) => (b ? 'yes' : 'no');

function scopeRow(s: ExplainScope): string[] {
  const verdict = s.decision.outcome === 'fail_closed' ? 'FAIL-CLOSED' : s.decision.allowed ? 'allow' : 'deny';
  return [
    s.scope,
    s.version === null ? '(no pack)' : s.version.slice(0, 12),
    `${s.files}`,
    formatBytes(s.totalBytes),
    yes(s.advertised),
    yes(s.materialised),
    verdict,
    `${s.decision.rule}: ${s.decision.why}${s.mounted ? ' [mounted]' : ''}`,
  ];
}

/** The one-screen text form. */
export function formatExplain(e: ExplainResponse): string {
  const s = e.session;
  const kind = s.kind === 'team' ? `team session of team ${s.team ?? '?'}` : `personal session, bound to ${s.team === null ? 'no team' : `team ${s.team}`}`;
  const source = e.membership.source === 'http' ? 'membership service' : 'directory.json';
  const members =
    e.membership.status === 'ok'
      ? `${s.creator} (${source}): ${e.membership.teams?.join(', ') || 'no teams'}`
      : e.membership.status === 'unknown-user'
        ? `${s.creator} is unknown to ${source}`
        : `${source} FAILED: ${e.membership.error ?? ''} (other teams are denied: fail closed)`;
  const plan =
    e.mode === 'all-loadable'
      ? `threshold ${formatBytes(e.threshold)}: loadable ${formatBytes(e.loadableBytes)} fits, so every loadable scope is on disk`
      : `threshold ${formatBytes(e.threshold)}: loadable ${formatBytes(e.loadableBytes)} does not fit, so only account, bound and mounted teams are on disk`;
  const lines = [
    `session   ${s.id}${s.revoked ? ' (REVOKED)' : ''}: ${kind}, creator ${s.creator}, created ${s.createdAt}`,
    `mounted   ${s.mounted.length === 0 ? 'none' : s.mounted.join(', ')}`,
    `members   ${members}`,
    `plan      ${plan}`,
    '',
    ...formatTable([['scope', 'version', 'files', 'bytes', 'told', 'on disk', 'loadable', 'why'], ...e.scopes.map(scopeRow)]),
  ];
  lines.push('', `read set  ${e.readSet.length === 0 ? 'empty' : `${e.readSet.length} file${e.readSet.length === 1 ? '' : 's'}`}`);
  for (const r of e.readSet) {
    const state = r.state === 'changed' ? `changed since read (${r.readSha256.slice(0, 12)} → ${r.currentSha256?.slice(0, 12) ?? ''})` : r.state === 'not-loadable' ? 'no longer loadable' : r.state;
    lines.push(`  ${r.path}  ${state}`);
  }
  const p = e.path;
  if (p !== undefined) {
    const file = p.exists === null ? 'not looked up (denied first)' : p.exists ? `exists, ${formatBytes(p.size ?? 0)}, sha256 ${p.sha256?.slice(0, 12) ?? ''}` : 'no such file in the pack';
    const answer = p.readAnswer.status === 200 ? '200, the content' : `${p.readAnswer.status} ${p.readAnswer.code ?? ''}: ${p.readAnswer.message ?? ''}`;
    lines.push(
      '',
      `path      ${p.path}`,
      `decision  ${p.decision.outcome} (${p.decision.rule}): ${p.decision.why}`,
      `file      ${file}${p.materialised ? '; in the mount' : '; not in the mount'}`,
      `a read    ${answer}`,
    );
  }
  const recent = e.recentDecisions;
  if (recent !== undefined) {
    lines.push('', `recent    ${recent.error ?? (recent.decisions.length === 0 ? 'no decisions in the log yet' : `the last ${recent.decisions.length} decisions, every replica, newest first`)}`);
    if (recent.decisions.length > 0) {
      lines.push(...formatTable([['time', 'replica', 'action', 'scope', 'result', 'rule'], ...recent.decisions.map((d) => [d.time, d.replica, d.action, d.scope, d.result, d.rule])]).map((l) => `  ${l}`));
    }
  }
  return `${lines.join('\n')}\n`;
}

export function registerExplain(program: Command, ctx: CliContext, result: CommandResult): void {
  program
    .command('explain')
    .description("Explain a session: its creator's memberships now, each scope's decision and why, what is advertised, on disk and loadable, its read set, and one path's decision.")
    .requiredOption('--server <url>', 'control plane URL, e.g. http://127.0.0.1:7420')
    .option('--admin-token-file <file>', `file holding the admin token (else $${ADMIN_TOKEN_ENV})`)
    .requiredOption('--session <id>', 'the session id (sessionId from `session create`)')
    .option('--path <path>', 'also decide this one file as a read would: knowledge/<scope>/<path> or <scope>/<path>')
    .addOption(parsedOption('--threshold <size>', "the mount's --prefetch-threshold, for what is on disk", parseSize, MOUNT_DEFAULTS.prefetchThreshold, formatSizeFlag(MOUNT_DEFAULTS.prefetchThreshold)))
    .option('--json', 'print the answer as JSON (stable for tools)')
    .addHelpText(
      'after',
      `
The decisions are made now, against the current memberships, and audited (action "explain").
With serve --audit-log postgres, the session's last 20 decisions from every replica follow.

Examples:
  knowledgefs explain --server http://127.0.0.1:7420 --admin-token-file admin.token --session s_3f9c…
  knowledgefs explain --server http://cp:7420 --session s_3f9c… --path knowledge/team_search/runbooks/reindex.md --json`,
    )
    .action(async (flags: ExplainFlags) => {
      const token = await adminToken(flags.adminTokenFile, ctx);
      const query = new URLSearchParams({ session: flags.session, threshold: String(flags.threshold) });
      if (flags.path !== undefined) query.set('path', scopePathOf(flags.path));
      const explained = await adminRequest<ExplainResponse>(flags.server, token, 'GET', `/v1/admin/explain?${query.toString()}`, 200);
      ctx.stdout.write(flags.json ? `${JSON.stringify(explained)}\n` : formatExplain(explained));
      result.code = EXIT.ok;
    });
}
