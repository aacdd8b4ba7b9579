// The runner routes over a stand-in context and store: the session view; a
// file asked by version, and a version that is no sha256; the read tool's
// body refused word for word, its small-file path, and which decision a
// mount asks for; the manifest's scopes (advertised, mounted, each once,
// denied ones left out); and the reminder's three answers per read file
// (current, changed or gone, unknown while membership is down). The same
// routes over HTTP are in server-read.test.ts and server-access.test.ts.

import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { NO_METRICS } from '../src/core/metrics.js';
import type { MembershipAnswer } from '../src/core/session/policy.js';
import type { ScopeSnapshot } from '../src/core/session/plan.js';
import type { AuditRecord } from '../src/server/access/audit-log.js';
import type { RouteContext } from '../src/server/context.js';
import type { ApiRequest, ApiResponse } from '../src/server/http/api.js';
import { filesRoute, manifestRoute, readRoute, reminderRoute, sessionView } from '../src/server/http/runner-routes.js';
import type { ReadSetEntry, SessionRecord } from '../src/server/state/session-state.js';
import type { PackFile } from '../src/store/pack-store.js';

const personal: SessionRecord = { id: 's1', kind: 'personal', creator: 'alice', tokenHash: 'h', revoked: false, mounted: [], readSet: [], createdAt: '2026-01-01T00:00:00.000Z' };
const SHA = { a: 'a'.repeat(64), b: 'b'.repeat(64), c: 'c'.repeat(64) };

/** A store of `files` (scope/path → [sha256, text]); reads and the versions they asked for are recorded. */
function contextOf(files: Record<string, [string, string]>, answer: MembershipAnswer = { status: 'ok', teams: ['search', 'ops'] }, small = false) {
  const reads: string[] = [];
  const audit: AuditRecord[] = [];
  const replaced: ReadSetEntry[][] = [];
  const recorded: [ReadSetEntry, string | null][] = [];
  const file = (scope: string, path: string): PackFile | null => {
    const f = files[`${scope}/${path}`];
    return f === undefined ? null : ({ path, sha256: f[0], size: Buffer.byteLength(f[1]), bytes: Buffer.from(f[1]) } as unknown as PackFile);
  };
  const snapshot = (scope: string): ScopeSnapshot | undefined => {
    const entries = Object.entries(files)
      .filter(([k]) => k.startsWith(`${scope}/`))
      .map(([k, [sha256, text]]) => ({ path: k.slice(scope.length + 1), sha256, size: Buffer.byteLength(text) }))
      .sort((x, y) => (x.path < y.path ? -1 : 1));
    return entries.length === 0 ? undefined : ({ scope, version: 'v', totalBytes: 0, files: entries } as unknown as ScopeSnapshot);
  };
  const ctx = {
    options: { now: () => Date.parse('2026-03-04T12:00:00Z'), replicaId: 'r' },
    audit: { append: (r: AuditRecord) => void audit.push(r) },
    metrics: NO_METRICS,
    membership: { teamsOf: async () => answer },
    store: {
      snapshot,
      read: async (scope: string, path: string, version?: string) => {
        reads.push(`read ${scope}/${path}${version ? `@${version}` : ''}`);
        return file(scope, path);
      },
      ...(small
        ? {
            readSmallSync: (scope: string, path: string) => {
              reads.push(`small ${scope}/${path}`);
              return path.endsWith('.big') ? undefined : file(scope, path);
            },
          }
        : {}),
    },
    sessions: {
      recordRead: async (_s: SessionRecord, entry: ReadSetEntry, mountTeam: string | null) => (recorded.push([entry, mountTeam]), mountTeam !== null),
      replaceReadSet: async (_s: SessionRecord, next: ReadSetEntry[]) => void replaced.push(next),
    },
  } as unknown as RouteContext;
  return { ctx, reads, audit, replaced, recorded };
}

const json = (res: ApiResponse) => JSON.parse(res.body as string) as Record<string, unknown>;
const post = (body: unknown) => ({ body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) }) as ApiRequest;
const query = (q: Record<string, string>) => ({ query: new URLSearchParams(q) }) as unknown as ApiRequest;

describe('sessionView', () => {
  it("shows a team session's team, and no team field for a personal one", () => {
    expect(sessionView({ ...personal, mounted: ['ops'] })).toEqual({ sessionId: 's1', kind: 'personal', creator: 'alice', mounted: ['ops'] });
    expect('team' in sessionView(personal)).toBe(false);
    expect(sessionView({ ...personal, kind: 'team', team: 'search' })).toEqual({ sessionId: 's1', kind: 'team', creator: 'alice', team: 'search', mounted: [] });
  });
});

