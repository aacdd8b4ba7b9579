// An HTTP proxy on 127.0.0.1:0 in front of the control plane whose behaviour
// can be switched while it runs: pass, delay, hang, reset, refuse, truncate or
// flip bytes in bodies, answer a fixed status or garbage. Clients (the mount
// daemon) point at the proxy; tests flip the mode and watch how the client
// copes. A rule may apply to some requests only (`match`), so a test can
// corrupt file bodies while plans pass through untouched.
//
// Faults are done the way a real network does them: a truncated body keeps
// its original Content-Length and the socket is cut mid-body; a flipped body
// keeps its length and its sha256 header; a reset is a TCP RST.
//
// The upstream can be re-pointed (`setTarget`) so a control plane restarted on
// a new port stays reachable at the same proxy address.

import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type ProxyMode =
  | { readonly kind: 'pass' }
  /** Wait `ms` before forwarding. */
  | { readonly kind: 'delay'; readonly ms: number }
  /** Accept the request and never answer. */
  | { readonly kind: 'hang' }
  /** Keep the request (its body read) until `release()`, then forward it: a request the network delays. */
  | { readonly kind: 'hold' }
  /** Answer with a TCP reset once the request has arrived. */
  | { readonly kind: 'reset' }
  /** Close each new connection at once (like a dead process behind a live port). */
  | { readonly kind: 'refuse' }
  /** Forward, then send only the first `keep` body bytes (default: half) and cut the socket. */
  | { readonly kind: 'truncate'; readonly keep?: number }
  /**
   * Forward, then invert one body byte; length and headers unchanged. The
   * byte is the first of `find`'s first occurrence when given (e.g. a file
   * name inside a plan), else at `at`, else the middle one.
   */
  | { readonly kind: 'flip'; readonly at?: number; readonly find?: string }
  /** Answer `status` with `body` (default a JSON error) without forwarding. */
  | { readonly kind: 'status'; readonly status: number; readonly body?: string }
  /** Answer 200 with bytes that are neither JSON nor the requested file. */
  | { readonly kind: 'garbage' };

export interface ProxyRule {
  readonly mode: ProxyMode;
  /** Applies to requests whose `METHOD path` this matches; default: every request. */
  readonly match?: (method: string, url: string) => boolean;
}

export interface ProxyRequestRecord {
  readonly method: string;
  readonly url: string;
  readonly mode: ProxyMode['kind'];
}

export interface FaultProxy {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Replaces every rule with one mode for every request. */
  setMode(mode: ProxyMode): void;
  /** Rules are tried in order; the first whose `match` accepts the request wins; none → pass. */
  setRules(rules: readonly ProxyRule[]): void;
  setTarget(url: string): void;
  /** Requests seen since the last reset (each with the mode applied). */
  readonly requests: readonly ProxyRequestRecord[];
  count(filter?: (r: ProxyRequestRecord) => boolean): number;
  resetCounts(): void;
  /** Requests held now (mode 'hold'). */
  readonly holding: number;
  /** Forwards every held request, and stops holding new ones (every rule is dropped). */
  release(): void;
  /** Destroys every open client socket (e.g. hung long-polls). */
  dropConnections(): void;
  close(): Promise<void>;
}

const MAX_RECORDS = 100_000;

