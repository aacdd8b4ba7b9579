// An in-memory ControlClient for in-process daemon tests: files and grants
// per scope, call counters, and switches to make it deny, fail, hang, or
// answer wrong bytes. Speaks the same contract as the HTTP client (errors
// are KnowledgeErrors with the codes the real one maps statuses to).

import { createHash } from 'node:crypto';
import { KnowledgeError } from '../../src/core/errors.js';
import { buildPlan, snapshotScope, type Plan, type PlanFile } from '../../src/core/session/plan.js';
import type { ControlClient, FileBody, PlanRequest } from '../../src/daemon/control-plane/control-client.js';
import type { CanLoadRequest, CanLoadResponse, ManifestResponse, ReadRequest, ReadResponse, ReminderResponse, SessionView } from '../../src/core/wire.js';

export const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** The KnowledgeError a call rejects with; anything else (or success) fails the test. */
export async function failure(p: Promise<unknown>): Promise<KnowledgeError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof KnowledgeError) return err;
    throw err;
  }
  throw new Error('expected a failure');
}

export type Fault = 'none' | 'unavailable' | 'hang' | 'flip' | 'unauthorized';

export class FakeControlClient implements ControlClient {
  readonly serverUrl = 'http://fake';
  /** `<scope>/<path>` → bytes. */
  readonly files = new Map<string, Buffer>();
  readonly mtimes = new Map<string, number>();
  /** Scopes whose grants and files are refused; 'hidden' answers not_found (personal), 'denied' a 403. */
  readonly refused = new Map<string, 'hidden' | 'denied'>();
  fault: Fault = 'none';
  /** Applies to file fetches only when set. */
  fileFault: Fault = 'none';
  readonly calls = { plan: 0, grant: 0, file: 0, session: 0 };
  /** Resolves pending file fetches when `gate` is set: tests control their timing. */
  gate: Promise<void> | undefined;

  put(scopePath: string, content: string | Buffer, mtimeMs = 1_700_000_000_000): void {
    this.files.set(scopePath, Buffer.from(content));
    this.mtimes.set(scopePath, mtimeMs);
  }

  remove(scopePath: string): void {
    this.files.delete(scopePath);
  }

  currentPlan(threshold = Number.MAX_SAFE_INTEGER): Plan {
    const byScope = new Map<string, PlanFile[]>();
    for (const [key, buf] of this.files) {
      const slash = key.indexOf('/');
      const scope = key.slice(0, slash);
      if (this.refused.has(scope)) continue;
      const list = byScope.get(scope) ?? [];
      list.push({ path: key.slice(slash + 1), size: buf.length, mtimeMs: this.mtimes.get(key) ?? 0, sha256: sha256(buf) });
      byScope.set(scope, list);
    }
    return buildPlan({
      sessionId: 'ses_fake',
      threshold,
      loadable: [...byScope].map(([scope, files]) => snapshotScope(scope, files)),
      boundTeam: undefined,
      mounted: [],
    });
  }

  private async failIfAsked(fault: Fault, signal?: AbortSignal): Promise<void> {
    if (fault === 'unavailable') throw new KnowledgeError('unavailable', 'control plane at http://fake unavailable: ECONNREFUSED');
    if (fault === 'unauthorized') throw new KnowledgeError('unauthorized', 'the control plane rejected the runner token');
    if (fault === 'hang') {
      await new Promise<void>((_, reject) => signal?.addEventListener('abort', () => reject(new KnowledgeError('unavailable', 'request cancelled'))));
    }
  }

  async session(): Promise<SessionView> {
    this.calls.session++;
    await this.failIfAsked(this.fault);
    return { sessionId: 'ses_fake', kind: 'personal', creator: 'alice', mounted: [] };
  }

  async plan(req: PlanRequest): Promise<Plan | null> {
    this.calls.plan++;
    await this.failIfAsked(this.fault, req.signal);
    const plan = this.currentPlan(req.threshold);
    return req.etag !== undefined && req.etag === plan.version ? null : plan;
  }

  private refuse(scope: string): void {
    const how = this.refused.get(scope);
    if (how === 'hidden') throw new KnowledgeError('not_found', 'no such file');
    if (how === 'denied') throw new KnowledgeError('denied', `this session may not load ${scope}`);
  }

  async grant(scope: string): Promise<void> {
    this.calls.grant++;
    await this.failIfAsked(this.fault);
    this.refuse(scope);
  }

  async file(scope: string, path: string, maxBytes: number): Promise<FileBody> {
    this.calls.file++;
    if (this.gate !== undefined) await this.gate;
    await this.failIfAsked(this.fileFault !== 'none' ? this.fileFault : this.fault);
    this.refuse(scope);
    const buf = this.files.get(`${scope}/${path}`);
    if (buf === undefined) throw new KnowledgeError('not_found', 'no such file');
    if (buf.length > maxBytes) throw new KnowledgeError('integrity', 'more bytes than the plan says');
    const body = Buffer.from(buf);
    if (this.fileFault === 'flip' && body.length > 0) body[0] = body[0]! ^ 0xff;
    return { body, sha256: sha256(buf) };
  }

  async read(_req: ReadRequest): Promise<ReadResponse> {
    throw new KnowledgeError('internal', 'not used');
  }

  async canLoad(_req: CanLoadRequest): Promise<CanLoadResponse> {
    throw new KnowledgeError('internal', 'not used');
  }

  async manifest(): Promise<ManifestResponse> {
    return { text: '', sha256: sha256('') };
  }

  async reminder(): Promise<ReminderResponse> {
    return { text: '', date: '2026-01-01', changed: [], deleted: [] };
  }

  async close(): Promise<void> {}
}
