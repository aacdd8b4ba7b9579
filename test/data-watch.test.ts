// The data directory's watch with a stand-in for fs.watch: which directories
// it watches as scans list them, what it lets go of, what each event asks to
// rescan, and how it gives up (once, closing every watch) when watching
// stops working.

import { describe, expect, it } from 'vitest';
import { DataWatch, emptyWork, fullWork, mergeWork, workForEvent, type ScanWork } from '../src/server/packs/data-watch.js';
import { fakeWatch } from './helpers/fake-watch.js';

function watchOf(refuse?: (dir: string) => NodeJS.ErrnoException | undefined) {
  const fake = fakeWatch(refuse);
  const changes: ScanWork[] = [];
  const failures: string[] = [];
  const watch = new DataWatch({ root: '/data', changed: (w) => changes.push(w), failed: (r) => failures.push(r), watch: fake.watch });
  return { ...fake, watch, changes, failures };
}

const errno = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('DataWatch', () => {
  it('watches each directory a scan lists, once per round; renew places them again, closing the old one after', () => {
    const t = watchOf();
    t.watch.listing('/data', null);
    t.watch.listing('/data/teams', null);
    t.watch.listing('/data/teams/payments', 'team_payments');
    t.watch.listing('/data/teams/payments', 'team_payments');
    expect(t.placed.map((w) => w.dir)).toEqual(['/data', '/data/teams', '/data/teams/payments']);
    expect(t.watch.size).toBe(3);
    expect(t.watch.healthy).toBe(true);
    t.watch.renew();
    t.watch.listing('/data/teams/payments', 'team_payments');
    expect(t.placed.map((w) => w.dir)).toEqual(['/data', '/data/teams', '/data/teams/payments', '/data/teams/payments']);
    expect(t.placed[2]?.closed).toBe(true);
    expect(t.placed[3]?.closed).toBe(false);
    expect(t.watch.size).toBe(3);
  });

  it('an event says what to rescan', () => {
    const t = watchOf();
    t.watch.listing('/data/teams/payments', 'team_payments');
    t.watch.listing('/data/teams/payments/runbooks', 'team_payments');
    t.placed[1]?.fire('db.md');
    expect(t.changes).toEqual([{ full: false, directory: false, layout: false, packs: new Map([['team_payments', new Set(['runbooks'])]]) }]);
    expect(t.watch.size).toBe(2);
  });

  it('an event named after the directory itself, or without a name, lets go of that watch', () => {
    const t = watchOf();
    t.watch.listing('/data/teams/payments/runbooks', 'team_payments');
    t.watch.listing('/data/teams/payments/notes', 'team_payments');
    t.placed[0]?.fire('runbooks');
    expect(t.placed[0]?.closed).toBe(true);
    t.placed[1]?.fire(null);
    expect(t.placed[1]?.closed).toBe(true);
    expect(t.watch.size).toBe(0);
    expect(t.changes.map((w) => [...(w.packs.get('team_payments') ?? [])])).toEqual([['runbooks'], ['notes']]);
    // Listed again: watched again.
    t.watch.listing('/data/teams/payments/runbooks', 'team_payments');
    expect(t.watch.size).toBe(1);
  });

  it('after a pack scan, directories of the scanned part that it did not list are let go; others stay', () => {
    const t = watchOf();
    for (const d of ['/p', '/p/a', '/p/a/x', '/p/b', '/p/ab']) t.watch.listing(d, 'team_p');
    t.watch.listing('/q', 'team_q');
    t.watch.packScanned('team_p', new Set(['/p/a']), ['/p/a']);
    expect(t.open().sort()).toEqual(['/p', '/p/a', '/p/ab', '/p/b', '/q']);
    t.watch.packScanned('team_p', new Set(['/p', '/p/b']), ['/p']);
    expect(t.open().sort()).toEqual(['/p', '/p/b', '/q']);
    t.watch.packScanned('team_none', new Set(), ['/']);
    expect(t.watch.size).toBe(3);
  });

  it('a pack that is gone loses all its watches; DATA/ and DATA/teams/ stay', () => {
    const t = watchOf();
    t.watch.listing('/data', null);
    t.watch.listing('/data/teams/a', 'team_a');
    t.watch.listing('/data/teams/a/x', 'team_a');
    t.watch.listing('/data/teams/b', 'team_b');
    t.watch.packsPresent(new Set(['team_b']));
    expect(t.open()).toEqual(['/data', '/data/teams/b']);
    t.watch.packsPresent(new Set());
    expect(t.open()).toEqual(['/data']);
  });

  it('a directory that cannot be watched because it is gone or unreadable is skipped quietly', () => {
    for (const code of ['ENOENT', 'ENOTDIR', 'EACCES', 'EPERM', 'ENAMETOOLONG']) {
      const t = watchOf((dir) => (dir === '/data/x' ? errno(code) : undefined));
      t.watch.listing('/data/x', 'team_x');
      t.watch.listing('/data/y', 'team_x');
      expect(t.watch.healthy, code).toBe(true);
      expect(t.failures).toEqual([]);
      expect(t.open()).toEqual(['/data/y']);
    }
  });

  it('any other refusal stops all watching at once, said once, with the limit to raise', () => {
    const cases: [NodeJS.ErrnoException, string][] = [
      [errno('ENOSPC'), 'cannot watch /d/2: the inotify watch limit is reached (sysctl fs.inotify.max_user_watches)'],
      [errno('EMFILE'), 'cannot watch /d/2: the inotify instance limit is reached (sysctl fs.inotify.max_user_instances)'],
      [errno('EIO', 'EIO: i/o error\nsecond line'), 'cannot watch /d/2: EIO: i/o error\\nsecond line'],
    ];
    for (const [err, reason] of cases) {
      const t = watchOf((dir) => (dir === '/d/2' ? err : undefined));
      t.watch.listing('/d/1', 'team_d');
      t.watch.listing('/d/2', 'team_d');
      expect(t.failures).toEqual([reason]);
      expect(t.watch.healthy).toBe(false);
      expect(t.open()).toEqual([]);
      expect(t.watch.size).toBe(0);
      // Nothing more: no new watches, no events, no second failure.
      t.watch.listing('/d/3', 'team_d');
      t.placed[0]?.fire('f');
      t.placed[0]?.emit('error', errno('EIO'));
      expect(t.placed.length).toBe(1);
      expect(t.changes).toEqual([]);
      expect(t.failures.length).toBe(1);
    }
  });

  it('a watch reporting an error later stops all watching, said once', () => {
    const t = watchOf();
    t.watch.listing('/d/1', 'team_d');
    t.watch.listing('/d/2', null);
    t.placed[1]?.emit('error', errno('EIO', 'EIO: i/o error'));
    t.placed[0]?.emit('error', new Error('again'));
    expect(t.failures).toEqual(['watch of /d/2 failed: EIO: i/o error']);
    expect(t.placed.every((w) => w.closed)).toBe(true);
    expect(t.watch.healthy).toBe(false);
  });

  it('a thrown value that is not an Error is still named', () => {
    const t = watchOf(() => 'plain string' as unknown as NodeJS.ErrnoException);
    t.watch.listing('/d', null);
    expect(t.failures).toEqual(['cannot watch /d: plain string']);
  });

  it('close lets go of every watch; later listings and events do nothing', () => {
    const t = watchOf();
    t.watch.listing('/d/1', 'team_d');
    t.watch.listing('/d', null);
    t.watch.close();
    expect(t.placed.every((w) => w.closed)).toBe(true);
    expect(t.watch.size).toBe(0);
    t.watch.listing('/d/2', 'team_d');
    t.placed[0]?.fire('x');
    expect(t.placed.length).toBe(2);
    expect(t.changes).toEqual([]);
    expect(t.watch.healthy).toBe(true);
  });
});

