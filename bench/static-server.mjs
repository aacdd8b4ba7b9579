#!/usr/bin/env node
// A static HTTP server for the rclone peer: serves a directory read-only on
// 127.0.0.1 with the HTML listings rclone's `http` backend understands
// (`<a href="name">`, directories end in `/`), Last-Modified and
// Content-Length on GET and HEAD (rclone HEADs each listed file for its size
// and mtime), and byte ranges (the VFS cache reads in chunks).
//
// Usage: node bench/static-server.mjs ROOT   → prints `listening on http://127.0.0.1:PORT`
// Runs in its own process so its event loop never competes with the
// orchestrator's timers.

import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat, readdir } from 'node:fs/promises';
import { join, normalize, sep } from 'node:path';

const root = process.argv[2];
if (!root) {
  process.stderr.write('usage: node bench/static-server.mjs ROOT\n');
  process.exit(2);
}

const escapeHtml = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function resolvePath(urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0')) return null;
  const rel = normalize(decoded).replace(/^([/\\])+/, '');
  if (rel.split(sep).includes('..')) return null;
  return join(root, rel);
}

async function listing(res, dir, urlPath, head) {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const rows = entries.map((e) => {
    const name = e.isDirectory() ? `${e.name}/` : e.name;
    return `<a href="${escapeHtml(encodeURIComponent(e.name) + (e.isDirectory() ? '/' : ''))}">${escapeHtml(name)}</a>`;
  });
  const body = `<!DOCTYPE html>\n<html><head><title>Index of ${escapeHtml(urlPath)}</title></head><body>\n<pre>\n${rows.join('\n')}\n</pre>\n</body></html>\n`;
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(head ? undefined : body);
}

function sendFile(req, res, file, st, head) {
  const headers = {
    'content-type': 'text/markdown; charset=utf-8',
    'last-modified': st.mtime.toUTCString(),
    'accept-ranges': 'bytes',
  };
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
  let start = 0;
  let end = st.size - 1;
  let status = 200;
  if (range && (range[1] !== '' || range[2] !== '')) {
    if (range[1] === '') {
      start = Math.max(0, st.size - Number(range[2]));
    } else {
      start = Number(range[1]);
      if (range[2] !== '') end = Math.min(end, Number(range[2]));
    }
    if (start >= st.size || start > end) {
      res.writeHead(416, { 'content-range': `bytes */${st.size}` });
      return res.end();
    }
    status = 206;
    headers['content-range'] = `bytes ${start}-${end}/${st.size}`;
  }
  headers['content-length'] = st.size === 0 ? 0 : end - start + 1;
  res.writeHead(status, headers);
  if (head || st.size === 0) return res.end();
  createReadStream(file, { start, end }).pipe(res);
}

const server = createServer(async (req, res) => {
  try {
    const head = req.method === 'HEAD';
    if (req.method !== 'GET' && !head) {
      res.writeHead(405);
      return res.end();
    }
    const urlPath = new URL(req.url ?? '/', 'http://x').pathname;
    const file = resolvePath(urlPath);
    if (file === null) {
      res.writeHead(400);
      return res.end();
    }
    const st = await stat(file).catch(() => null);
    if (!st) {
      res.writeHead(404);
      return res.end();
    }
    if (st.isDirectory()) {
      if (!urlPath.endsWith('/')) {
        res.writeHead(301, { location: `${urlPath}/` });
        return res.end();
      }
      return await listing(res, file, urlPath, head);
    }
    if (!st.isFile()) {
      res.writeHead(404);
      return res.end();
    }
    return sendFile(req, res, file, st, head);
  } catch (err) {
    if (!res.headersSent) res.writeHead(500);
    res.end();
    process.stderr.write(`static-server: ${err instanceof Error ? err.message : String(err)}\n`);
  }
});

server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`listening on http://127.0.0.1:${addr.port}\n`);
});
const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
