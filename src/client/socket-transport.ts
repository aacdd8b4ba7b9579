// HTTP over the mount daemon's control socket (a unix socket, mode 0600, no
// token). One keep-alive agent per client, so a harness that calls the read
// tool over and over reuses one connection instead of connecting each time.
//
// Every call is bounded by a timeout. A missing or dead socket, a refused or
// dropped connection and a silent daemon all become DaemonUnreachableError
// naming the socket; error bodies ({ok: false, error: {code, message}}) come
// back as the error class of the daemon's code.
//
// Nothing is sent to a socket another user could have put in place
// (socket-trust.ts): the check runs before every new connection. A kept-alive
// connection needs none: its peer is the process that was checked when it was
// made, whatever happens to the path afterwards. (Checking once per
// connection instead of once per call keeps a read ~60 µs cheaper.)
//
// A kept-alive connection can be closed by the daemon just as a request goes
// out on it (its idle timeout); Node reports that as ECONNRESET on a reused
// socket before any answer, and the request is sent once more on a fresh one,
// as Node's documentation recommends. The daemon never saw the first try.

import type * as Http from 'node:http';
import type { ClientRequest, ClientRequestArgs } from 'node:http';
import { createRequire } from 'node:module';
import type { Duplex } from 'node:stream';
import { KnowledgeError, isErrorCode } from '../core/errors.js';
import { SOCKET_ENV } from '../core/local/socket-path.js';
import { DaemonUnreachableError, errorFromWire, type UnreachableReason } from './errors.js';
import { DAEMON_USER_ENV } from './daemon-user.js';
import { socketTrustProblem } from './socket-trust.js';

// node:http through require, not an ES import: on Node 22 and later the import also loads Node's bundled undici
// (~40 ms of a start; docs/PERFORMANCE.md, "node:http through require").
const { Agent, request } = createRequire(import.meta.url)('node:http') as typeof Http;

/** Long enough for a read that mounts a team (fetch + plan refresh), short enough to never hang an agent. */
export const DEFAULT_TIMEOUT_MS = 60_000;
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

export class SocketTransport {
  readonly path: string;
  private readonly timeoutMs: number;
  private readonly daemonUid: number | undefined;
  private readonly agent: Http.Agent;

  /** `daemonUid`: the daemon's user as the operator named it, trusted beside root and the caller. */
  constructor(path: string, timeoutMs: number = DEFAULT_TIMEOUT_MS, daemonUid?: number) {
    this.path = path;
    this.timeoutMs = timeoutMs;
    this.daemonUid = daemonUid;
    this.agent = new TrustCheckingAgent(() => this.checkTrust());
  }

  /** The `ok: true` body of the answer, parsed; throws the error class of anything else. */
  async call(method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
    // Stryker disable next-line ConditionalExpression: JSON.stringify(undefined) is undefined too; the test says what is meant
    const payload = body === undefined ? undefined : JSON.stringify(body);
    try {
      return await this.send(method, route, payload);
    } catch (err) {
      if (err instanceof StaleConnection) return this.send(method, route, payload);
      throw err;
    }
  }

  /** Closes kept-alive connections; calls after this still work (on new connections). */
  close(): void {
    this.agent.destroy();
  }

  private checkTrust(): void {
    const caller = process.getuid?.() ?? 0;
    const trust = socketTrustProblem(this.path, this.daemonUid === undefined ? caller : [caller, this.daemonUid]);
    if (trust.ok) return;
    if (trust.missing) throw this.noDaemon();
    throw this.unreachable(
      'untrusted',
      `refusing to use the control socket ${this.path}: ${trust.problem}, so another user could stand in for the mount daemon; ` +
        'use a socket in a directory only root or you can write (see --socket)' +
        (/ is owned by uid \d+/.test(trust.problem) ? `, or, when the daemon runs as a user of its own, name it (--daemon-user or ${DAEMON_USER_ENV})` : ''),
    );
  }

