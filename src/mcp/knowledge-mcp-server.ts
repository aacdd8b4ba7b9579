// The MCP server as a thin adapter over the client library: every tool,
// resource and prompt calls KnowledgeClient and decides nothing of its own.
//
//   read_knowledge {path, offset?, limit?}   the read tool, exactly (fresh decision, lazy fetch, mount, paging)
//   knowledgefs://manifest, knowledge_manifest   the manifest, byte-identical to `knowledgefs manifest`
//   list_knowledge, search_knowledge         only with fsTools: walk the local mount (fs-tools.ts)
//
// No tool lists the teams a session could load but has not mounted: for a
// personal session that would reveal its creator's memberships.
//
// Arguments are checked by the input schema (strict: unknown keys are
// refused) before the handler runs, so bad arguments never reach the daemon;
// the SDK turns a schema failure into an `isError` result. Every other
// failure is an `isError` result built in tool-results.ts.
//
// One instance serves one era of the protocol (serve-stdio.ts picks it from
// the client's opening message). What differs is how a client subscribes to
// the manifest: on 2025-era revisions with `resources/subscribe`, handled
// here; on 2026-07-28 with `subscriptions/listen`, which the SDK's stdio entry
// serves itself (listen-tracker.ts tells the watch). Either way a change the
// watch sees goes out as `notifications/resources/updated`, which the entry
// routes to the subscriptions that asked for the manifest.
//
// Cache hints (2026-07-28 `ttlMs`/`cacheScope`; 2025-era results carry none):
// the tool, resource and prompt lists and the discover result are fixed for
// the life of the process, but depend on its flags, so they are private to
// the client that started it; the manifest can change on any read (a mount)
// and belongs to the session: never cached, private.

import { McpServer, ProtocolError, ProtocolErrorCode, type CacheHint } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { isTemporary } from '../client/errors.js';
import type { KnowledgeClient } from '../client/knowledge-client.js';
import { MAX_PATH_BYTES } from '../core/paths.js';
import { READ_OUTPUT_CAP } from '../core/wire.js';
import { listDir, resolveMountDir, searchDir } from './fs-tools.js';
import { NAMES } from './guidance.js';
import type { ManifestWatch } from './manifest-watch.js';
import { errorText, errorToolResult, readToolResult, reminderBlock, type ToolResult } from './tool-results.js';

/** What the server needs of the client library (KnowledgeClient has it all). */
export type KnowledgeSource = Pick<KnowledgeClient, 'read' | 'manifest' | 'reminder' | 'status'>;

export type ReminderMode = 'tool-result' | 'off';

export interface KnowledgeMcpOptions {
  /** `tool-result`: append the reminder to tool results when it names changed or removed files. */
  readonly reminder: ReminderMode;
  /** Register list_knowledge and search_knowledge. */
  readonly fsTools: boolean;
  /** The server's `instructions`, sent once when a client connects. */
  readonly instructions: string;
  /** Directory relative paths are resolved from. */
  readonly cwd: string;
  readonly version: string;
  readonly log: (line: string) => void;
  /** Tells subscribed clients that the manifest changed; checked again right after a read mounted a team. */
  readonly watch: ManifestWatch;
}

/** The protocol era an instance serves: 2025-11-25 and older (`initialize`), or 2026-07-28 (`server/discover`). */
export type McpEra = 'legacy' | 'modern';

/** Fixed for the process (the flags decide them), so a client may keep them while it runs this server. */
const FOR_THE_PROCESS: CacheHint = { ttlMs: 3_600_000, cacheScope: 'private' };
/** The manifest changes when a read mounts a team or a DUTY.md changes: always ask again. */
const NEVER_CACHED: CacheHint = { ttlMs: 0, cacheScope: 'private' };

const READ_ONLY = { readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false } as const;

const pathArg = z
  .string()
  .min(1)
  .max(MAX_PATH_BYTES)
  .refine((p) => !p.includes('\0'), 'NUL character in path');

