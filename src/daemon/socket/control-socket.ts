// The daemon's local control socket: HTTP over a unix socket (mode 0600, no
// token) serving the read tool, manifest, reminder and status to processes in
// the runner. The runner token stays in the daemon; whoever can open the
// socket acts for the session, so its mode and its directory (only the
// daemon's user or root can change it: socket-directory.ts) are the gate.
//
// The read flow (DESIGN.md "Read tool"):
//   resolve the typed path → mount = file not in the tree → the control plane
//   decides afresh (even for a file in the tree: a local read succeeding is no
//   authorisation), asked for one page (offset/limit, in characters): the
//   control plane cuts it from the file it verified, and the page is checked
//   against its hash → if the read mounted a team, the plan is refreshed
//   before answering, so `ls` shows the team as soon as the command returns.
// A not_found answer is rewritten to the one "no such file" message that only
// echoes the typed path, so a personal session's hidden denial cannot be told
// apart from a missing file by its bytes.
//
// Handlers take and return plain data (`handleControlRequest`); only
// `startControlSocket` knows about HTTP and the socket file.

import { lstatSync, unlinkSync } from 'node:fs';
import type * as Http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { KnowledgeError, errorCodeOf, isKnowledgeError, type ErrorCode } from '../../core/errors.js';
import { noSuchFileMessage, resolveKnowledgePath } from '../../core/local/knowledge-path.js';
import { pageSha256, sliceChars } from '../../core/read-page.js';
import { sha256Hex } from '../../core/sha256.js';
import {
  HTTP_STATUS,
  READ_OUTPUT_CAP,
  type CanLoadRequest,
  type CanLoadResponse,
  type DaemonStatus,
  type LocalReadRequest,
  type LocalReadResult,
  type ManifestResponse,
  type ReadRequest,
  type ReadResponse,
  type ReminderResponse,
} from '../../core/wire.js';
import { prepareSocketDirectory, SOCKET_UMASK, socketUmaskFor, withSocketUmask } from './socket-directory.js';
import { parseCanLoadRequest } from '../../core/can-load-request.js';

export interface ReadToolBackend {
  readonly mountpoint: string;
  hasFile(scopePath: string): boolean;
  read(req: ReadRequest): Promise<ReadResponse>; // throws KnowledgeError(not_found | denied | membership_unavailable | unavailable | integrity) with the server's message
  canLoad(req: CanLoadRequest): Promise<CanLoadResponse>; // refusals are answers; throws only when the control plane gives none
  manifest(): Promise<ManifestResponse>;
  reminder(): Promise<ReminderResponse>;
  refreshPlan(): Promise<void>;
  status(): DaemonStatus | Promise<DaemonStatus>;
}

/** Largest request body the socket accepts; a read request is a path and two numbers. */
export const MAX_REQUEST_BYTES = 64 * 1024;

export interface ControlReply {
  readonly status: number;
  readonly body: unknown;
}

type Log = (line: string) => void;

// node:http through require, not an ES import: on Node 22 and later the import also loads Node's bundled undici
// (~40 ms of a start; docs/PERFORMANCE.md, "node:http through require").
const http = createRequire(import.meta.url)('node:http') as typeof Http;

function checkCount(name: string, value: unknown, min: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new KnowledgeError('invalid_argument', `${name} must be an integer ≥ ${min}`);
  }
  return value;
}

function parseReadRequest(body: unknown): LocalReadRequest {
  if (typeof body !== 'object' || body === null) throw new KnowledgeError('invalid_argument', 'request body must be a JSON object');
  const { path, cwd, offset, limit } = body as Record<string, unknown>;
  if (typeof path !== 'string') throw new KnowledgeError('invalid_argument', 'request needs "path" (string)');
  if (typeof cwd !== 'string') throw new KnowledgeError('invalid_argument', 'request needs "cwd" (string)');
  const o = checkCount('offset', offset, 0);
  const l = checkCount('limit', limit, 1);
  return { path, cwd, ...(o === undefined ? {} : { offset: o }), ...(l === undefined ? {} : { limit: l }) };
}

