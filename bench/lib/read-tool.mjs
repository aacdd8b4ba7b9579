// Read-tool latency, measured where agent harnesses call it, each way in one
// run so the figures sit side by side on the same stretch of machine load:
//
//   library — `KnowledgeClient.read` from the built package (what a
//             TypeScript harness and `knowledgefs mcp` use);
//   socket  — a bare POST /read on the daemon's control socket (undici, one
//             kept-alive connection): the floor the library is compared with;
//   MCP     — `read_knowledge` through the SDK's client over stdio to
//             `knowledgefs mcp`, with its default reminder on tool results
//             and with --reminder off;
//   CLI     — `knowledgefs read`, a Node start on top.
//
// The session is `reader`'s personal session bound to the first main team
// with a 1-byte threshold, so only account + that team are materialised:
//   mounted   — files of the bound team (in the tree; each read still asks
//               the control plane for a fresh decision), measured twice:
//               first reads (a path not yet in the session's read set, so
//               the control plane makes the new entry durable before it
//               answers) and re-reads (same path, same sha256), library and
//               socket interleaved, one of each kind per round;
//   unmounted — each extra team's DUTY.md, once per team, through the library
//               (not in the tree: the control plane decides, serves, records
//               the mount, and the daemon adds the team). One sample per
//               team, so p99 over 100 samples is close to the worst one.

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { KnowledgeClient } from '../../dist/client/index.js';
import { createSession, writeToken, startMount, stopMount, socketClient, socketJson, waitPrefetch, BIN } from './knowledgefs.mjs';
import { latencySummary, summarize } from './stats.mjs';
import { log, run } from './proc.mjs';

function listFiles(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath ?? e.path, e.name));
  }
  return out.sort();
}

async function timed(fn) {
  const t0 = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, value };
}

async function socketRead(client, body) {
  const { status, json } = await socketJson(client, 'POST', '/read', body);
  if (status !== 200 || json?.ok !== true) throw new Error(`read ${body.path} → ${status} ${JSON.stringify(json).slice(0, 200)}`);
  return json;
}

/** `read_knowledge` re-reads through `knowledgefs mcp`; the first result is checked against the file. */
async function mcpRereads(socket, cwd, paths, expected, samples, extraArgs = []) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--socket', socket, ...extraArgs], env: { PATH: process.env.PATH ?? '' }, cwd, stderr: 'ignore' });
  const client = new McpClient({ name: 'bench', version: '0' });
  await client.connect(transport);
  try {
    const call = (path) => client.callTool({ name: 'read_knowledge', arguments: { path } });
    const first = await call(paths[0]);
    if (first.isError || first.content[0]?.text !== expected) throw new Error(`read_knowledge returned other bytes for ${paths[0]}: ${JSON.stringify(first).slice(0, 200)}`);
    const ms = [];
    for (let i = 0; i < samples; i++) ms.push((await timed(() => call(paths[i % paths.length]))).ms);
    return ms;
  } finally {
    await client.close();
  }
}