  private noDaemon(cause?: unknown): DaemonUnreachableError {
    return this.unreachable('no_daemon', `no knowledgefs mount daemon at ${this.path}: is \`knowledgefs mount\` running? set --socket or ${SOCKET_ENV}`, cause);
  }

  private unreachable(reason: UnreachableReason, message: string, cause?: unknown): DaemonUnreachableError {
    return new DaemonUnreachableError(this.path, reason, message, cause === undefined ? undefined : { cause });
  }

  private send(method: string, route: string, payload: string | undefined): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let answered = false;
      const req: ClientRequest = request(
        {
          socketPath: this.path,
          agent: this.agent,
          method,
          path: route,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          answered = true;
          const chunks: Buffer[] = [];
          let total = 0;
          res.on('data', (chunk: Buffer) => {
            total += chunk.length;
            if (total > MAX_RESPONSE_BYTES) {
              req.destroy(new KnowledgeError('too_large', `the mount daemon's answer is over ${MAX_RESPONSE_BYTES} bytes`));
              return;
            }
            chunks.push(chunk);
          });
          res.on('error', (err) => reject(err instanceof KnowledgeError ? err : this.unreachable('no_answer', `the mount daemon at ${this.path} broke off its answer`, err)));
          res.on('end', () => {
            let parsed: unknown;
            try {
              parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              reject(this.unreachable('bad_answer', `the mount daemon at ${this.path} answered ${res.statusCode} with a body that is not JSON`));
              return;
            }
            const obj = parsed as { ok?: unknown; error?: { code?: unknown; message?: unknown } };
            if (obj.ok === true) return resolve(parsed);
            const code = obj.error?.code;
            const message = obj.error?.message;
            if (isErrorCode(code) && typeof message === 'string') return reject(errorFromWire(code, message));
            reject(this.unreachable('bad_answer', `the mount daemon at ${this.path} answered ${res.statusCode} without a usable result`));
          });
        },
      );
      req.setTimeout(this.timeoutMs, () => {
        req.destroy(this.unreachable('no_answer', `the mount daemon at ${this.path} did not answer within ${this.timeoutMs < 1000 ? `${this.timeoutMs} ms` : `${Math.round(this.timeoutMs / 1000)} s`}`));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err instanceof KnowledgeError) return reject(err);
        if (!answered && req.reusedSocket && err.code === 'ECONNRESET') return reject(new StaleConnection());
        reject(this.translate(err));
      });
      req.end(payload);
    });
  }

  private translate(err: NodeJS.ErrnoException): KnowledgeError {
    switch (err.code) {
      case 'ENOENT':
      case 'ECONNREFUSED':
      case 'ENOTSOCK':
        return this.noDaemon(err);
      case 'EACCES':
      case 'EPERM':
        return this.unreachable('permission', `permission denied on the control socket ${this.path} (it is mode 0600: run as the daemon's user)`, err);
      case 'ECONNRESET':
      case 'EPIPE':
        return this.unreachable('no_answer', `the mount daemon at ${this.path} closed the connection before answering`, err);
      default:
        return this.unreachable('no_answer', `cannot talk to the mount daemon at ${this.path}: ${err.message}`, err);
    }
  }
}

/** A kept-alive connection the daemon had already closed: the request never reached it. */
class StaleConnection extends Error {}

/** A keep-alive agent that runs `check` (which throws to refuse) before opening each connection. */
class TrustCheckingAgent extends Agent {
  private readonly check: () => void;
  constructor(check: () => void) {
    super({ keepAlive: true });
    this.check = check;
  }

  override createConnection(options: ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    try {
      this.check();
    } catch (err) {
      // Node's agent turns this into the request's 'error' event; no connection is made.
      // Stryker disable next-line OptionalChaining: Node's Agent always passes its callback; `?.` only follows the optional type
      callback?.(err as Error, undefined as unknown as Duplex);
      return undefined;
    }
    return super.createConnection(options, callback);
  }
}