/** The read tool, as plain data in and out. */
export async function localRead(backend: ReadToolBackend, req: LocalReadRequest, log: Log = () => {}): Promise<LocalReadResult> {
  const offset = req.offset ?? 0;
  const limit = Math.min(req.limit ?? READ_OUTPUT_CAP, READ_OUTPUT_CAP);
  const { scopePath, display } = resolveKnowledgePath(req.path, req.cwd, backend.mountpoint);
  const mount = !backend.hasFile(scopePath);

  let response: ReadResponse;
  try {
    response = await backend.read({ path: scopePath, mount, offset, limit });
  } catch (err) {
    if (isKnowledgeError(err) && err.code === 'not_found') throw new KnowledgeError('not_found', noSuchFileMessage(req.path));
    throw err;
  }

  const { content, totalChars } = checkedPage(response, offset, limit, scopePath, req.path, log);
  if (response.mounted) {
    try {
      await backend.refreshPlan();
    } catch (err) {
      // The read itself succeeded and is recorded; the sync loop will bring the team in.
      log(`read ${scopePath} mounted a team but the plan refresh failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  const shownEnd = Math.min(totalChars, offset + limit);
  return {
    ok: true,
    path: display,
    content,
    sha256: response.sha256,
    size: response.size,
    offset,
    truncated: shownEnd < totalChars,
    totalChars,
    mounted: response.mounted,
  };
}

/**
 * The page the control plane cut, checked against its own hash, or (a
 * control plane that predates pages answers the whole file) the file checked
 * against its sha256 and cut here. Content that does not match is discarded.
 */
function checkedPage(response: ReadResponse, offset: number, limit: number, scopePath: string, typed: string, log: Log): { content: string; totalChars: number } {
  const discard = (got: string, want: string): never => {
    log(`read ${scopePath}: content does not match its sha256 (${got} vs ${want}), discarded`);
    throw new KnowledgeError('integrity', `${typed}: the content received does not match its checksum; nothing was shown, try again`);
  };
  if (response.page !== undefined) {
    const page = response.page;
    const got = pageSha256(page.content);
    if (got !== page.contentSha256 || page.offset !== offset) discard(got, page.contentSha256);
    return { content: page.content, totalChars: page.totalChars };
  }
  const bytes = Buffer.from(response.contentBase64 ?? '', 'base64');
  const sha256 = sha256Hex(bytes);
  if (sha256 !== response.sha256 || bytes.length !== response.size) discard(sha256, response.sha256);
  return sliceChars(new TextDecoder('utf-8').decode(bytes), offset, limit);
}

export function errorReply(err: unknown, log: Log): ControlReply {
  const code: ErrorCode = errorCodeOf(err);
  if (code === 'internal') log(`internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  const message = isKnowledgeError(err) ? err.message : 'internal error in the mount daemon (see its log)';
  return { status: HTTP_STATUS[code], body: { ok: false, error: { code, message } } };
}

/** Routes one request; never throws. */
export async function handleControlRequest(
  backend: ReadToolBackend,
  method: string,
  url: string,
  body: unknown,
  log: Log = () => {},
): Promise<ControlReply> {
  const route = `${method} ${url.split('?')[0] ?? ''}`;
  try {
    switch (route) {
      case 'POST /read':
        return { status: 200, body: await localRead(backend, parseReadRequest(body), log) };
      case 'POST /can-load':
        return { status: 200, body: { ok: true, ...(await backend.canLoad(parseCanLoadRequest(body))) } };
      case 'GET /manifest':
        return { status: 200, body: { ok: true, ...(await backend.manifest()) } };
      case 'GET /reminder':
        return { status: 200, body: { ok: true, ...(await backend.reminder()) } };
      case 'GET /status':
        return { status: 200, body: { ok: true, ...(await backend.status()) } };
      default:
        throw new KnowledgeError('invalid_argument', `no such route: ${route}`);
    }
  } catch (err) {
    return errorReply(err, log);
  }
}

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > MAX_REQUEST_BYTES) {
        reject(new KnowledgeError('too_large', `request body over ${MAX_REQUEST_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text === '') return resolve(undefined);
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new KnowledgeError('invalid_argument', 'request body is not valid JSON'));
      }
    });
  });
}

function send(res: ServerResponse, reply: ControlReply): void {
  const json = JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

/** True when something accepts connections on the unix socket at `path`. */
function socketIsLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const conn = connect(path);
    conn.once('connect', () => { conn.destroy(); resolve(true); });
    conn.once('error', () => resolve(false));
  });
}

async function prepareSocketPath(path: string, log: Log): Promise<void> {
  prepareSocketDirectory(dirname(path), process.getuid?.() ?? 0);
  let stat;
  try {
    stat = lstatSync(path);
  } catch {
    return;
  }
  if (!stat.isSocket()) throw new KnowledgeError('config', `${path} exists and is not a socket; remove it or choose another --socket`);
  if (await socketIsLive(path)) throw new KnowledgeError('config', `another process is serving the control socket at ${path}; stop it or choose another --socket`);
  unlinkSync(path);
  log(`removed stale control socket ${path}`);
}

/** `group`: the daemon's --group, whose members may connect when the socket's directory is theirs (socket-directory.ts). */
export async function startControlSocket(path: string, backend: ReadToolBackend, log?: (line: string) => void, group?: number): Promise<{ close(): Promise<void> }> {
  const say: Log = log ?? (() => {});
  await prepareSocketPath(path, say);
  const umask = socketUmaskFor(dirname(path), group);

  const server = http.createServer((req, res) => {
    readBody(req).then(
      (body) => handleControlRequest(backend, req.method ?? 'GET', req.url ?? '/', body, say),
      (err: unknown) => errorReply(err, say),
    ).then((reply) => send(res, reply), (err: unknown) => send(res, errorReply(err, say)));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    withSocketUmask(() => server.listen(path, () => { server.off('error', reject); resolve(); }), umask);
  });
  say(`control socket listening on ${path}${umask === SOCKET_UMASK ? '' : ` (group ${group} may connect)`}`);

  let closed: Promise<void> | undefined;
  return {
    close(): Promise<void> {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => {
        try { unlinkSync(path); } catch { /* already gone */ }
      });
      return closed;
    },
  };
}
