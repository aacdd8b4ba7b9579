// Runs an MCP server over stdin/stdout until stdin closes (the client went
// away) or a stop signal arrives, then closes it. stdout carries JSON-RPC and
// nothing else: all logging goes to the caller's stderr, and a stdout the
// client has closed (EPIPE) ends the server instead of crashing it.
//
// The SDK's stdio entry (`serveStdio`) picks the protocol era from the
// client's opening message: `initialize` pins a 2025-era instance (2025-11-25
// and older), `server/discover` or a request carrying the 2026-07-28 envelope
// a modern one; `factory` builds the instance for that era. The entry serves
// `subscriptions/listen` itself; `observe` sees every message both ways so
// the caller can follow subscriptions (listen-tracker.ts).
//
// The wire is this file's own transport rather than the SDK's
// StdioServerTransport, which aborts unanswered requests when stdin ends and
// drops unparseable lines without a word. A client may write its requests
// and close stdin at once (`printf … | knowledgefs mcp`): requests already
// received are answered before the server closes, within `drainMs`. A line
// that is not JSON-RPC is logged and skipped. A message over the 10 MiB line
// limit makes the transport give up; the session then ends as `connection lost`.

import {
  deserializeMessage,
  serializeMessage,
  STDIO_DEFAULT_MAX_BUFFER_SIZE,
  type JSONRPCMessage,
  type McpServer,
  type Transport,
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { StringDecoder } from 'node:string_decoder';
import type { McpEra } from './knowledge-mcp-server.js';

export interface StdioStreams {
  readonly stdin: NodeJS.ReadableStream;
  readonly stdout: NodeJS.WritableStream;
}

/** Sees each message as it is received (`inbound`) and before it is written (`outbound`, which may hold the write back until it resolves). */
export interface WireObserver {
  inbound(message: JSONRPCMessage): void;
  outbound(message: JSONRPCMessage): Promise<void> | void;
}

type Id = string | number;
type Listener = Parameters<NodeJS.EventEmitter['on']>[1];
const requestId = (m: JSONRPCMessage): Id | undefined => ('method' in m && 'id' in m ? m.id : undefined);
const responseId = (m: JSONRPCMessage): Id | undefined => (!('method' in m) && 'id' in m ? (m.id as Id) : undefined);
const cancelledId = (m: JSONRPCMessage): Id | undefined =>
  'method' in m && m.method === 'notifications/cancelled' ? ((m.params as { requestId?: Id } | undefined)?.requestId) : undefined;

/** What ended a session: the client went away (stdin or stdout closed), a stop signal (its name), or the transport gave up. */
export type StdioEnd = 'stdin closed' | 'stdout closed' | 'connection lost' | string;

export interface ServeStdioOptions {
  readonly log: (line: string) => void;
  readonly observe?: WireObserver;
  readonly drainMs?: number;
}

/** Resolves with what ended the session. */
export async function serveOverStdio(
  factory: (era: McpEra) => McpServer,
  streams: StdioStreams,
  stop: Promise<string>,
  options: ServeStdioOptions,
): Promise<StdioEnd> {
  const { log } = options;
  const wire = new LineTransport(streams, log, options.observe);
  void stop.then((signal) => wire.end(signal));
  const entry = serveStdio(({ era }) => factory(era), {
    transport: wire,
    onerror: (err) => log(`${err.message}`),
  });
  const why = await wire.ended;
  if (why === 'stdin closed') await wire.drained(options.drainMs ?? 65_000);
  await entry.close().catch(() => undefined);
  streams.stdin.pause();
  return why;
}

/** JSON-RPC as one message per line over the given streams, ended by the first of stdin closing, stdout failing, a stop, or an oversized line. */
class LineTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly ended: Promise<StdioEnd>;
  private resolveEnded!: (why: StdioEnd) => void;
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';
  private bufferBytes = 0;
  private closed = false;
  /** Requests received and not answered yet, so closing can wait for them (a listen is answered only when it ends). */
  private readonly pending = new Set<Id>();
  private whenDrained: (() => void) | undefined;
  private readonly listeners: [NodeJS.EventEmitter, string, Listener][] = [];

  constructor(
    private readonly streams: StdioStreams,
    private readonly log: (line: string) => void,
    private readonly observe: WireObserver | undefined,
  ) {
    this.ended = new Promise((resolve) => { this.resolveEnded = resolve; });
  }

  end(why: StdioEnd): void {
    this.resolveEnded(why);
  }

  async start(): Promise<void> {
    const { stdin, stdout } = this.streams;
    this.on(stdin, 'data', (chunk: Buffer | string) => this.receive(chunk));
    this.on(stdin, 'end', () => this.end('stdin closed'));
    this.on(stdin, 'close', () => this.end('stdin closed'));
    this.on(stdout, 'error', (err: NodeJS.ErrnoException) => {
      this.log(`stdout: ${err.code ?? err.message}`);
      this.end('stdout closed');
    });
  }

  /** Waits until every request received has been answered, or `ms` passed. */
  async drained(ms: number): Promise<void> {
    if (this.pending.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => { this.whenDrained = resolve; }),
      new Promise<void>((resolve) => { timer = setTimeout(resolve, ms); }),
    ]);
    clearTimeout(timer);
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new Error('the stdio connection is closed');
    await this.observe?.outbound(message);
    const { stdout } = this.streams;
    await new Promise<void>((resolve, reject) => {
      stdout.write(serializeMessage(message), (err) => (err ? reject(err) : resolve()));
    });
    const id = responseId(message);
    if (id !== undefined) this.answered(id);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [emitter, event, fn] of this.listeners) emitter.off(event, fn);
    this.onclose?.();
  }

  private on(emitter: NodeJS.EventEmitter, event: string, fn: Listener): void {
    emitter.on(event, fn);
    this.listeners.push([emitter, event, fn]);
  }

  private answered(id: Id): void {
    if (this.pending.delete(id) && this.pending.size === 0) this.whenDrained?.();
  }

  private receive(chunk: Buffer | string): void {
    const text = this.decoder.write(chunk); // a string chunk comes back as it is
    this.bufferBytes += Buffer.byteLength(text);
    if (this.bufferBytes > STDIO_DEFAULT_MAX_BUFFER_SIZE) {
      this.buffer = '';
      this.onerror?.(new Error(`ReadBuffer exceeded maximum size of ${STDIO_DEFAULT_MAX_BUFFER_SIZE} bytes`));
      this.end('connection lost');
      return;
    }
    this.buffer += text;
    let newline: number;
    while (!this.closed && (newline = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, newline).replace(/\r$/, '');
      this.buffer = this.buffer.slice(newline + 1);
      if (line.trim() === '') continue;
      let message: JSONRPCMessage;
      try {
        message = deserializeMessage(line);
      } catch (err) {
        this.log(`bad input on stdin, skipped: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
        continue;
      }
      this.deliver(message);
    }
    this.bufferBytes = Buffer.byteLength(this.buffer);
  }

  private deliver(message: JSONRPCMessage): void {
    this.observe?.inbound(message);
    const id = requestId(message);
    if (id !== undefined && !('method' in message && message.method === 'subscriptions/listen')) this.pending.add(id);
    const cancelled = cancelledId(message);
    if (cancelled !== undefined) this.answered(cancelled);
    this.onmessage?.(message);
  }
}