const readInput = z
  .object({
    path: pathArg.describe('The file, as ls/find print it: knowledge/<scope>/<path>, e.g. knowledge/account/DUTY.md (or an absolute path under the mount)'),
    offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().describe('Characters to skip; pass the offset a cut result names to continue (default 0)'),
    limit: z.number().int().min(1).max(READ_OUTPUT_CAP).optional().describe(`Characters to return at most (default and maximum ${READ_OUTPUT_CAP})`),
  })
  .strict();

const listInput = z
  .object({
    path: pathArg.optional().describe('Directory to list, as ls prints it (default knowledge)'),
    max_entries: z.number().int().min(1).max(10_000).optional().describe('Entries to return at most (default 1000)'),
  })
  .strict();

const searchInput = z
  .object({
    pattern: z.string().min(1).max(1000).describe('Text to look for (literal, not a regular expression)'),
    path: pathArg.optional().describe('Directory or file to search, as ls prints it (default knowledge)'),
    ignore_case: z.boolean().optional().describe('Match regardless of case (default false)'),
    max_results: z.number().int().min(1).max(1000).optional().describe('Matching lines to return at most (default 100)'),
  })
  .strict();

export function createKnowledgeMcpServer(source: KnowledgeSource, options: KnowledgeMcpOptions, era: McpEra = 'modern'): McpServer {
  const { log, watch } = options;
  const server = new McpServer(
    { name: 'knowledgefs', version: options.version },
    {
      instructions: options.instructions,
      // Nothing is added or removed while the server runs; the manifest's content is what changes.
      capabilities: { tools: { listChanged: false }, prompts: { listChanged: false }, resources: { subscribe: true, listChanged: false } },
      cacheHints: {
        'tools/list': FOR_THE_PROCESS,
        'prompts/list': FOR_THE_PROCESS,
        'resources/list': FOR_THE_PROCESS,
        'resources/templates/list': FOR_THE_PROCESS,
        'server/discover': FOR_THE_PROCESS,
        'resources/read': NEVER_CACHED,
      },
    },
  );

  /** The reminder rides on a result, delimited, when it has something to say; it is never worth failing a call over. */
  const withReminder = async (result: ToolResult, failure?: unknown): Promise<ToolResult> => {
    // A temporary failure means the daemon or control plane is out: asking again now would only add a wait.
    if (options.reminder === 'off' || (failure !== undefined && isTemporary(failure))) return result;
    try {
      const block = reminderBlock(await source.reminder());
      return block === undefined ? result : { ...result, content: [...result.content, block] };
    } catch (err) {
      log(`reminder not attached: ${err instanceof Error ? err.message : String(err)}`);
      return result;
    }
  };

  /** Runs a tool body; any failure becomes an isError result. */
  const tool = async (body: () => Promise<ToolResult>): Promise<ToolResult> => {
    let result: ToolResult;
    try {
      result = await body();
    } catch (err) {
      return withReminder(errorToolResult(err, log), err);
    }
    return withReminder(result);
  };

  server.registerTool(
    NAMES.readTool,
    {
      title: 'Read a knowledge file',
      description:
        'Read a file under knowledge/ by the path ls/find print. Access is checked afresh on every call. ' +
        'A file of a team that is not on disk yet is loaded if this session may have it, and the whole team is then mounted (ls and grep see it). ' +
        `At most ${READ_OUTPUT_CAP} characters per call: a cut result says which offset continues it.`,
      inputSchema: readInput,
      annotations: { title: 'Read a knowledge file', ...READ_ONLY },
    },
    ({ path, offset, limit }) =>
      tool(async () => {
        // Stryker disable next-line ConditionalExpression: an option given as undefined is an option not given (the client checks `=== undefined`)
        const res = await source.read(path, { cwd: options.cwd, ...(offset === undefined ? {} : { offset }), ...(limit === undefined ? {} : { limit }) });
        // The mount added the team's DUTY.md to the manifest: a subscriber hears of it before this result.
        if (res.mounted) await watch.check();
        return readToolResult(res);
      }),
  );

  const manifestText = async (): Promise<{ text: string; sha256: string }> => {
    try {
      return await source.manifest();
    } catch (err) {
      throw new ProtocolError(ProtocolErrorCode.InternalError, errorText(err, log));
    }
  };

  server.registerResource(
    'manifest',
    NAMES.manifestResource,
    {
      title: 'Knowledge manifest',
      description: 'Browsing guidance and the DUTY.md of every scope this session has (account, its team, teams mounted so far); stable across turns',
      mimeType: 'text/markdown',
      cacheHint: NEVER_CACHED,
    },
    async (uri) => {
      const m = await manifestText();
      return { contents: [{ uri: uri.href, mimeType: 'text/markdown', text: m.text, _meta: { sha256: m.sha256 } }] };
    },
  );

  server.registerPrompt(
    NAMES.manifestPrompt,
    {
      title: 'Knowledge manifest',
      description: 'The knowledge manifest as a message: put it at the start of a session and again after a context compaction',
    },
    async () => {
      const m = await manifestText();
      return { description: 'The knowledge manifest', messages: [{ role: 'user', content: { type: 'text', text: m.text } }] };
    },
  );

  if (options.fsTools) registerFsTools(server, source, options, tool);
  if (era === 'legacy') registerLegacySubscriptions(server, watch);
  watch.onChange = () => {
    server.server.sendResourceUpdated({ uri: NAMES.manifestResource }).catch((err: unknown) => log(`manifest change not sent: ${err instanceof Error ? err.message : String(err)}`));
  };
  return server;
}

