// HTTP over the mount daemon's control socket (a unix socket, mode 0600, no
// token). One keep-alive agent per client, so a harness that calls the read
// tool over and over reuses one connection instead of connecting each time.
//
// Every call is bounded by a timeout. A missing or dead socket, a refused or
// dropped connection and a silent daemon all become DaemonUnreachableError
// naming the socket; error bodies ({ok: false, error: {code, message}}) come
// back as the error class of the daemon's code. Nothing is sent to a socket
// another user could have put in place (socket-trust.ts): that is checked
// before every call, as the path's directories may change between calls.
//
// A kept-alive connection can be closed by the daemon just as a request goes
// out on it (its idle timeout); Node reports that as ECONNRESET on a reused
// socket before any answer, and the request is sent once more on a fresh one,
// as Node's documentation recommends. The daemon never saw the first try.

import { Agent, request, type ClientRequest } from 'node:http';
import { KnowledgeError, isErrorCode } from '../core/errors.js';
import { SOCKET_ENV } from '../core/socket-path.js';
import { DaemonUnreachableError, errorFromWire, type UnreachableReason } from './errors.js';
import { assertTrustedSocket } from './socket-trust.js';

/** Long enough for a read that mounts a team (fetch + plan refresh), short enough to never hang an agent. */
export const DEFAULT_TIMEOUT_MS = 60_000;
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

export class SocketTransport {
  readonly path: string;
  private readonly timeoutMs: number;
  private readonly agent = new Agent({ keepAlive: true });

  constructor(path: string, timeoutMs: number = DEFAULT_TIMEOUT_MS) {
    this.path = path;
    this.timeoutMs = timeoutMs;
  }

  /** The `ok: true` body of the answer, parsed; throws the error class of anything else. */
  async call(method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    this.checkTrust();
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
    try {
      assertTrustedSocket(this.path, () => this.noDaemon());
    } catch (err) {
      if (err instanceof DaemonUnreachableError || !(err instanceof KnowledgeError)) throw err;
      throw this.unreachable('untrusted', err.message);
    }
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
