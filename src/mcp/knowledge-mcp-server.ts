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

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isTemporary } from '../client/errors.js';
import type { KnowledgeClient } from '../client/knowledge-client.js';
import { MAX_PATH_BYTES } from '../core/paths.js';
import { READ_OUTPUT_CAP } from '../core/wire.js';
import { listDir, resolveMountDir, searchDir } from './fs-tools.js';
import { NAMES } from './guidance.js';
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
}

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

export function createKnowledgeMcpServer(source: KnowledgeSource, options: KnowledgeMcpOptions): McpServer {
  const { log } = options;
  const server = new McpServer({ name: 'knowledgefs', version: options.version }, { instructions: options.instructions });

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
      tool(async () => readToolResult(await source.read(path, { cwd: options.cwd, ...(offset === undefined ? {} : { offset }), ...(limit === undefined ? {} : { limit }) }))),
  );

  const manifestText = async (): Promise<{ text: string; sha256: string }> => {
    try {
      return await source.manifest();
    } catch (err) {
      throw new McpError(ErrorCode.InternalError, errorText(err, log));
    }
  };

  server.registerResource(
    'manifest',
    NAMES.manifestResource,
    {
      title: 'Knowledge manifest',
      description: 'Browsing guidance and the DUTY.md of every scope this session has (account, its team, teams mounted so far); stable across turns',
      mimeType: 'text/markdown',
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
  return server;
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
