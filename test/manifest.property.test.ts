// Property tests of the manifest.
//
// 1. Through the real control plane (directory pack store, rescans, the
//    manifest route as the server assembles it, over HTTP on 127.0.0.1:0): any
//    sequence of adds, edits and deletes of files other than a scope's own
//    DUTY.md (nested DUTY.md files included) in any scope — advertised,
//    mounted or invisible — leaves the manifest byte-identical; an
//    edit of an advertised or mounted DUTY.md changes it; an edit of a DUTY.md
//    the session cannot see does not.
// 2. The 32 KiB DUTY.md cap on arbitrary Unicode: valid UTF-8, within the
//    cap, a prefix of the original, and as long as it can be.

import { mkdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DUTY_CAP_BYTES, buildManifest, truncateUtf8 } from '../src/core/session/manifest.js';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';

describe('manifest through the control plane', () => {
  let data = '';
  const scopeDirs: Record<string, string> = {};
  let cp: TestControlPlane;
  let token = '';

  const put = (scope: string, path: string, text: string) => {
    const file = join(scopeDirs[scope] as string, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
  };

  async function manifest(): Promise<{ text: string; sha256: string }> {
    await cp.rescan();
    const res = await fetch(`${cp.url}/v1/manifest`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as { text: string; sha256: string };
  }

  beforeAll(async () => {
    data = await makeDataDir({
      teams: { payments: 'Payments', search: 'Search', storage: 'Storage' },
      users: { alice: { teams: ['payments', 'search'] } },
      files: {
        'account/DUTY.md': '# Account\nShared policies.\n',
        'teams/payments/DUTY.md': '# Payments\nCards, payouts, ledger.\n',
        'teams/search/DUTY.md': '# Search ✓\nIndexing and ranking.\n',
        'teams/storage/DUTY.md': '# Storage\nCeph and Postgres.\n',
        'teams/payments/runbooks/a.md': 'a',
      },
    });
    Object.assign(scopeDirs, {
      account: join(data, 'account'),
      team_payments: join(data, 'teams', 'payments'),
      team_search: join(data, 'teams', 'search'),
      team_storage: join(data, 'teams', 'storage'),
    });
    // Rescans only when the test asks for one.
    cp = await startControlPlane({ dataDir: data, scanIntervalMs: 600_000 });
    token = (await cp.createSession({ kind: 'personal', creator: 'alice', team: 'payments' })).token;
    // Mount search through the read tool's route so the mount section is exercised too.
    const read = await fetch(`${cp.url}/v1/read`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ path: 'team_search/DUTY.md', mount: true }),
    });
    expect(read.status).toBe(200);
  });

  afterAll(async () => {
    await cp?.close();
    if (data) await removeDataDir(data);
  });

  it('carries account, bound team and the mounted team, never the invisible one', async () => {
    const m = await manifest();
    expect(m.text).toContain('# Account\nShared policies.\n');
    expect(m.text).toContain('# Payments\nCards, payouts, ledger.\n');
    expect(m.text.indexOf('# Search ✓')).toBeGreaterThan(m.text.indexOf('## Mounted teams'));
    expect(m.text).not.toContain('Storage');
    expect(m.text).not.toContain('runbooks/a.md');
    expect(m.text).not.toContain(data);
  });

  it('property: adds, edits and deletes of files other than a scope\'s DUTY.md (nested DUTY.md too) leave it byte-identical', async () => {
    const baseline = await manifest();
    const segment = fc.constantFrom('runbooks', 'notes', 'DUTY.md', 'duty.md', 'DUTY.MD', 'DUTY.md.bak', 'é', 'deep', 'a b', '2024');
    const op = fc.record({
      kind: fc.constantFrom('write', 'write', 'delete'),
      scope: fc.constantFrom('account', 'team_payments', 'team_search', 'team_storage'),
      // At least two segments, or one that is not DUTY.md: never a scope's root DUTY.md.
      path: fc.array(segment, { minLength: 1, maxLength: 3 }).map((segs) => (segs.length === 1 && segs[0] === 'DUTY.md' ? ['x', 'DUTY.md'] : segs).join('/')),
      text: fc.string({ unit: 'binary', maxLength: 200 }),
      pick: fc.nat(),
    });
    // A name with no dot gets `.md`; DUTY.md, DUTY.MD, DUTY.md.bak… are written as they are.
    const fileName = (path: string) => (/\.[^/]*$/.test(path) ? path : `${path}.md`);
    const written: { scope: string; path: string }[] = [];
    let nestedDuties = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 6 }), async (ops) => {
        for (const o of ops) {
          if (o.kind === 'write') {
            try {
              put(o.scope, fileName(o.path), o.text);
              written.push({ scope: o.scope, path: fileName(o.path) });
              if (fileName(o.path).endsWith('/DUTY.md')) nestedDuties++;
            } catch {
              // A path that collides with an existing file or directory: skip it.
            }
          } else if (written.length > 0) {
            const [victim] = written.splice(o.pick % written.length, 1);
            if (victim) rmSync(join(scopeDirs[victim.scope] as string, victim.path), { force: true });
          }
        }
        const now = await manifest();
        expect(now.text).toBe(baseline.text);
        expect(now.sha256).toBe(baseline.sha256);
      }),
      {
        numRuns: 25,
        // Always among the runs: a nested DUTY.md in the bound team and in the mounted one.
        examples: [[[
          { kind: 'write', scope: 'team_payments', path: 'runbooks/DUTY.md', text: '# nested, not the team duty\n', pick: 0 },
          { kind: 'write', scope: 'team_search', path: 'deep/é/DUTY.md', text: '# nested too\n', pick: 0 },
        ]]],
      },
    );
    expect(nestedDuties).toBeGreaterThanOrEqual(2);
  });

  it('changes when an advertised or mounted DUTY.md changes, not when an invisible one does', async () => {
    const before = await manifest();
    put('team_storage', 'DUTY.md', '# Storage\nedited\n');
    expect((await manifest()).text).toBe(before.text);
    for (const scope of ['account', 'team_payments', 'team_search']) {
      const was = await manifest();
      put(scope, 'DUTY.md', `# ${scope} edited ${Math.random()}\n`);
      const after = await manifest();
      expect(after.text, scope).not.toBe(was.text);
      expect(after.sha256).not.toBe(was.sha256);
    }
    // A scope losing its DUTY.md changes it too, and says so.
    unlinkSync(join(scopeDirs['team_search'] as string, 'DUTY.md'));
    expect((await manifest()).text).toContain('This scope has no `DUTY.md`');
  });
});

