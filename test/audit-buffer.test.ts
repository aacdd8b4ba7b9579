// The bounded buffer in front of a slow audit sink, and the stdout sink
// (`--audit-log -`) whose reader stops reading: appends never wait, at most
// the buffer is held, the oldest go first, every drop is counted, and the
// outage is one log line (plus one when the reader is back).

import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AuditBuffer } from '../src/server/access/audit-buffer.js';
import { streamAuditSink, type AuditRecord } from '../src/server/access/audit-log.js';

const record = (i: number): AuditRecord => ({
  time: new Date(0).toISOString(),
  replica: 'r1',
  session: `ses_${i}`,
  kind: 'personal',
  creator: 'alice',
  team: null,
  scope: 'account',
  action: 'open',
  rule: 'account',
  membership: null,
  result: 'allow',
  requestId: null,
});

describe('AuditBuffer', () => {
  it('holds at most max, drops the oldest and counts them; a batch put back goes in front', () => {
    let dropped = 0;
    const b = new AuditBuffer<number>(3, (n) => (dropped += n));
    for (let i = 0; i < 5; i++) b.push(i);
    expect(dropped).toBe(2);
    const batch = b.take(2);
    expect(batch).toEqual([2, 3]);
    b.push(5);
    b.push(6);
    b.putBack(batch);
    // [2, 3, 4, 5, 6] over a bound of 3: the two oldest go.
    expect(dropped).toBe(4);
    expect(b.take(10)).toEqual([4, 5, 6]);
  });
});

describe('the stdout sink', () => {
  it('a reader that stops reading never blocks an append; beyond the buffer the oldest are dropped, counted, logged once', async () => {
    const written: string[] = [];
    let release: (() => void) | undefined;
    // A pipe nobody reads: the first write never completes until released.
    const out = new Writable({
      highWaterMark: 1,
      write(chunk: Buffer, _enc, done) {
        written.push(chunk.toString());
        release = () => {
          release = undefined;
          done();
        };
      },
    });
    const logs: string[] = [];
    let dropped = 0;
    const sink = streamAuditSink(out, 10, (l) => logs.push(l), (n) => (dropped += n));
    const started = performance.now();
    for (let i = 0; i < 1000; i++) sink.append(record(i));
    expect(performance.now() - started).toBeLessThan(1_000);
    // One line went to the stream, ten wait in the buffer, the rest were dropped.
    expect(dropped).toBe(1000 - 1 - 10);
    expect(logs.filter((l) => l.includes('stdout failing')).length).toBe(1);
    // The reader comes back: the newest ten follow the first line.
    while (release !== undefined) {
      release();
      await new Promise((r) => setImmediate(r));
    }
    await sink.flush();
    const sessions = written.map((l) => (JSON.parse(l) as AuditRecord).session);
    expect(sessions).toEqual(['ses_0', ...Array.from({ length: 10 }, (_, i) => `ses_${990 + i}`)]);
    expect(logs.filter((l) => l.includes('stdout working again; 989 decisions were dropped')).length).toBe(1);
  });
});