export async function startFaultProxy(target: string, options: { port?: number } = {}): Promise<FaultProxy> {
  let upstream = new URL(target);
  let rules: readonly ProxyRule[] = [];
  const records: ProxyRequestRecord[] = [];
  const sockets = new Set<Socket>();
  const hung = new Set<ServerResponse>();
  const held = new Set<() => void>();

  const pick = (method: string, url: string): ProxyMode => {
    for (const rule of rules) if (rule.match === undefined || rule.match(method, url)) return rule.mode;
    return { kind: 'pass' };
  };

  const server: Server = createServer((req, res) => {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const mode = pick(method, url);
    if (records.length < MAX_RECORDS) records.push({ method, url, mode: mode.kind });
    void handle(mode, req, res).catch(() => res.destroy());
  });
  server.keepAliveTimeout = 1000;
  server.on('connection', (socket) => {
    const mode = pick('CONNECT', '');
    if (rules.length > 0 && mode.kind === 'refuse') {
      socket.destroy();
      return;
    }
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });

  async function handle(mode: ProxyMode, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readAll(req);
    switch (mode.kind) {
      case 'refuse':
      case 'reset':
        req.socket.resetAndDestroy();
        return;
      case 'hang':
        hung.add(res);
        res.on('close', () => hung.delete(res));
        return;
      case 'status':
        res.writeHead(mode.status, { 'content-type': 'application/json' });
        res.end(mode.body ?? JSON.stringify({ error: { code: 'internal', message: 'injected fault' } }));
        return;
      case 'garbage': {
        const junk = Buffer.from('\u0000\u00ff<html>not what you asked for}{"', 'latin1');
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(junk.length) });
        res.end(junk);
        return;
      }
      case 'delay':
        await new Promise((r) => setTimeout(r, mode.ms));
        break;
      case 'hold':
        await new Promise<void>((resolve) => {
          const go = () => {
            held.delete(go);
            resolve();
          };
          held.add(go);
        });
        break;
      default:
        break;
    }
    const answer = await forward(req, body);
    if (answer === null) {
      req.socket.resetAndDestroy();
      return;
    }
    const headers = { ...answer.headers };
    delete headers['transfer-encoding'];
    delete headers.connection;
    delete headers['keep-alive'];
    if (mode.kind === 'truncate' && answer.body.length > 0) {
      const keep = Math.min(mode.keep ?? Math.floor(answer.body.length / 2), answer.body.length - 1);
      headers['content-length'] = String(answer.body.length);
      res.writeHead(answer.status, headers);
      res.write(answer.body.subarray(0, keep));
      // Let the partial body leave, then cut the connection mid-body.
      setTimeout(() => res.socket?.destroy(), 20);
      return;
    }
    let out = answer.body;
    if (mode.kind === 'flip' && out.length > 0) {
      out = Buffer.from(out);
      const found = mode.find === undefined ? -1 : out.indexOf(mode.find);
      const at = found >= 0 ? found : Math.min(mode.at ?? Math.floor(out.length / 2), out.length - 1);
      out[at] = (out[at] ?? 0) ^ 0xff;
    }
    headers['content-length'] = String(out.length);
    res.writeHead(answer.status, headers);
    res.end(out);
  }

  function forward(
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer } | null> {
    return new Promise((resolve) => {
      const headers = { ...req.headers, host: upstream.host };
      delete headers.connection;
      const up = httpRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: req.method,
          path: req.url,
          headers,
          agent: false,
        },
        (upRes) => {
          readAll(upRes).then(
            (b) => resolve({ status: upRes.statusCode ?? 502, headers: upRes.headers, body: b }),
            () => resolve(null),
          );
        },
      );
      up.on('error', () => resolve(null));
      // A client that gives up (its own timeout) should not leave the upstream call dangling.
      req.socket.once('close', () => up.destroy());
      up.end(body);
    });
  }

  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    setMode(mode) {
      rules = mode.kind === 'pass' ? [] : [{ mode }];
    },
    setRules(next) {
      rules = [...next];
    },
    setTarget(url) {
      upstream = new URL(url);
    },
    get requests() {
      return records;
    },
    count(filter) {
      return filter === undefined ? records.length : records.filter(filter).length;
    },
    resetCounts() {
      records.length = 0;
    },
    get holding() {
      return held.size;
    },
    release() {
      rules = [];
      for (const go of [...held]) go();
    },
    dropConnections() {
      for (const res of hung) res.destroy();
      for (const s of sockets) s.destroy();
    },
    async close() {
      for (const go of [...held]) go();
      for (const res of hung) res.destroy();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Matches requests whose path (without query) starts with `prefix`, e.g. `/v1/files/`. */
export function pathStartsWith(prefix: string): (method: string, url: string) => boolean {
  return (_method, url) => url.startsWith(prefix);
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}
