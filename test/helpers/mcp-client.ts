// The SDK's real MCP clients talking to `node bin/knowledgefs.js mcp …` over
// stdio, as a harness starts it: an explicit environment (only what the SDK
// passes by default, plus PATH; no KNOWLEDGEFS_SOCKET), stderr piped and kept.
// One client per protocol revision the server speaks:
//
//   2026-07-28   the 2.x client (`@modelcontextprotocol/client`), pinned to it: `server/discover`, `subscriptions/listen`
//   2025-11-25   the 1.x client (`@modelcontextprotocol/sdk`), as it ships: `initialize`, `resources/subscribe`
//   2025-06-18   the 1.x client asking for that revision in its `initialize` (the one field a transport wrapper rewrites)
//
//   const m = await connectMcp(['--socket', d.socketPath], { revision: '2025-11-25' });
//   const r = await call(m, 'read_knowledge', { path: 'knowledge/account/DUTY.md' });
//   await m.close();

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as LegacyStdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Transport as LegacyTransport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage as LegacyMessage } from '@modelcontextprotocol/sdk/types.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { BIN } from './mount.js';

export const REVISIONS = ['2026-07-28', '2025-11-25', '2025-06-18'] as const;
export type Revision = (typeof REVISIONS)[number];
export const MANIFEST_URI = 'knowledgefs://manifest';

export interface TextContent {
  readonly type: 'text';
  readonly text: string;
}

export interface CallResult {
  readonly content: TextContent[];
  readonly isError?: boolean;
  readonly _meta?: Record<string, unknown>;
}

/** What the tests use of a client; both SDK generations have it. */
export interface McpClient {
  listTools(): Promise<{ tools: { name: string; annotations?: unknown; inputSchema: unknown }[] }>;
  callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown>;
  listResources(): Promise<{ resources: unknown[] }>;
  readResource(params: { uri: string }): Promise<{ contents: unknown[]; [k: string]: unknown }>;
  listPrompts(): Promise<{ prompts: { name: string }[] }>;
  getPrompt(params: { name: string }): Promise<{ messages: unknown[] }>;
  getInstructions(): string | undefined;
  close(): Promise<void>;
}

export interface McpConnection {
  readonly client: McpClient;
  readonly revision: Revision;
  /** The revision the server agreed to. */
  negotiated(): string | undefined;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** The server process's pid (null once it has exited). */
  pid(): number | null;
  /** Subscribes to the manifest the way this revision does; resolves once the server has accepted. */
  subscribeManifest(): Promise<{ close(): Promise<void> }>;
  /** How many `notifications/resources/updated` for the manifest arrived so far. */
  manifestUpdates(): number;
  /** Resolves when the manifest update count reaches `n` (fails the test on timeout). */
  waitForManifestUpdates(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function connectMcp(args: readonly string[], opts: { cwd?: string; revision?: Revision } = {}): Promise<McpConnection> {
  const revision = opts.revision ?? '2026-07-28';
  const params = {
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stderr: 'pipe' as const,
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
  };
  let stderr = '';
  let updates = 0;
  const waiters: (() => void)[] = [];
  const onUpdate = (uri: string) => {
    if (uri !== MANIFEST_URI) return;
    updates++;
    for (const w of waiters.splice(0)) w();
  };
  const common = {
    revision,
    stderr: () => stderr,
    manifestUpdates: () => updates,
    async waitForManifestUpdates(n: number, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (updates < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`waited ${timeoutMs} ms for manifest update ${n}, saw ${updates}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => { clearTimeout(timer); resolve(); });
        });
      }
    },
  };

  if (revision === '2026-07-28') {
    const transport = new StdioClientTransport(params);
    transport.stderr?.on('data', (d: Buffer) => { stderr += d.toString('utf8'); });
    const client = new Client({ name: 'knowledgefs-test', version: '0.0.0' }, { versionNegotiation: { mode: { pin: revision } } });
    client.setNotificationHandler('notifications/resources/updated', (n) => onUpdate(n.params.uri));
    await client.connect(transport);
    return {
      ...common,
      client: client as unknown as McpClient,
      negotiated: () => client.getNegotiatedProtocolVersion(),
      pid: () => transport.pid,
      async subscribeManifest() {
        const sub = await client.listen({ resourceSubscriptions: [MANIFEST_URI] });
        return { close: () => sub.close() };
      },
      close: () => client.close(),
    };
  }

  const inner = new LegacyStdioClientTransport(params);
  inner.stderr?.on('data', (d: Buffer) => { stderr += d.toString('utf8'); });
  let negotiated: string | undefined;
  const transport = askingFor(revision, inner, (v) => { negotiated = v; });
  const client = new LegacyClient({ name: 'knowledgefs-test', version: '0.0.0' });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => onUpdate(n.params.uri));
  await client.connect(transport);
  return {
    ...common,
    client: client as unknown as McpClient,
    negotiated: () => negotiated,
    pid: () => inner.pid,
    async subscribeManifest() {
      await client.subscribeResource({ uri: MANIFEST_URI });
      return { close: async () => { await client.unsubscribeResource({ uri: MANIFEST_URI }); } };
    },
    close: () => client.close(),
  };
}

/** The 1.x transport, with the `initialize` request asking for `revision` and the server's answer reported. */
function askingFor(revision: Revision, inner: LegacyStdioClientTransport, agreed: (version: string) => void): LegacyTransport {
  let initializeId: unknown;
  const wrapper: LegacyTransport = {
    start: () => inner.start(),
    close: () => inner.close(),
    send: (message: LegacyMessage) => {
      if ('method' in message && message.method === 'initialize' && 'id' in message) {
        initializeId = message.id;
        message = { ...message, params: { ...message.params, protocolVersion: revision } };
      }
      return inner.send(message);
    },
  };
  inner.onmessage = (message) => {
    if ('id' in message && message.id === initializeId && 'result' in message) agreed(String((message.result as { protocolVersion?: unknown }).protocolVersion));
    wrapper.onmessage?.(message);
  };
  inner.onclose = () => wrapper.onclose?.();
  inner.onerror = (err) => wrapper.onerror?.(err);
  return wrapper;
}

const SERVER_INFO_META_KEY = 'io.modelcontextprotocol/serverInfo';

/**
 * tools/call, typed as the text-only results knowledgefs returns, without the
 * server's identity the 2026-07-28 revision adds to every result's `_meta`,
 * so a result reads the same on every revision.
 */
export async function call(m: McpConnection, name: string, args: Record<string, unknown>): Promise<CallResult> {
  const { _meta, ...rest } = (await m.client.callTool({ name, arguments: args })) as CallResult;
  const { [SERVER_INFO_META_KEY]: serverInfo, ...meta } = _meta ?? {};
  if (m.revision === '2026-07-28') expect(serverInfo).toEqual({ name: 'knowledgefs', version: expect.any(String) });
  return { ...rest, ...(_meta === undefined ? {} : { _meta: meta }) };
}
