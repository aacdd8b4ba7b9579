// The audit trail's file and record: one JSON line per decision appended in
// order, flush() resolving once they reached the file, reopen() after a
// rename writing a new 0600 file with no line lost, a write failure logged
// once; and the record a decision becomes (never the token).

import { mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileAuditSink, memoryAuditSink, toAuditRecord, type AuditRecord } from '../src/server/access/audit-log.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kfs-audit-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const alice = { id: 'ses_1', kind: 'personal', creator: 'alice' };
const record = (scope: string): AuditRecord => toAuditRecord('2026-01-01T00:00:00.000Z', 'r1', alice, 'open', { scope, allowed: true, rule: 'account' });
const lines = async (file: string) => (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as AuditRecord).scope);

describe('toAuditRecord', () => {
  it('names the session by id, with its kind, creator, team, the decision and the request', () => {
    const r = toAuditRecord('2026-01-01T00:00:00.000Z', 'r1', { id: 'ses_2', kind: 'team', creator: 'bob', team: 'payments' }, 'read', { scope: 'team_search', allowed: false, rule: 'team-session-other-team', membership: { status: 'ok', teams: ['x'] } }, 'req-7');
    expect(r).toEqual({
      time: '2026-01-01T00:00:00.000Z',
      replica: 'r1',
      session: 'ses_2',
      kind: 'team',
      creator: 'bob',
      team: 'payments',
      scope: 'team_search',
      action: 'read',
      rule: 'team-session-other-team',
      membership: { status: 'ok', teams: ['x'] },
      result: 'deny',
      requestId: 'req-7',
    });
  });

  it('null for a missing team, membership and request id; allow when allowed', () => {
    expect(record('account')).toMatchObject({ team: null, membership: null, requestId: null, result: 'allow' });
  });
});

describe('fileAuditSink', () => {
  it('appends one JSON line per record, in order, in a new 0600 file under new 0700 directories', async () => {
    const file = join(dir, 'logs', 'deep', 'audit.log');
    const sink = fileAuditSink(file, () => {});
    for (const s of ['a', 'b', 'c']) sink.append(record(s));
    await sink.flush();
    expect(await lines(file)).toEqual(['a', 'b', 'c']);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'logs', 'deep'))).mode & 0o777).toBe(0o700);
    await sink.flush();
    await sink.close();
  });

  it('appends to what is already there', async () => {
    const file = join(dir, 'audit.log');
    const first = fileAuditSink(file, () => {});
    first.append(record('a'));
    await first.close();
    const second = fileAuditSink(file, () => {});
    second.append(record('b'));
    await second.close();
    expect(await lines(file)).toEqual(['a', 'b']);
  });

  it('reopen after a rename: the old lines in the renamed file, the new ones in a new file', async () => {
    const file = join(dir, 'audit.log');
    const sink = fileAuditSink(file, () => {});
    sink.append(record('before'));
    await sink.flush();
    await rename(file, `${file}.1`);
    sink.append(record('still-old'));
    await sink.reopen();
    sink.append(record('after'));
    await sink.close();
    expect(await lines(`${file}.1`)).toEqual(['before', 'still-old']);
    expect(await lines(file)).toEqual(['after']);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it('a file it cannot write is logged once, naming it; a reopen that works writes again', async () => {
    const file = join(dir, 'audit.log');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(file);
    const logs: string[] = [];
    const sink = fileAuditSink(file, (l) => logs.push(l));
    sink.append(record('lost'));
    await new Promise((r) => setTimeout(r, 50));
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatch(new RegExp(`^audit log ${file}: EISDIR`));
    await rm(file, { recursive: true });
    await sink.reopen().catch(() => undefined);
    sink.append(record('kept'));
    await sink.close();
    expect(await lines(file)).toEqual(['kept']);
  });
});

describe('memoryAuditSink', () => {
  it('keeps the records in order', async () => {
    const sink = memoryAuditSink();
    sink.append(record('a'));
    sink.append(record('b'));
    await sink.flush();
    await sink.reopen();
    await sink.close();
    expect(sink.records.map((r) => r.scope)).toEqual(['a', 'b']);
  });
});
