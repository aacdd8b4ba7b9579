// `--metrics-listen HOST:PORT`: a separate HTTP listener answering only
// `GET /metrics`, without a token, for a scraper on a network the operator
// trusts (a sidecar, a pod port). It serves numbers only: no route here can
// reach sessions, files or the control socket.

import type * as Http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { KnowledgeError } from '../core/errors.js';
import { httpUrl, type ListenAddress } from '../core/text/listen-address.js';
import type { MetricsExposition } from '../core/metrics.js';

// node:http through require, not an ES import: on Node 22 and later the import also loads Node's bundled undici
// (~40 ms of a start; docs/PERFORMANCE.md, "node:http through require").
const http = createRequire(import.meta.url)('node:http') as typeof Http;

export interface MetricsListener {
  readonly url: string;
  close(): Promise<void>;
}

export async function listenMetrics(address: ListenAddress, exposition: MetricsExposition, log: (line: string) => void): Promise<MetricsListener> {
  const server = http.createServer((req, res) => {
    res.sendDate = false;
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('only GET /metrics is served here\n');
      return;
    }
    exposition.text().then(
      (text) => {
        res.writeHead(200, { 'content-type': exposition.contentType, 'content-length': Buffer.byteLength(text) });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        log(`metrics: ${err instanceof Error ? err.message : String(err)}`);
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('metrics could not be collected (see the log)\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch((err: unknown) => {
    throw new KnowledgeError('config', `cannot listen on --metrics-listen ${address.host}:${address.port}: ${err instanceof Error ? err.message : String(err)}`);
  });
  const url = `${httpUrl(address.host, (server.address() as AddressInfo).port)}/metrics`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