export async function readToolLatency(server, workDir, { viewDir, team, extraTeams, mountedSamples = 200, cliRuns = 5, mcpSamples = 100 }) {
  const session = await createSession(server, { kind: 'personal', creator: 'reader', team });
  const tokenFile = writeToken(workDir, 'reader', session.token);
  const mount = await startMount(server, tokenFile, workDir, { threshold: '1', prefetch: 'on' });
  const socket = socketClient(mount.socket);
  const library = new KnowledgeClient({ socketPath: mount.socket, cwd: mount.base });
  try {
    await waitPrefetch(mount.socket, 120_000);
    const teamDir = join(viewDir, `team_${team}`);
    const WARMUP = 10;
    const files = listFiles(teamDir);
    // Each round reads two new paths (one per client).
    const rounds = Math.min(mountedSamples, Math.floor((files.length - WARMUP) / 2));
    if (rounds < 2) throw new Error(`team_${team} has ${files.length} files; the read bench needs at least ${WARMUP + 4}`);
    const paths = files.map((f) => `knowledge/team_${team}/${relative(teamDir, f)}`);

    // Correctness first: the bytes each way returns are the file's.
    const expected = readFileSync(files[0], 'utf8');
    if ((await library.read(paths[0])).content !== expected) throw new Error(`the library returned other bytes for ${paths[0]}`);
    if ((await socketRead(socket, { path: paths[0], cwd: mount.base })).content !== expected) throw new Error(`the socket returned other bytes for ${paths[0]}`);
    for (let i = 0; i < WARMUP; i++) {
      await library.read(paths[i]);
      await socketRead(socket, { path: paths[i], cwd: mount.base });
    }

    const lib = { first: [], reread: [] };
    const raw = { first: [], reread: [] };
    for (let r = 0; r < rounds; r++) {
      const a = WARMUP + 2 * r;
      const again = (r * 7) % WARMUP;
      lib.first.push((await timed(() => library.read(paths[a]))).ms);
      raw.first.push((await timed(() => socketRead(socket, { path: paths[a + 1], cwd: mount.base }))).ms);
      lib.reread.push((await timed(() => library.read(paths[again]))).ms);
      raw.reread.push((await timed(() => socketRead(socket, { path: paths[again], cwd: mount.base }))).ms);
    }

    const unmounted = [];
    for (const x of extraTeams) {
      const { ms, value } = await timed(() => library.read(`knowledge/team_${x}/DUTY.md`));
      if (!value.mounted) throw new Error(`reading team_${x}/DUTY.md did not mount it`);
      unmounted.push(ms);
    }

    const mcp = await mcpRereads(mount.socket, mount.base, paths.slice(0, WARMUP), expected, mcpSamples);
    const mcpQuiet = await mcpRereads(mount.socket, mount.base, paths.slice(0, WARMUP), expected, mcpSamples, ['--reminder', 'off']);

    // can-load as a harness asks before offering a team's skill: the bound team and one the creator is not in, one call.
    const scopes = ['account', `team_${team}`, `team_${extraTeams[0] ?? team}`];
    const canLoad = [];
    for (let i = 0; i < mountedSamples; i++) {
      const { ms, value } = await timed(() => library.canLoad(scopes, { for: 'skill' }));
      if (value.answers.length !== scopes.length) throw new Error(`can-load answered ${value.answers.length} scopes for ${scopes.length}`);
      canLoad.push(ms);
    }
    const canLoadCli = [];
    for (let i = 0; i < cliRuns; i++) {
      const r = await run(`${process.execPath} ${BIN} can-load ${scopes.join(' ')} --for skill --json --socket '${mount.socket}' > /dev/null`, { cwd: mount.base });
      if (r.code !== 0 && r.code !== 1 && r.code !== 3) throw new Error(`knowledgefs can-load exited ${r.code}: ${r.stderr.slice(0, 200)}`);
      canLoadCli.push(r.ms);
    }

    const cli = [];
    for (let i = 0; i < cliRuns; i++) {
      const r = await run(`${process.execPath} ${BIN} read ${paths[i % paths.length]} --socket '${mount.socket}' > /dev/null`, { cwd: mount.base });
      if (r.code !== 0) throw new Error(`knowledgefs read exited ${r.code}: ${r.stderr.slice(0, 200)}`);
      cli.push(r.ms);
    }

    const result = {
      mountedFirstRead: latencySummary(lib.first),
      mountedReread: latencySummary(lib.reread),
      socketFirstRead: latencySummary(raw.first),
      socketReread: latencySummary(raw.reread),
      unmounted: latencySummary(unmounted),
      mcpReread: latencySummary(mcp),
      mcpRereadNoReminder: latencySummary(mcpQuiet),
      cliEndToEndMs: summarize(cli),
      canLoad: latencySummary(canLoad),
      canLoadCliMs: summarize(canLoadCli),
    };
    const pair = (s) => `p50 ${s.p50} ms p99 ${s.p99} ms`;
    log(`read tool (library): mounted first read ${pair(result.mountedFirstRead)}; re-read ${pair(result.mountedReread)}; unmounted ${pair(result.unmounted)}`);
    log(`read tool (bare socket): first read ${pair(result.socketFirstRead)}; re-read ${pair(result.socketReread)}; MCP re-read ${pair(result.mcpReread)}, with --reminder off ${pair(result.mcpRereadNoReminder)}; CLI median ${result.cliEndToEndMs.median?.toFixed(1)} ms`);
    log(`can-load (3 scopes, --for skill): library ${pair(result.canLoad)}; CLI median ${result.canLoadCliMs.median?.toFixed(1)} ms`);
    return result;
  } finally {
    library.close();
    await socket.close().catch(() => {});
    await stopMount(mount);
  }
}
