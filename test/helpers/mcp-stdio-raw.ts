// serveOverStdio over in-memory streams, as `knowledgefs mcp` runs it, against
// a daemon's control socket: the raw lines it wrote, what it logged, and how
// the session ended. For tests of the stdio wire itself, where the SDK's
// clients would hide what goes over it.

import { PassThrough } from 'node:stream';
import { KnowledgeClient } from '../../src/client/knowledge-client.js';
import { createKnowledgeMcpServer } from '../../src/mcp/knowledge-mcp-server.js';
import { manifestListenTracker } from '../../src/mcp/listen-tracker.js';
import { ManifestWatch } from '../../src/mcp/manifest-watch.js';
import { serveOverStdio } from '../../src/mcp/serve-stdio.js';

export interface RawStdioOptions {
  readonly stop?: Promise<string>;
  readonly drainMs?: number;
  /** Follow listens with the manifest watch, as the command does (the default), or serve with no observer. */
  readonly observe?: boolean;
  /** The stdin stream to serve; a PassThrough by default. */
  readonly stdin?: PassThrough;
}

export type RawMessage = { id?: number; result?: { content?: { text: string }[] }; error?: { code: number } };

export function serveRawStdio(socketPath: string, opts: RawStdioOptions = {}) {
  const logs: string[] = [];
  const log = (line: string) => { logs.push(line); };
  const kfs = new KnowledgeClient({ socketPath, cwd: '/' });
  const watch = new ManifestWatch({ sha256: async () => (await kfs.manifest()).sha256, intervalMs: 3_600_000, log });
  const stdin = opts.stdin ?? new PassThrough();
  const stdout = new PassThrough();
  let out = '';
  stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
  const options = { reminder: 'off' as const, fsTools: false, instructions: 'i', cwd: '/', version: '1', log, watch };
  const ended = serveOverStdio((era) => createKnowledgeMcpServer(kfs, options, era), { stdin, stdout }, opts.stop ?? new Promise<string>(() => undefined), {
    log,
    ...(opts.observe === false ? {} : { observe: manifestListenTracker(watch) }),
    ...(opts.drainMs === undefined ? {} : { drainMs: opts.drainMs }),
  }).finally(() => { watch.close(); kfs.close(); });
  const messages = () => out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as RawMessage);
  const answered = async (id: number) => {
    for (let i = 0; i < 400 && !messages().some((m) => m.id === id); i++) await new Promise((r) => setTimeout(r, 10));
    return messages().find((m) => m.id === id);
  };
  return { stdin, stdout, logs, ended, messages, answered, raw: () => out };
}

export const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };
export const readCall = (id: number, path = 'knowledge/account/DUTY.md') => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'read_knowledge', arguments: { path } } });
export const line = (m: unknown) => `${typeof m === 'string' ? m : JSON.stringify(m)}\n`;
