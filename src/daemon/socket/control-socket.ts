// The daemon's local control socket: HTTP over a unix socket (mode 0600, no
// token) serving the read tool, manifest, reminder and status to processes in
// the runner. The runner token stays in the daemon; whoever can open the
// socket acts for the session, so its mode and its directory (only the
// daemon's user or root can change it: socket-directory.ts) are the gate.
//
// The read flow (DESIGN.md "Read tool"):
//   resolve the typed path → mount = file not in the tree → the control plane
//   decides afresh (even for a file in the tree: a local read succeeding is no
//   authorisation) → the bytes are checked against the returned sha256 → if
//   the read mounted a team, the plan is refreshed before answering, so `ls`
//   shows the team as soon as the command returns → decoded and sliced by
//   characters (code points) with offset/limit.
// A not_found answer is rewritten to the one "no such file" message that only
// echoes the typed path, so a personal session's hidden denial cannot be told
// apart from a missing file by its bytes.
//
// Handlers take and return plain data (`handleControlRequest`); only
// `startControlSocket` knows about HTTP and the socket file.

import { createHash } from 'node:crypto';
import { lstatSync, unlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { KnowledgeError, errorCodeOf, isKnowledgeError, type ErrorCode } from '../../core/errors.js';
import { noSuchFileMessage, resolveKnowledgePath } from '../../core/local/knowledge-path.js';
import {
  HTTP_STATUS,
  READ_OUTPUT_CAP,
  type DaemonStatus,
  type LocalReadRequest,
  type LocalReadResult,
  type ManifestResponse,
  type ReadRequest,
  type ReadResponse,
  type ReminderResponse,
} from '../../core/wire.js';
import { prepareSocketDirectory, withSocketUmask } from './socket-directory.js';

export interface ReadToolBackend {
  readonly mountpoint: string;
  hasFile(scopePath: string): boolean;
  read(req: ReadRequest): Promise<ReadResponse>; // throws KnowledgeError(not_found | denied | membership_unavailable | unavailable | integrity) with the server's message
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

/** Slices `text` by code points: `limit` characters after skipping `offset`. */
export function sliceChars(text: string, offset: number, limit: number): { content: string; totalChars: number } {
  let chars = 0;
  let start = -1;
  let end = -1;
  for (let i = 0; i < text.length; ) {
    if (chars === offset) start = i;
    if (chars === offset + limit) end = i;
    const code = text.charCodeAt(i);
    i += code >= 0xd800 && code <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
    chars++;
  }
  if (start < 0) start = text.length;
  if (end < 0) end = text.length;
  return { content: text.slice(start, end), totalChars: chars };
}

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
    response = await backend.read({ path: scopePath, mount });
  } catch (err) {
    if (isKnowledgeError(err) && err.code === 'not_found') throw new KnowledgeError('not_found', noSuchFileMessage(req.path));
    throw err;
  }

  const bytes = Buffer.from(response.contentBase64, 'base64');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  if (sha256 !== response.sha256 || bytes.length !== response.size) {
    log(`read ${scopePath}: content does not match its sha256 (${sha256} vs ${response.sha256}), discarded`);
    throw new KnowledgeError('integrity', `${req.path}: the content received does not match its checksum; nothing was shown, try again`);
  }
  if (response.mounted) {
    try {
      await backend.refreshPlan();
    } catch (err) {
      // The read itself succeeded and is recorded; the sync loop will bring the team in.
      log(`read ${scopePath} mounted a team but the plan refresh failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  const text = new TextDecoder('utf-8').decode(bytes);
  const { content, totalChars } = sliceChars(text, offset, limit);
  const shownEnd = Math.min(totalChars, offset + limit);
  return {
    ok: true,
    path: display,
    content,
    sha256,
    size: bytes.length,
    offset,
    truncated: shownEnd < totalChars,
    totalChars,
    mounted: response.mounted,
  };
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

export async function startControlSocket(path: string, backend: ReadToolBackend, log?: (line: string) => void): Promise<{ close(): Promise<void> }> {
  const say: Log = log ?? (() => {});
  await prepareSocketPath(path, say);

  const server = createServer((req, res) => {
    readBody(req).then(
      (body) => handleControlRequest(backend, req.method ?? 'GET', req.url ?? '/', body, say),
      (err: unknown) => errorReply(err, say),
    ).then((reply) => send(res, reply), (err: unknown) => send(res, errorReply(err, say)));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    withSocketUmask(() => server.listen(path, () => { server.off('error', reject); resolve(); }));
  });
  say(`control socket listening on ${path}`);

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