describe('filesRoute', () => {
  it('asks the store for the version given, and names a version that is no sha256', async () => {
    const t = contextOf({ 'team_search/a.md': [SHA.a, 'A'] });
    const res = await filesRoute(t.ctx, personal, 'team_search/a.md', SHA.a);
    expect(res.status).toBe(200);
    expect(t.reads).toEqual([`read team_search/a.md@${SHA.a}`]);
    await filesRoute(t.ctx, personal, 'team_search/a.md');
    expect(t.reads[1]).toBe('read team_search/a.md');
    const long = 'x'.repeat(100);
    await expect(filesRoute(t.ctx, personal, 'team_search/a.md', long)).rejects.toThrow(new KnowledgeError('invalid_argument', `sha256 must be 64 lowercase hex digits, got "${'x'.repeat(80)}"`));
    await expect(filesRoute(t.ctx, personal, 'team_search/a.md', SHA.a.toUpperCase())).rejects.toThrow(/^sha256 must be 64 lowercase hex digits/);
    expect(t.reads).toHaveLength(2);
  });

  it('answers a missing file with the path it was asked for', async () => {
    const t = contextOf({});
    const res = await filesRoute(t.ctx, personal, 'team_search/none.md');
    expect(res.status).toBe(404);
    expect(json(res)).toEqual({ error: { code: 'not_found', message: 'no such file: team_search/none.md' } });
  });
});

