// Client for the mount daemon's control socket (HTTP over a unix socket),
// used by `read`, `manifest` and `reminder`. Every call is bounded by a
// timeout; a missing or dead socket becomes one clear `unavailable` error
// telling the user how to point at the right daemon. Error bodies
// ({ok: false, error: {code, message}}) come back as KnowledgeError with the
// daemon's code, so the CLI's exit code follows it. Nothing is sent to a
// socket another user could have put there (src/client/socket-trust.ts).

import { request } from 'node:http';
import { assertTrustedSocket } from '../client/socket-trust.js';
import { KnowledgeError, isErrorCode } from '../core/errors.js';
import { SOCKET_ENV } from '../core/socket-path.js';
import type { DaemonStatus, LocalReadRequest, LocalReadResult, ManifestResponse, ReminderResponse } from '../core/wire.js';

/** Long enough for a read that mounts a team (fetch + plan refresh), short enough to never hang an agent. */
export const DEFAULT_SOCKET_TIMEOUT_MS = 60_000;
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

export interface SocketClientOptions {
  readonly timeoutMs?: number;
}

export class SocketClient {
  readonly path: string;
  private readonly timeoutMs: number;

  constructor(path: string, options: SocketClientOptions = {}) {
    this.path = path;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_SOCKET_TIMEOUT_MS;
  }

  read(req: LocalReadRequest): Promise<LocalReadResult> {
    return this.call('POST', '/read', req) as Promise<LocalReadResult>;
  }

  manifest(): Promise<ManifestResponse & { ok: true }> {
    return this.call('GET', '/manifest') as Promise<ManifestResponse & { ok: true }>;
  }

  reminder(): Promise<ReminderResponse & { ok: true }> {
    return this.call('GET', '/reminder') as Promise<ReminderResponse & { ok: true }>;
  }

  status(): Promise<DaemonStatus & { ok: true }> {
    return this.call('GET', '/status') as Promise<DaemonStatus & { ok: true }>;
  }

  private noDaemon(): KnowledgeError {
    return new KnowledgeError(
      'unavailable',
      `no knowledgefs mount daemon at ${this.path}: is \`knowledgefs mount\` running? set --socket or ${SOCKET_ENV}`,
    );
  }

  private call(method: string, path: string, body?: unknown): Promise<unknown> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      try {
        assertTrustedSocket(this.path, () => this.noDaemon());
      } catch (err) {
        reject(err);
        return;
      }
      const req = request(
        {
          socketPath: this.path,
          method,
          path,
          headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
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
          res.on('error', (err) => reject(err));
          res.on('end', () => {
            let parsed: unknown;
            try {
              parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              reject(new KnowledgeError('unavailable', `the mount daemon at ${this.path} answered ${res.statusCode} with a body that is not JSON`));
              return;
            }
            const obj = parsed as { ok?: unknown; error?: { code?: unknown; message?: unknown } };
            if (obj.ok === true) return resolve(parsed);
            const code = obj.error?.code;
            const message = obj.error?.message;
            if (isErrorCode(code) && typeof message === 'string') return reject(new KnowledgeError(code, message));
            reject(new KnowledgeError('unavailable', `the mount daemon at ${this.path} answered ${res.statusCode} without a usable result`));
          });
        },
      );
      req.setTimeout(this.timeoutMs, () => {
        req.destroy(new KnowledgeError('unavailable', `the mount daemon at ${this.path} did not answer within ${Math.round(this.timeoutMs / 1000)} s`));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err instanceof KnowledgeError) return reject(err);
        if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED' || err.code === 'ENOTSOCK') return reject(this.noDaemon());
        if (err.code === 'EACCES' || err.code === 'EPERM') {
          return reject(new KnowledgeError('unavailable', `permission denied on the control socket ${this.path} (it is mode 0600: run as the daemon's user)`));
        }
        if (err.code === 'ECONNRESET' || err.code === 'EPIPE') {
          return reject(new KnowledgeError('unavailable', `the mount daemon at ${this.path} closed the connection before answering`));
        }
        reject(new KnowledgeError('unavailable', `cannot talk to the mount daemon at ${this.path}: ${err.message}`));
      });
      req.end(payload);
    });
  }
}
