// A membership service for `serve --membership-url`: `GET /users/<u>/teams`
// → {"teams": [...]}, 404 for an unknown user. Memberships are mutable (for
// revocation tests) and the service can be switched to fail the ways a real
// one does: down (port closed), slow, hanging, 500, garbage bodies, or 404 for
// everyone. Every call is counted so tests can check that account and
// bound-team decisions never consult it. Every request's path is recorded,
// and `GET /teams` answers every team any member has, like a service whose
// team listing sits next to its user lookups: a client that lets a user name
// such as ".." rewrite its path would be handed them all.

import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { drainedOrClosed } from '../../src/server/http/http-adapter.js';

export type MembershipMode =
  | { readonly kind: 'ok' }
  /** The port is closed: connections are refused. */
  | { readonly kind: 'down' }
  /** Answer correctly after `ms`. */
  | { readonly kind: 'slow'; readonly ms: number }
  /** Never answer. */
  | { readonly kind: 'hang' }
  | { readonly kind: 'status'; readonly status: number }
  /** 200 with a body that is not `{"teams": [string...]}`; `body` picks which. */
  | { readonly kind: 'garbage'; readonly body?: string }
  /** Every user is unknown. */
  | { readonly kind: 'not-found' }
  /** `bytes` of whitespace, then the correct answer, with `status` (default 200); `declare` sends a Content-Length. */
  | { readonly kind: 'huge'; readonly bytes: number; readonly status?: number; readonly declare?: boolean };

export interface FaultMembership {
  /** Base URL to pass as `--membership-url`, e.g. `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly port: number;
  setMode(mode: MembershipMode): Promise<void>;
  setTeams(user: string, teams: readonly string[]): void;
  removeUser(user: string): void;
  teamsOf(user: string): readonly string[] | undefined;
  /** The path (and query) of every request since the last reset, as sent. */
  paths(): readonly string[];
  /** Calls answered or attempted since the last reset, per user. */
  calls(user?: string): number;
  /** Bytes of body the last 'huge' answer got out before the client stopped reading or it ended. */
  hugeBytesSent(): number;
  resetCalls(): void;
  close(): Promise<void>;
}

export const GARBAGE_BODIES = [
  '<html>oops</html>',
  '{"teams": "payments"}',
  '{"teams": [1, 2]}',
  '{"team": ["payments"]}',
  '[]',
  '',
  '{"teams": ["payments"',
] as const;

/** Writes `bytes` of spaces then `tail`, waiting for drain; stops when the client goes away. */
async function streamWhitespace(res: ServerResponse, bytes: number, tail: Buffer, sent: (n: number) => void): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let closed = false;
  res.on('close', () => { closed = true; });
  res.on('error', () => { closed = true; });
  for (let left = bytes; left > 0 && !closed; ) {
    const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
    left -= piece.length;
    sent(piece.length);
    if (!res.write(piece)) await drainedOrClosed(res);
  }
  if (!closed) res.end(tail);
}

export async function startFaultMembership(
  initial: Record<string, readonly string[]>,
  options: { port?: number } = {},
): Promise<FaultMembership> {
  const members = new Map<string, readonly string[]>(Object.entries(initial));
  const callsByUser = new Map<string, number>();
  const paths: string[] = [];
  let mode: MembershipMode = { kind: 'ok' };
  let hugeSent = 0;
  const sockets = new Set<Socket>();
  const hung = new Set<ServerResponse>();

  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '');
    const match = /^\/users\/([^/?]+)\/teams(?:\?.*)?$/.exec(req.url ?? '');
    const user = match ? decodeURIComponent(match[1] ?? '') : '';
    callsByUser.set(user, (callsByUser.get(user) ?? 0) + 1);
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    const answer = () => {
      if (req.method === 'GET' && req.url === '/teams') return json(200, { teams: [...new Set([...members.values()].flat())] });
      if (req.method !== 'GET' || !match) return json(404, { error: 'no such route' });
      const teams = members.get(user);
      if (teams === undefined) return json(404, { error: 'unknown user' });
      return json(200, { teams });
    };
    switch (mode.kind) {
      case 'ok':
      case 'down':
        return answer();
      case 'slow':
        setTimeout(answer, mode.ms);
        return;
      case 'hang':
        hung.add(res);
        res.on('close', () => hung.delete(res));
        return;
      case 'status':
        return json(mode.status, { error: 'injected failure' });
      case 'garbage':
        return json(200, mode.body ?? GARBAGE_BODIES[0]);
      case 'not-found':
        return json(404, { error: 'unknown user' });
      case 'huge': {
        const tail = Buffer.from(JSON.stringify({ teams: members.get(user) ?? [] }));
        const headers: Record<string, string | number> = { 'content-type': 'application/json' };
        if (mode.declare === true) headers['content-length'] = mode.bytes + tail.length;
        res.writeHead(mode.status ?? 200, headers);
        hugeSent = 0;
        void streamWhitespace(res, mode.bytes, tail, (n) => { hugeSent += n; });
        return;
      }
    }
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const r of hung) r.destroy();
      for (const s of sockets) s.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });

  const port = await listen(options.port ?? 0);

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async setMode(next) {
      const wasDown = mode.kind === 'down';
      mode = next;
      if (next.kind === 'down' && !wasDown) await stop();
      if (next.kind !== 'down' && wasDown) await listen(port);
      if (next.kind !== 'hang') for (const r of hung) r.destroy();
    },
    setTeams(user, teams) {
      members.set(user, [...teams]);
    },
    removeUser(user) {
      members.delete(user);
    },
    teamsOf(user) {
      return members.get(user);
    },
    hugeBytesSent() {
      return hugeSent;
    },
    calls(user) {
      if (user !== undefined) return callsByUser.get(user) ?? 0;
      let n = 0;
      for (const v of callsByUser.values()) n += v;
      return n;
    },
    paths() {
      return [...paths];
    },
    resetCalls() {
      callsByUser.clear();
      paths.length = 0;
    },
    async close() {
      await stop();
    },
  };
}
