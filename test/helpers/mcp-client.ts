// The SDK's real MCP client talking to `node bin/knowledgefs.js mcp …` over
// stdio, as a harness starts it: an explicit environment (only what the SDK
// passes by default, plus PATH; no KNOWLEDGEFS_SOCKET), stderr piped and kept.
//
//   const m = await connectMcp(['--socket', d.socketPath]);
//   const r = await m.client.callTool({ name: 'read_knowledge', arguments: { path: 'knowledge/account/DUTY.md' } });
//   await m.close();

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { BIN } from './mount.js';

export interface McpConnection {
  readonly client: Client;
  readonly transport: StdioClientTransport;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  close(): Promise<void>;
}

export interface TextContent {
  readonly type: 'text';
  readonly text: string;
}

export interface CallResult {
  readonly content: TextContent[];
  readonly isError?: boolean;
  readonly _meta?: Record<string, unknown>;
}

export async function connectMcp(args: readonly string[], opts: { cwd?: string } = {}): Promise<McpConnection> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stderr: 'pipe',
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => { stderr += d.toString('utf8'); });
  const client = new Client({ name: 'knowledgefs-test', version: '0.0.0' });
  await client.connect(transport);
  return {
    client,
    transport,
    stderr: () => stderr,
    close: () => client.close(),
  };
}

/** tools/call, typed as the text-only results knowledgefs returns. */
export async function call(m: McpConnection, name: string, args: Record<string, unknown>): Promise<CallResult> {
  return (await m.client.callTool({ name, arguments: args })) as unknown as CallResult;
}
