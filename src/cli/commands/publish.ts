// `knowledgefs publish --data DIR --store s3://BUCKET/PREFIX`: uploads the
// data directory as a new publication (src/store/publication/publish.ts) and prints
// what changed, scope by scope. Progress of long uploads goes to stderr
// (one line a second, rewritten in place on a terminal); the summary to
// stdout (`--json`: the whole result as one JSON object). Publishing an
// unchanged directory writes nothing and says so.

import type { Command } from 'commander';
import { resolve } from 'node:path';
import { formatBytes, formatSizeFlag, parseSize } from '../../core/text/units.js';
import { DEFAULTS } from '../../server/options.js';
import { publish, type PublishProgress, type PublishResult, type ScopeChange } from '../../store/publication/publish.js';
import { formatStoreUrl, parseStoreUrl } from '../../store/objects/store-config.js';
import type { CliContext, CommandResult } from '../context.js';
import { EXIT } from '../exit-codes.js';
import { parsedOption } from '../option-parser.js';
import { STORE_ENVIRONMENT, addS3Options, openObjectStore, type StoreFlags } from '../store-flags.js';

interface PublishFlags extends StoreFlags {
  data: string;
  store: string;
  maxFileSize: number;
  concurrency: number;
  json?: boolean;
}

const PUBLISH_TIMEOUT_MS = 120_000;

function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

function describeScope(s: ScopeChange): string {
  if (s.status === 'removed') return 'removed';
  const files = plural(s.files, 'file');
  if (s.status !== 'changed') return `${s.status} (${files})`;
  if (s.added === undefined) return `changed (${files})`;
  return `changed: ${s.added} added, ${s.modified} changed, ${s.removed} removed (${files})`;
}

export function formatPublishResult(result: PublishResult, where: string): string {
  const files = result.scopes.reduce((n, s) => n + s.files, 0);
  const lines: string[] = [];
  if (!result.changed) {
    lines.push(`nothing changed: ${where} already holds this publication (published ${result.pointer.publishedAt}; ${plural(result.scopes.length, 'scope')}, ${plural(files, 'file')})`);
    return `${lines.join('\n')}\n`;
  }
  const live = result.scopes.filter((s) => s.status !== 'removed').length;
  lines.push(`published ${where} at ${result.pointer.publishedAt}: ${plural(live, 'scope')}, ${plural(files, 'file')}`);
  const width = Math.max(14, ...result.scopes.map((s) => s.scope.length));
  for (const s of result.scopes) lines.push(`  ${s.scope.padEnd(width)}  ${describeScope(s)}`);
  lines.push(`  ${'directory.json'.padEnd(width)}  ${result.directory}`);
  const u = result.uploaded;
  lines.push(`uploaded ${plural(u.blobs, 'blob')} (${formatBytes(u.bytes)}), ${plural(u.indexes, 'index', 'indexes')}, ${u.directories} directory.json; ${result.blobs - u.blobs} of ${plural(result.blobs, 'blob')} were already stored`);
  return `${lines.join('\n')}\n`;
}

export function registerPublish(program: Command, ctx: CliContext, result: CommandResult): void {
  const command = program
    .command('publish')
    .description('Upload a data directory to object storage as a new publication that `serve --store` replicas switch to.')
    .requiredOption('--data <dir>', 'data directory to publish: directory.json, account/, teams/<id>/')
    .requiredOption('--store <s3-url>', 'where to publish: s3://BUCKET or s3://BUCKET/PREFIX');
  addS3Options(command, PUBLISH_TIMEOUT_MS, 'longest one object-store request may take (a whole blob upload)')
    .addOption(parsedOption('--max-file-size <size>', 'files larger than this are skipped with a warning (match the replicas\' --max-file-size)', parseSize, DEFAULTS.maxFileSize, formatSizeFlag(DEFAULTS.maxFileSize)))
    .addOption(parsedOption('--concurrency <n>', 'uploads in flight at once', parseConcurrency, 16, '16'))
    .option('--json', 'print the result as one JSON object')
    .addHelpText(
      'after',
      `
Uploads only what the bucket lacks (blobs are named by their sha256), then one index per
changed scope and directory.json, and last the pointer current.json: replicas never see
half a publication, and a publish that fails midway leaves the previous one served.
Publishing an unchanged directory writes nothing.

${STORE_ENVIRONMENT}

Examples:
  knowledgefs publish --data /srv/knowledge --store s3://knowledge-prod/kfs
  AWS_ENDPOINT_URL_S3=http://minio:9000 knowledgefs publish --data ./kb --store s3://kb --json`,
    )
    .action(async (flags: PublishFlags) => {
      const dataDir = resolve(ctx.cwd, flags.data);
      const where = formatStoreUrl(parseStoreUrl(flags.store));
      const store = openObjectStore(flags.store, flags, ctx);
      const tty = (ctx.stderr as NodeJS.WriteStream).isTTY === true;
      let shown = false;
      const progress = (p: PublishProgress) => {
        const line = `uploading ${p.blobsDone}/${p.blobsTotal} blobs (${formatBytes(p.bytesDone)} of ${formatBytes(p.bytesTotal)})`;
        ctx.stderr.write(tty ? `\r${line}` : `${line}\n`);
        shown = true;
      };
      try {
        const outcome = await publish({
          dataDir,
          store,
          maxFileSize: flags.maxFileSize,
          concurrency: flags.concurrency,
          log: (line) => ctx.stderr.write(`${line}\n`),
          progress,
        });
        if (shown && tty) ctx.stderr.write('\n');
        ctx.stdout.write(flags.json ? `${JSON.stringify({ store: where, ...outcome })}\n` : formatPublishResult(outcome, where));
        result.code = EXIT.ok;
      } finally {
        await store.close();
      }
    });
}

function parseConcurrency(text: string): number {
  const n = Number(text);
  if (!/^\d{1,3}$/.test(text) || n < 1 || n > 256) throw new Error(`expected a number from 1 to 256, not "${text}"`);
  return n;
}
