// `HOST:PORT` as typed after --listen or --metrics-listen (`[::1]:0` for
// IPv6; port 0 picks a free port). Pure, so every command parses it alike.

import { KnowledgeError } from '../errors.js';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

export function parseListenAddress(text: string, flag = '--listen'): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new KnowledgeError('invalid_argument', `invalid ${flag} "${text}" (expected HOST:PORT, e.g. 127.0.0.1:7420)`);
  return { host: m[1] ?? m[2] ?? '127.0.0.1', port };
}

/** `http://HOST:PORT` with IPv6 hosts bracketed. */
export function httpUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
