// A mount daemon's control socket, real (HTTP over a unix socket, the
// daemon's own `startControlSocket`), in front of an in-memory backend that
// stands in for the control plane and the tree. Fast tests of the socket, the
// client library, the CLI and the MCP server use it; the backend records every
// call, so a test can check what reached the "control plane".
//
//   const d = await startMemoryDaemon();
//   d.backend.hidden.add('team_storage');
//   … new KnowledgeClient({ socketPath: d.socketPath }) …
//   await d.close();

import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KnowledgeError } from '../../src/core/errors.js';
import type { CanLoadRequest, CanLoadResponse, ReadRequest, ReadResponse, ReminderResponse } from '../../src/core/wire.js';
import { readPage } from '../../src/core/read-page.js';
import { startControlSocket, type ReadToolBackend } from '../../src/daemon/socket/control-socket.js';

export const MEMORY_MOUNTPOINT = '/runner/knowledge';
export const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

export class MemoryBackend implements ReadToolBackend {
  readonly mountpoint: string;
  tree = new Set<string>(['account/DUTY.md', 'team_payments/DUTY.md']);
  files = new Map<string, string>([
    ['account/DUTY.md', '# Account\n'],
    ['team_payments/DUTY.md', '# Payments\n'],
    ['team_search/DUTY.md', '# Search ünïcødé 😀\n'],
  ]);
  /** Scopes the "control plane" refuses: hidden (not_found) or explained (denied). */
  hidden = new Set<string>(['team_storage']);
  denied = new Set<string>();
  down: KnowledgeError | null = null;
  /** The answer's checksum does not match its content (the page's, or the whole file's). */
  corrupt = false;
  /** Answer whole files even when a page is asked for, as control planes did before pages. */
  wholeFiles = false;
  /** The last read request, as the daemon sent it. */
  lastRead: ReadRequest | undefined;
  calls: string[] = [];
  mountedTeams: string[] = [];
  manifestText = 'MANIFEST\n';
  /** Changes the next reminder reports (then cleared: each is reported once). */
  pendingChanged: string[] = [];
  pendingDeleted: string[] = [];
  today = '2025-01-01';

  constructor(mountpoint = MEMORY_MOUNTPOINT) {
    this.mountpoint = mountpoint;
  }

  hasFile(p: string) { return this.tree.has(p); }
  async canLoad(req: CanLoadRequest): Promise<CanLoadResponse> {
    this.calls.push(`can-load ${req.scopes.join(',')} for=${req.for}`);
    if (this.down) throw this.down;
    return {
      for: req.for,
      answers: req.scopes.map((scope) => {
        if (this.denied.has(scope)) return { scope, allowed: false, error: { code: 'denied', message: `this session belongs to team "payments" and cannot use team "${scope.slice(5)}"'s tools` } };
        if (this.hidden.has(scope)) return { scope, allowed: false, error: { code: 'not_found', message: `no such scope: ${scope}` } };
        return { scope, allowed: true };
      }),
    };
  }
  async read(req: ReadRequest): Promise<ReadResponse> {
    this.calls.push(`read ${req.path} mount=${req.mount}`);
    this.lastRead = req;
    if (this.down) throw this.down;
    const scope = req.path.split('/')[0] ?? '';
    if (this.denied.has(scope)) throw new KnowledgeError('denied', `this session belongs to team payments and cannot load ${scope}`);
    const text = this.files.get(req.path);
    if (this.hidden.has(scope) || text === undefined) throw new KnowledgeError('not_found', `no such file: ${req.path} (server wording)`);
    const bytes = Buffer.from(text);
    const mounted = req.mount && scope.startsWith('team_') && !this.mountedTeams.includes(scope) && !this.tree.has(`${scope}/DUTY.md`);
    if (mounted) this.mountedTeams.push(scope);
    const whole = { path: req.path, sha256: sha256(bytes), size: bytes.length, mounted };
    if (req.limit === undefined || this.wholeFiles) return { ...whole, ...(this.corrupt ? { sha256: sha256('x') } : {}), contentBase64: bytes.toString('base64') };
    const page = readPage(bytes, req.offset ?? 0, req.limit);
    return { ...whole, page: this.corrupt ? { ...page, contentSha256: sha256('x') } : page };
  }
  async manifest() {
    this.calls.push('manifest');
    if (this.down) throw this.down;
    return { text: this.manifestText, sha256: sha256(this.manifestText) };
  }
  async reminder(): Promise<ReminderResponse> {
    this.calls.push('reminder');
    if (this.down) throw this.down;
    const changed = this.pendingChanged;
    const deleted = this.pendingDeleted;
    this.pendingChanged = [];
    this.pendingDeleted = [];
    const lines = [`Today's date is ${this.today}.`];
    if (changed.length > 0) lines.push(`Changed since you read them: ${changed.join(', ')}`);
    if (deleted.length > 0) lines.push(`Gone since you read them: ${deleted.join(', ')}`);
    return { text: `${lines.join('\n')}\n`, date: this.today, changed, deleted };
  }
  async refreshPlan() {
    this.calls.push('refreshPlan');
    await new Promise((r) => setTimeout(r, 20));
    for (const f of this.files.keys()) if (this.mountedTeams.some((t) => f.startsWith(`${t}/`))) this.tree.add(f);
  }
  status() {
    return { mountpoint: this.mountpoint, sessionId: 's1', planVersion: 'v', files: this.tree.size, scopes: ['account'], prefetch: { done: 0, total: 0 } };
  }
}

export interface MemoryDaemon {
  readonly socketPath: string;
  readonly backend: MemoryBackend;
  close(): Promise<void>;
}

/** A control socket in a fresh temp directory over a fresh MemoryBackend. */
export async function startMemoryDaemon(backend = new MemoryBackend()): Promise<MemoryDaemon> {
  const dir = mkdtempSync(join(tmpdir(), 'kfs-memd-'));
  const socketPath = join(dir, 'control.sock');
  const sock = await startControlSocket(socketPath, backend);
  return {
    socketPath,
    backend,
    async close() {
      await sock.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
