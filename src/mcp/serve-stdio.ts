// Runs an MCP server over stdin/stdout until stdin closes (the client went
// away) or a stop signal arrives, then closes it. stdout carries JSON-RPC and
// nothing else: all logging goes to the caller's stderr, and a stdout the
// client has closed (EPIPE) ends the server instead of crashing it.
//
// A client may write its requests and close stdin at once (`printf … |
// knowledgefs mcp`): requests already received are answered before the
// server closes, within `drainMs`. A message over the SDK's 10 MiB line limit
// makes the transport give up; the session then ends as `connection lost`.

import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Readable, Writable } from 'node:stream';

export interface StdioStreams {
  readonly stdin: NodeJS.ReadableStream;
  readonly stdout: NodeJS.WritableStream;
}

type Id = string | number;
const requestId = (m: JSONRPCMessage): Id | undefined => ('method' in m && 'id' in m ? m.id : undefined);
const responseId = (m: JSONRPCMessage): Id | undefined => (!('method' in m) && 'id' in m ? (m.id as Id) : undefined);

/** What ended a session: the client went away (stdin or stdout closed), a stop signal (its name), or the transport gave up. */
export type StdioEnd = 'stdin closed' | 'stdout closed' | 'connection lost' | string;

/** Resolves with what ended the session. */
export async function serveOverStdio(
  server: McpServer,
  streams: StdioStreams,
  stop: Promise<string>,
  log: (line: string) => void,
  drainMs = 65_000,
): Promise<StdioEnd> {
  const { stdin, stdout } = streams;
  let closing = false;
  const ended = new Promise<StdioEnd>((resolve) => {
    server.server.onclose = () => { if (!closing) resolve('connection lost'); };
    stdin.once('end', () => resolve('stdin closed'));
    stdin.once('close', () => resolve('stdin closed'));
    stdout.once('error', (err: NodeJS.ErrnoException) => {
      log(`stdout: ${err.code ?? err.message}`);
      resolve('stdout closed');
    });
    void stop.then(resolve);
  });
  const transport = new StdioServerTransport(stdin as Readable, stdout as Writable);
  transport.onerror = (err) => log(`bad input on stdin, skipped: ${err.message}`);
  await server.connect(transport);

  // Requests received and not answered yet, so closing can wait for them.
  const pending = new Set<Id>();
  let drained: (() => void) | undefined;
  const receive = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage) => {
    const id = requestId(message);
    if (id !== undefined) pending.add(id);
    receive?.(message);
  };
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    await send(message);
    const id = responseId(message);
    if (id !== undefined && pending.delete(id) && pending.size === 0) drained?.();
  };

  const why = await ended;
  if (why === 'stdin closed' && pending.size > 0) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => { drained = resolve; }),
      new Promise<void>((resolve) => { timer = setTimeout(resolve, drainMs); }),
    ]);
    clearTimeout(timer);
  }
  closing = true;
  await server.close().catch(() => undefined);
  stdin.pause();
  return why;
}
