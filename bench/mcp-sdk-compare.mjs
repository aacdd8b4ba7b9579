// `read_knowledge` latency through `knowledgefs mcp`, this build against
// another one (an earlier commit's build, e.g. on the previous MCP SDK), in
// one run, against one control socket over an in-memory backend (no control
// plane: what differs is the MCP server and its SDK). The calls are
// interleaved, one per server per round, so both see the same machine load.
//
//   node bench/mcp-sdk-compare.mjs --other /tmp/kfs-old/bin/knowledgefs.js [--calls 200]
//
// Servers and clients compared:
//   this  @ 2026-07-28   this build, the 2.x SDK client (`@modelcontextprotocol/client`), pinned
//   this  @ 2025-11-25   this build, the 1.x SDK client (`@modelcontextprotocol/sdk`)
//   other @ 2025-11-25   the other build, the 1.x SDK client
// Each call is a re-read of one small file with the default reminder on
// tool results, so the daemon is asked for a read and a reminder per call.

import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as LegacyStdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startControlSocket } from '../dist/daemon/socket/control-socket.js';
import { latencySummary } from './lib/stats.mjs';

const { values } = parseArgs({ options: { other: { type: 'string' }, calls: { type: 'string', default: '200' }, warmup: { type: 'string', default: '20' } } });
if (values.other === undefined) throw new Error('give --other PATH, the bin/knowledgefs.js of the build to compare with');
const CALLS = Number(values.calls);
const WARMUP = Number(values.warmup);
const THIS_BIN = resolve(import.meta.dirname, '..', 'bin', 'knowledgefs.js');

const TEXT = '# Account\nShared policies.\n';
const sha = (b) => createHash('sha256').update(b).digest('hex');
const backend = {
  mountpoint: '/bench/knowledge',
  hasFile: () => true,
  async read(req) {
    const bytes = Buffer.from(TEXT);
    return { path: req.path, sha256: sha(bytes), size: bytes.length, contentBase64: bytes.toString('base64'), mounted: false };
  },
  async manifest() { return { text: 'MANIFEST\n', sha256: sha('MANIFEST\n') }; },
  async reminder() { return { text: "Today's date is 2026-12-01.\n", date: '2026-12-01', changed: [], deleted: [] }; },
  async refreshPlan() {},
  status() { return { mountpoint: '/bench/knowledge', sessionId: 's', planVersion: 'v', files: 1, scopes: ['account'], prefetch: { done: 0, total: 0 } }; },
};

const dir = mkdtempSync(join(tmpdir(), 'kfs-mcp-bench-'));
const socketPath = join(dir, 'control.sock');
const sock = await startControlSocket(socketPath, backend);

async function connect(label, bin, modern) {
  const params = { command: process.execPath, args: [bin, 'mcp', '--socket', socketPath], env: { PATH: process.env.PATH ?? '' }, stderr: 'ignore' };
  const client = modern
    ? new Client({ name: 'bench', version: '0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
    : new LegacyClient({ name: 'bench', version: '0' });
  await client.connect(modern ? new StdioClientTransport(params) : new LegacyStdioClientTransport(params));
  return { label, client, samples: [] };
}

const servers = [
  await connect('this @ 2026-07-28 (2.x client)', THIS_BIN, true),
  await connect('this @ 2025-11-25 (1.x client)', THIS_BIN, false),
  await connect('other @ 2025-11-25 (1.x client)', resolve(values.other), false),
];
try {
  for (let round = 0; round < WARMUP + CALLS; round++) {
    for (const s of servers) {
      const t0 = process.hrtime.bigint();
      const r = await s.client.callTool({ name: 'read_knowledge', arguments: { path: 'knowledge/account/DUTY.md' } });
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (r.content?.[0]?.text !== TEXT) throw new Error(`${s.label}: unexpected result ${JSON.stringify(r).slice(0, 200)}`);
      if (round >= WARMUP) s.samples.push(ms);
    }
  }
} finally {
  for (const s of servers) await s.client.close();
  await sock.close();
  rmSync(dir, { recursive: true, force: true });
}
const base = latencySummary(servers[2].samples);
for (const s of servers) {
  const l = latencySummary(s.samples);
  console.log(`${s.label.padEnd(34)} p50 ${l.p50.toFixed(2)} ms  p90 ${l.p90.toFixed(2)}  p99 ${l.p99.toFixed(2)}  (${(l.p50 / base.p50).toFixed(2)}× other p50)`);
}
console.log(`node ${process.version}, ${CALLS} calls each after ${WARMUP} warm-up, load average ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')}`);
