// The stdio wire of `knowledgefs mcp` message by message (serve-stdio.ts), in
// this process over in-memory streams against a daemon's real control socket:
// which messages it waits for when stdin closes, which stdin endings it
// hears, the 10 MiB line limit at its edge, several messages in one chunk,
// and that a session that has ended leaves nothing attached to the streams.
// The tests of what the server answers over the same wire are in
// mcp-in-process.test.ts.

import { STDIO_DEFAULT_MAX_BUFFER_SIZE } from '@modelcontextprotocol/server';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startMemoryDaemon, type MemoryDaemon } from './helpers/memory-daemon.js';
import { initialize, line, readCall, serveRawStdio, type RawStdioOptions } from './helpers/mcp-stdio-raw.js';

let daemon: MemoryDaemon;
beforeEach(async () => { daemon = await startMemoryDaemon(); });
afterEach(async () => { await daemon.close(); });

const serve = (opts: RawStdioOptions = {}) => serveRawStdio(daemon.socketPath, opts);
const never = () => new Promise<never>(() => undefined);

async function initialized(opts: RawStdioOptions = {}) {
  const s = serve(opts);
  s.stdin.write(line(initialize));
  expect((await s.answered(1))?.result).toBeDefined();
  return s;
}

describe('MCP stdio wire: what closing stdin waits for', () => {
  it('does not wait on a response the client sent: only requests are owed an answer', async () => {
    const s = await initialized({ drainMs: 20_000 });
    const started = Date.now();
    s.stdin.end(line({ jsonrpc: '2.0', id: 50, result: {} }));
    expect(await s.ended).toBe('stdin closed');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('takes only a cancellation as the end of a request, not a notification that names it', async () => {
    daemon.backend.read = never;
    const s = await initialized({ drainMs: 300 });
    s.stdin.write(line(readCall(2)));
    const started = Date.now();
    s.stdin.end(line({ jsonrpc: '2.0', method: 'notifications/progress', params: { requestId: 2, progressToken: 2, progress: 1 } }));
    expect(await s.ended).toBe('stdin closed');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('skips a cancellation without params, and still answers', async () => {
    const s = await initialized();
    s.stdin.write(line({ jsonrpc: '2.0', method: 'notifications/cancelled' }));
    s.stdin.write(line(readCall(2)));
    expect((await s.answered(2))?.result?.content?.[0]?.text).toBe('# Account\n');
    s.stdin.end();
    expect(await s.ended).toBe('stdin closed');
  });
});

describe('MCP stdio wire: the streams', () => {
  it('answers with no observer following the wire', async () => {
    const s = await initialized({ observe: false });
    s.stdin.write(line(readCall(2)));
    expect((await s.answered(2))?.result?.content?.[0]?.text).toBe('# Account\n');
    s.stdin.end();
    expect(await s.ended).toBe('stdin closed');
  });

  it('ends when stdin is destroyed without ending, and when it ends without closing', async () => {
    const destroyed = await initialized();
    destroyed.stdin.destroy();
    expect(await destroyed.ended).toBe('stdin closed');

    const open = await initialized({ stdin: new PassThrough({ autoDestroy: false, emitClose: false }) });
    open.stdin.end();
    expect(await open.ended).toBe('stdin closed');
  });

  it('leaves no listener on stdin or stdout once the session has ended', async () => {
    const s = serve();
    const counts = () => ({
      stdin: ['data', 'end', 'close'].map((e) => s.stdin.listenerCount(e)),
      stdout: s.stdout.listenerCount('error'),
    });
    s.stdin.write(line(initialize));
    await s.answered(1);
    expect(counts()).toEqual({ stdin: [1, 1, 1], stdout: 1 });
    s.stdin.end();
    await s.ended;
    expect(counts()).toEqual({ stdin: [0, 0, 0], stdout: 0 });
  });
});

describe('MCP stdio wire: lines', () => {
  it('takes two messages written in one chunk as two', async () => {
    const s = await initialized();
    s.stdin.write(line(readCall(2)) + line(readCall(3, 'knowledge/team_storage/DUTY.md')));
    expect((await s.answered(2))?.result?.content?.[0]?.text).toBe('# Account\n');
    expect((await s.answered(3))?.result).toMatchObject({ isError: true });
    expect(s.logs.filter((l) => l.startsWith('bad input'))).toEqual([]);
    s.stdin.end();
    await s.ended;
  });

  it('logs a skipped line with the first line of why it was refused', async () => {
    const s = await initialized();
    s.stdin.write('{"jsonrpc":"2.0","id":\n');
    s.stdin.write(line(readCall(2)));
    await s.answered(2);
    const logged = s.logs.filter((l) => l.startsWith('bad input on stdin, skipped: '));
    expect(logged).toHaveLength(1);
    expect(logged[0]!.length).toBeGreaterThan('bad input on stdin, skipped: '.length + 10);
    s.stdin.end();
    await s.ended;
  });

  it('takes a line of exactly the 10 MiB limit, newline included', async () => {
    const s = await initialized();
    const call = readCall(2);
    const padded = JSON.stringify({ ...call, params: { ...call.params, arguments: { ...call.params.arguments, pad: '' } } });
    const body = padded.replace('"pad":""', `"pad":"${'p'.repeat(STDIO_DEFAULT_MAX_BUFFER_SIZE - Buffer.byteLength(padded) - 1)}"`);
    expect(Buffer.byteLength(`${body}\n`)).toBe(STDIO_DEFAULT_MAX_BUFFER_SIZE);
    s.stdin.write(`${body}\n`);
    // Not given up on: the line is taken, and refused by the tool's schema (no `pad` argument).
    expect((await s.answered(2))?.result).toMatchObject({ isError: true });
    s.stdin.end();
    expect(await s.ended).toBe('stdin closed');
    expect(s.logs.filter((l) => l.startsWith('ReadBuffer'))).toEqual([]);
  });
});