/** 2025-era `resources/subscribe` and `resources/unsubscribe`: only the manifest can be subscribed to. */
function registerLegacySubscriptions(server: McpServer, watch: ManifestWatch): void {
  const manifestOnly = (uri: string) => {
    if (uri !== NAMES.manifestResource) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `${uri}: no such resource; ${NAMES.manifestResource} is the one to subscribe to`);
  };
  server.server.setRequestHandler('resources/subscribe', async (request) => {
    manifestOnly(request.params.uri);
    await watch.subscribe('legacy');
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', (request) => {
    manifestOnly(request.params.uri);
    watch.unsubscribe('legacy');
    return {};
  });
}

function registerFsTools(
  server: McpServer,
  source: KnowledgeSource,
  options: KnowledgeMcpOptions,
  tool: (body: () => Promise<ToolResult>) => Promise<ToolResult>,
): void {
  let mountpoint: string | undefined;
  const mountDir = async (path: string | undefined) => {
    mountpoint ??= (await source.status()).mountpoint;
    return resolveMountDir(path ?? 'knowledge', options.cwd, mountpoint);
  };
  const textResult = (text: string): ToolResult => ({ content: [{ type: 'text', text }] });

  server.registerTool(
    NAMES.listTool,
    {
      title: 'List a knowledge directory',
      description: 'List a directory under knowledge/ as `ls -p` would (directories end in /). Shows what is on disk; a team that is not mounted yet is not there (read one of its files with read_knowledge to mount it).',
      inputSchema: listInput,
      annotations: { title: 'List a knowledge directory', ...READ_ONLY },
    },
    ({ path, max_entries }) => tool(async () => textResult(await listDir(await mountDir(path), max_entries ?? 1000))),
  );

  server.registerTool(
    NAMES.searchTool,
    {
      title: 'Search knowledge files',
      description: 'Find lines containing a text under a knowledge/ directory, as `grep -rn -F` would: path:line:text. Searches what is on disk only.',
      inputSchema: searchInput,
      annotations: { title: 'Search knowledge files', ...READ_ONLY },
    },
    ({ pattern, path, ignore_case, max_results }) =>
      tool(async () => textResult(await searchDir(await mountDir(path), { pattern, ignoreCase: ignore_case ?? false, maxResults: max_results ?? 100 }))),
  );
}
