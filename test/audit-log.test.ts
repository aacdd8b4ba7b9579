// The audit trail's file and record: one JSON line per decision appended in
// order, flush() resolving once they reached the file, reopen() after a
// rename writing a new 0600 file with no line lost, a write failure logged
// once; and the record a decision becomes (never the token).

import { mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Writable } from 'node:stream';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditBuffer, Outage } from '../src/server/access/audit-buffer.js';
import { fileAuditSink, memoryAuditSink, streamAuditSink, toAuditRecord, type AuditRecord } from '../src/server/access/audit-log.js';

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
    // Reopened and failing again: a new line (the operator rotated into the same problem).
    await sink.reopen().catch(() => undefined);
    sink.append(record('lost again'));
    await new Promise((r) => setTimeout(r, 50));
    expect(logs).toHaveLength(2);
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

describe('the stdout sink, word for word', () => {
  /** A stdout whose reader takes each line only when `next()` is called. */
  function slowReader() {
    const written: string[] = [];
    const pending: (() => void)[] = [];
    const out = new Writable({
      highWaterMark: 1,
      write(chunk: Buffer, _enc, done) {
        written.push(chunk.toString());
        pending.push(done);
      },
    });
    return { out, written, next: () => pending.shift()?.(), waiting: () => pending.length };
  }

  it('a reader that stops: one line naming the bound; "working again" only once nothing is held', async () => {
    const r = slowReader();
    const logs: string[] = [];
    const sink = streamAuditSink(r.out, 2, (l) => logs.push(l), () => {});
    for (let i = 0; i < 5; i++) sink.append(record(`s${i}`));
    expect(logs).toEqual(['audit log: stdout failing (the reader of stdout is not keeping up); up to 2 decisions wait while the reader is not reading, beyond that the oldest are dropped and counted in knowledgefs_audit_dropped_total']);
    // One line taken: the reader drains, one more is written, one is still held.
    r.next();
    await new Promise((res) => setImmediate(res));
    expect(r.written).toHaveLength(2);
    expect(logs).toHaveLength(1);
    while (r.waiting() > 0) {
      r.next();
      await new Promise((res) => setImmediate(res));
    }
    expect(logs[1]).toBe('audit log: stdout working again; 2 decisions were dropped meanwhile');
    expect(r.written.map((l) => (JSON.parse(l) as AuditRecord).scope)).toEqual(['s0', 's3', 's4']);
  });

  it('an error of the stream is logged as the outage', () => {
    const logs: string[] = [];
    const out = new Writable({ write: (_c, _e, done) => done() });
    streamAuditSink(out, 2, (l) => logs.push(l), () => {});
    out.emit('error', new Error('EPIPE: broken pipe'));
    expect(logs).toEqual([expect.stringMatching(/^audit log: stdout failing \(EPIPE: broken pipe\); up to 2 decisions wait/)]);
  });

  it('flush resolves once the reader took every line; close waits at most a second for a reader that does not read', async () => {
    const r = slowReader();
    const sink = streamAuditSink(r.out, 10, () => {}, () => {});
    sink.append(record('a'));
    sink.append(record('b'));
    let flushed = false;
    const flushing = sink.flush().then(() => (flushed = true));
    await new Promise((res) => setTimeout(res, 20));
    expect(flushed).toBe(false);
    while (!flushed) {
      r.next();
      await new Promise((res) => setTimeout(res, 10));
    }
    await flushing;
    expect(r.written).toHaveLength(2);
    // Taken by the reader, not only handed to the stream.
    expect(r.waiting()).toBe(0);
    sink.append(record('stuck'));
    const started = performance.now();
    await sink.close();
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(5_000);
  });

  it('an empty sink flushes and closes at once', async () => {
    const sink = streamAuditSink(new Writable({ write: (_c, _e, done) => done() }), 10, () => {}, () => {});
    const started = performance.now();
    await sink.flush();
    await sink.close();
    await sink.reopen();
    expect(performance.now() - started).toBeLessThan(500);
  });
});

describe('Outage and AuditBuffer', () => {
  it('an outage is one line down and one line up, with what was dropped between', () => {
    const logs: string[] = [];
    const o = new Outage('postgres', (l) => logs.push(l), 'up to 5 wait');
    expect(o.down).toBe(false);
    o.worked();
    expect(logs).toEqual([]);
    o.dropped(7);
    o.failed('connection refused');
    o.failed('still refused');
    expect(o.down).toBe(true);
    o.dropped(2);
    o.dropped(3);
    o.worked();
    o.worked();
    expect(o.down).toBe(false);
    expect(logs).toEqual([
      'audit log: postgres failing (connection refused); up to 5 wait, beyond that the oldest are dropped and counted in knowledgefs_audit_dropped_total',
      'audit log: postgres working again; 5 decisions were dropped meanwhile',
    ]);
  });

  it('drops nothing (no onDrop call at all) while it holds at most max', () => {
    const calls: number[] = [];
    const b = new AuditBuffer<number>(2, (n) => calls.push(n));
    b.push(1);
    b.push(2);
    b.putBack(b.take(2));
    expect(calls).toEqual([]);
    b.push(3);
    expect(calls).toEqual([1]);
  });

  it('keeps the order over many takes (past compaction)', () => {
    const b = new AuditBuffer<number>(5000, () => {});
    const out: number[] = [];
    for (let i = 0; i < 4000; i++) b.push(i);
    while (b.size > 0) out.push(...b.take(7));
    expect(out).toEqual(Array.from({ length: 4000 }, (_, i) => i));
  });
});