describe('readRoute', () => {
  const refusal = async (body: unknown): Promise<string> => {
    const t = contextOf({});
    const err = await readRoute(t.ctx, personal, post(body)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('invalid_argument');
    expect(t.reads).toEqual([]);
    return (err as Error).message;
  };

  it('names what is wrong with the body, word for word, before reading anything', async () => {
    expect(await refusal('{')).toBe('request body must be JSON like {"path": "team_x/DUTY.md", "mount": true}');
    expect(await refusal('null')).toBe('"path" must be a string like "team_x/DUTY.md"');
    expect(await refusal('"team_x/DUTY.md"')).toBe('"path" must be a string like "team_x/DUTY.md"');
    expect(await refusal({ path: 7 })).toBe('"path" must be a string like "team_x/DUTY.md"');
    expect(await refusal({ path: 'team_x/DUTY.md', mount: 'yes' })).toBe('"mount" must be true or false');
    expect(await refusal({ path: 'team_x/DUTY.md', offset: 0 })).toBe('"offset" needs "limit" (a page is asked for with both)');
    expect(await refusal({ path: 'team_x/DUTY.md', limit: 0 })).toBe('"limit" must be an integer ≥ 1 (characters)');
    expect(await refusal({ path: 'team_x/DUTY.md', limit: 1.5 })).toBe('"limit" must be an integer ≥ 1 (characters)');
    expect(await refusal({ path: 'team_x/DUTY.md', limit: '5' })).toBe('"limit" must be an integer ≥ 1 (characters)');
    expect(await refusal({ path: 'team_x/DUTY.md', limit: 5, offset: -1 })).toBe('"offset" must be an integer ≥ 0 (characters)');
  });

  it('takes a page at offset 0 and the smallest limit', async () => {
    const t = contextOf({ 'team_search/a.md': [SHA.a, 'hello'] });
    const res = json(await readRoute(t.ctx, personal, post({ path: 'team_search/a.md', offset: 0, limit: 1 })));
    expect(res).toMatchObject({ path: 'team_search/a.md', sha256: SHA.a, size: 5, mounted: false });
    expect(res.contentBase64).toBeUndefined();
    expect(res.page).toBeDefined();
  });

  it('reads small files synchronously and the rest through read(); a mount asks for the mount decision', async () => {
    const t = contextOf({ 'team_search/a.md': [SHA.a, 'A'], 'team_search/b.big': [SHA.b, 'B'] }, undefined, true);
    const res = json(await readRoute(t.ctx, personal, post({ path: 'team_search/a.md', mount: true })));
    expect(res).toEqual({ path: 'team_search/a.md', sha256: SHA.a, size: 1, contentBase64: Buffer.from('A').toString('base64'), mounted: true });
    await readRoute(t.ctx, personal, post({ path: 'team_search/b.big' }));
    expect(t.reads).toEqual(['small team_search/a.md', 'small team_search/b.big', 'read team_search/b.big']);
    expect(t.audit.map((r) => r.action)).toEqual(['mount', 'read']);
    expect(t.recorded).toEqual([
      [{ path: 'team_search/a.md', sha256: SHA.a }, 'search'],
      [{ path: 'team_search/b.big', sha256: SHA.b }, null],
    ]);
  });

  it('a mount of a team already mounted, bound, or of the account is a read', async () => {
    const t = contextOf({ 'team_search/a.md': [SHA.a, 'A'], 'account/x.md': [SHA.c, 'X'] });
    await readRoute(t.ctx, { ...personal, mounted: ['search'] }, post({ path: 'team_search/a.md', mount: true }));
    await readRoute(t.ctx, { ...personal, team: 'search' }, post({ path: 'team_search/a.md', mount: true }));
    await readRoute(t.ctx, personal, post({ path: 'account/x.md', mount: true }));
    expect(t.audit.map((r) => r.action)).toEqual(['read', 'read', 'read']);
    expect(t.recorded.map(([, team]) => team)).toEqual([null, null, null]);
  });
});

describe('manifestRoute', () => {
  it('lists account, the bound team and mounted teams once each, with their DUTY.md, leaving out what is denied', async () => {
    const t = contextOf({ 'account/DUTY.md': [SHA.a, '# Account duty'], 'team_search/DUTY.md': [SHA.b, '# Search duty'], 'team_ops/DUTY.md': [SHA.c, '# Ops duty'], 'team_billing/DUTY.md': [SHA.c, '# Billing duty'] });
    const session = { ...personal, team: 'search', mounted: ['search', 'ops', 'billing'] };
    const res = json(await manifestRoute(t.ctx, session));
    const text = res.text as string;
    expect(text).toContain('# Account duty');
    expect(text).toContain('# Search duty');
    expect(text).toContain('# Ops duty');
    // billing is mounted but the creator is no longer a member: left out.
    expect(text).not.toContain('# Billing duty');
    expect(text.split('# Search duty')).toHaveLength(2);
    expect(text.indexOf('# Search duty')).toBeLessThan(text.indexOf('## Mounted teams'));
    expect(text.indexOf('# Ops duty')).toBeGreaterThan(text.indexOf('## Mounted teams'));
    expect(res.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(t.audit.map((r) => [r.scope, r.action, r.result])).toEqual([
      ['account', 'manifest', 'allow'],
      ['team_search', 'manifest', 'allow'],
      ['team_ops', 'manifest', 'allow'],
      ['team_billing', 'manifest', 'deny'],
    ]);
  });

  it("a team session's manifest holds its own team and the account only, whatever is in its mounted list", async () => {
    const t = contextOf({ 'account/DUTY.md': [SHA.a, '# Account duty'], 'team_billing/DUTY.md': [SHA.c, '# Billing duty'] }, { status: 'ok', teams: ['ops'] });
    const res = json(await manifestRoute(t.ctx, { ...personal, kind: 'team', team: 'billing', mounted: ['ops'] }));
    expect(res.text).toContain('# Account duty');
    expect(res.text).toContain('# Billing duty');
    expect(res.text).not.toContain('team_ops');
    expect(res.text).toContain('None yet.');
    expect(t.reads).toEqual(['read account/DUTY.md', 'read team_billing/DUTY.md']);
  });
});

describe('reminderRoute', () => {
  const readSet: ReadSetEntry[] = [
    { path: 'team_search/same.md', sha256: SHA.a },
    { path: 'team_search/edited.md', sha256: SHA.a },
    { path: 'team_search/gone.md', sha256: SHA.a },
    { path: 'team_ops/x.md', sha256: SHA.a },
    { path: 'team_billing/y.md', sha256: SHA.a },
  ];
  const files: Record<string, [string, string]> = {
    'team_search/same.md': [SHA.a, 's'],
    'team_search/edited.md': [SHA.b, 'e'],
    'team_ops/x.md': [SHA.a, 'x'],
    'team_billing/y.md': [SHA.a, 'y'],
  };

  it('names what changed and what is gone or no longer loadable, and keeps the read set current', async () => {
    const t = contextOf(files, { status: 'ok', teams: ['search', 'ops'] });
    const res = json(await reminderRoute(t.ctx, { ...personal, readSet }, query({ today: '2026-02-03' })));
    expect(res.date).toBe('2026-02-03');
    expect(res.changed).toEqual(['team_search/edited.md']);
    expect(res.deleted).toEqual(['team_search/gone.md', 'team_billing/y.md']);
    expect(res.text).toMatch(/^Today's date is 2026-02-03\./);
    expect(t.replaced).toEqual([
      [
        { path: 'team_search/same.md', sha256: SHA.a },
        { path: 'team_search/edited.md', sha256: SHA.b },
        { path: 'team_ops/x.md', sha256: SHA.a },
      ],
    ]);
    // One decision per scope of the read set.
    expect(t.audit.map((r) => [r.scope, r.action])).toEqual([
      ['team_search', 'reminder'],
      ['team_ops', 'reminder'],
      ['team_billing', 'reminder'],
    ]);
  });

  it('while membership is down, says nothing of the teams it cannot decide and forgets none of their files', async () => {
    const t = contextOf(files, { status: 'error', error: 'down' });
    const res = json(await reminderRoute(t.ctx, { ...personal, readSet }, query({})));
    expect(res.date).toBe('2026-03-04');
    expect(res.changed).toEqual([]);
    expect(res.deleted).toEqual([]);
    expect(t.replaced).toEqual([readSet]);
  });

  it('refuses a date that is not one, naming it', async () => {
    const t = contextOf(files);
    const res = await reminderRoute(t.ctx, { ...personal, readSet }, query({ today: '2026-13-01' }));
    expect(res.status).toBe(400);
    expect(json(res)).toEqual({ error: { code: 'invalid_argument', message: 'today must be a date like 2025-01-31, got "2026-13-01"' } });
    expect(t.replaced).toEqual([]);
  });
});