describe('ScanWork', () => {
  it('empty and full', () => {
    expect(emptyWork()).toEqual({ full: false, directory: false, layout: false, packs: new Map() });
    expect(fullWork()).toEqual({ full: true, directory: true, layout: true, packs: new Map() });
    expect(emptyWork()).not.toBe(emptyWork());
  });

  it('merging keeps every flag set on either side and every directory of every pack', () => {
    const into: ScanWork = { full: false, directory: true, layout: false, packs: new Map([['team_a', new Set(['x'])]]) };
    mergeWork(into, { full: false, directory: false, layout: true, packs: new Map([['team_a', new Set(['y', 'x'])], ['team_b', new Set([''])]]) });
    expect(into).toEqual({ full: false, directory: true, layout: true, packs: new Map([['team_a', new Set(['x', 'y'])], ['team_b', new Set([''])]]) });
    mergeWork(into, fullWork());
    expect(into.full).toBe(true);
    mergeWork(into, emptyWork());
    expect(into).toMatchObject({ full: true, directory: true, layout: true });
  });
});

describe('workForEvent', () => {
  it('in DATA/: the data dir itself renamed is a full rescan', () => {
    expect(workForEvent('/srv/data', '/srv/data', null, 'data')).toEqual({ ...emptyWork(), full: true });
  });

  it('in a pack: the directory relative to the pack; the pack itself is ""; outside its base is the whole pack', () => {
    expect(workForEvent('/data', '/data/account/a/b', 'account', 'f')).toEqual({ ...emptyWork(), packs: new Map([['account', new Set(['a/b'])]]) });
    expect(workForEvent('/data', '/data/account', 'account', 'f').packs).toEqual(new Map([['account', new Set([''])]]));
    expect(workForEvent('/data', '/data/accountx/y', 'account', 'f').packs).toEqual(new Map([['account', new Set([''])]]));
    expect(workForEvent('/data', '/elsewhere', 'bogus scope' as never, 'f').packs).toEqual(new Map([['bogus scope', new Set([''])]]));
  });

  it('in DATA/teams/: an event without a name is a full rescan', () => {
    expect(workForEvent('/data', '/data/teams', null, null)).toEqual({ full: true, directory: false, layout: true, packs: new Map() });
  });
});