describe('DUTY.md cap', () => {
  it('property: any Unicode DUTY.md is cut to valid UTF-8 within 32 KiB, as long as possible', () => {
    fc.assert(
      fc.property(fc.nat({ max: 8 }), fc.string({ unit: 'binary', minLength: 1, maxLength: 64 }), (pad, chunk) => {
        // Repeat a random chunk past the cap, shifted by `pad` ASCII bytes so cuts land everywhere.
        const duty = 'x'.repeat(pad) + chunk.repeat(Math.ceil((DUTY_CAP_BYTES + 16) / Buffer.byteLength(chunk)));
        const { text, truncated } = truncateUtf8(duty, DUTY_CAP_BYTES);
        expect(truncated).toBe(true);
        const bytes = Buffer.from(text, 'utf8');
        expect(bytes.length).toBeLessThanOrEqual(DUTY_CAP_BYTES);
        expect(text.isWellFormed()).toBe(true);
        expect(bytes.toString('utf8')).toBe(text);
        expect(duty.startsWith(text)).toBe(true);
        const next = String.fromCodePoint(duty.codePointAt(text.length) as number);
        expect(bytes.length + Buffer.byteLength(next)).toBeGreaterThan(DUTY_CAP_BYTES);

        const m = buildManifest({ scopes: [{ scope: 'account', duty }], mounted: [] });
        expect(Buffer.from(m.text, 'utf8').toString('utf8')).toBe(m.text);
        // The body always ends with a newline before the pointer line; a cut body
        // that already ends with one gets no second.
        const body = text.endsWith('\n') ? text : `${text}\n`;
        expect(m.text).toContain(`${body}\n[knowledge/account/DUTY.md is longer than 32 KiB`);
      }),
      { numRuns: 200 },
    );
  });
});
