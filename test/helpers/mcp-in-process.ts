// The MCP server of `knowledgefs mcp`, wired as the command wires it
// (src/cli/commands/mcp.ts: KnowledgeClient, ManifestWatch, the listen
// tracker, serveOverStdio), but in this process over a pair of in-memory
// streams, with the SDK's real clients on the other end (2.x pinned to
// 2026-07-28, or 1.x speaking 2025-11-25). Runs src/ itself, so StrykerJS can
// see which mutants these tests kill; the built CLI over real stdio is
// mcp-server.test.ts.
//
//   const m = await startInProcessMcp({ socketPath: d.socketPath, fsTools: true });
//   const r = await call(m, 'read_knowledge', { path: 'knowledge/account/DUTY.md' });
//   await m.close();   // ends "stdin", waits for the server to stop; m.ended() says why

import { Client } from '@modelcontextprotocol/client';
import type { JSONRPCMessage } from '@modelcontextprotocol/server';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { PassThrough } from 'node:stream';
import { KnowledgeClient } from '../../src/client/knowledge-client.js';
import { guidanceText } from '../../src/mcp/guidance.js';
import { createKnowledgeMcpServer, type ReminderMode } from '../../src/mcp/knowledge-mcp-server.js';
import { manifestListenTracker } from '../../src/mcp/listen-tracker.js';
import { ManifestWatch } from '../../src/mcp/manifest-watch.js';
import { serveOverStdio, type StdioEnd } from '../../src/mcp/serve-stdio.js';
import { MANIFEST_URI, type McpClient, type McpConnection } from './mcp-client.js';

/** JSON-RPC lines over two streams: the client's half of a stdio connection. */
export class StreamClientTransport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private closed = false;

  constructor(
    private readonly toServer: PassThrough,
    private readonly fromServer: PassThrough,
  ) {}

  async start(): Promise<void> {
    let buffer = '';
    this.fromServer.setEncoding('utf8');
    this.fromServer.on('data', (chunk: string) => {
      buffer += chunk;
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.trim() !== '') this.onmessage?.(JSON.parse(line) as JSONRPCMessage);
      }
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    this.toServer.write(`${JSON.stringify(message)}\n`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.toServer.end();
    this.onclose?.();
  }
}

export interface InProcessMcpOptions {
  readonly socketPath: string;
  readonly revision?: '2026-07-28' | '2025-11-25';
  readonly fsTools?: boolean;
  readonly reminder?: ReminderMode;
  readonly instructions?: string;
  readonly cwd?: string;
  readonly manifestPollMs?: number;
}

export interface InProcessMcp extends McpConnection {
  /** Every line the server logged so far. */
  readonly logs: string[];
  readonly watch: ManifestWatch;
  /** What ended the server (after close). */
  ended(): Promise<StdioEnd>;
}

export async function startInProcessMcp(opts: InProcessMcpOptions): Promise<InProcessMcp> {
  const revision = opts.revision ?? '2026-07-28';
  const logs: string[] = [];
  const log = (line: string) => { logs.push(line); };
  const cwd = opts.cwd ?? '/';
  const kfs = new KnowledgeClient({ socketPath: opts.socketPath, cwd });
  const fsTools = opts.fsTools ?? false;
  const watch = new ManifestWatch({ sha256: async () => (await kfs.manifest()).sha256, intervalMs: opts.manifestPollMs ?? 3_600_000, log });
  const serverOptions = { reminder: opts.reminder ?? 'tool-result', fsTools, instructions: opts.instructions ?? guidanceText(fsTools), cwd, version: '9.9.9', log, watch };
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const serving = serveOverStdio((era) => createKnowledgeMcpServer(kfs, serverOptions, era), { stdin, stdout }, new Promise<string>(() => undefined), {
    log,
    observe: manifestListenTracker(watch),
    drainMs: 5_000,
  }).finally(() => {
    watch.close();
    kfs.close();
  });
  const transport = new StreamClientTransport(stdin, stdout);

  let updates = 0;
  const waiters: (() => void)[] = [];
  const onUpdate = (uri: string) => {
    if (uri !== MANIFEST_URI) return;
    updates++;
    for (const w of waiters.splice(0)) w();
  };
  const common = {
    revision,
    logs,
    watch,
    ended: () => serving,
    stderr: () => logs.join('\n'),
    pid: () => process.pid,
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
    const client = new Client({ name: 'knowledgefs-test', version: '0.0.0' }, { versionNegotiation: { mode: { pin: revision } } });
    client.setNotificationHandler('notifications/resources/updated', (n) => onUpdate(n.params.uri));
    await client.connect(transport as never);
    return {
      ...common,
      client: client as unknown as McpClient,
      negotiated: () => client.getNegotiatedProtocolVersion(),
      async subscribeManifest() {
        const sub = await client.listen({ resourceSubscriptions: [MANIFEST_URI] });
        return { close: () => sub.close() };
      },
      async close() {
        await client.close();
        await serving;
      },
    };
  }
  const client = new LegacyClient({ name: 'knowledgefs-test', version: '0.0.0' });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => onUpdate(n.params.uri));
  await client.connect(transport as never);
  return {
    ...common,
    client: client as unknown as McpClient,
    negotiated: () => client.getServerVersion()?.version,
    async subscribeManifest() {
      await client.subscribeResource({ uri: MANIFEST_URI });
      return { close: async () => { await client.unsubscribeResource({ uri: MANIFEST_URI }); } };
    },
    async close() {
      await client.close();
      await serving;
    },
  };
}
