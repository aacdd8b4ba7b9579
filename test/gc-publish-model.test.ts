// A model of `gc --delete` and `publish` in one bucket, run over every
// ordering of their steps: each step is one request, atomic at the store
// (a read, an upload, the pointer write, a delete landing), and a delete
// lands as its own step, any time after gc decided it (a request the network
// holds). The decisions are the code's own pure rules (core/gc-fence.ts:
// mayDelete, mayReuse, mayCommit, fenceIsIdle; gc-roots.ts: historyRoots);
// the steps follow gc.ts and publish.ts in order. After every step of every
// ordering the current pointer must name only objects that exist (a replica
// may start at any moment). The rules as they stand hold in all of them;
// with the fence left out, or old indexes reused as before, orderings that
// break the publication exist and are found, and the code of before fails
// the same way. (gc's re-check before each batch is not needed in these
// orderings once the fence stands: it narrows what a publish that predates
// the fence can lose.) The same races against a real server:
// gc-publish-race.test.ts.

import { describe, expect, it } from 'vitest';
import { fenceIsIdle, mayCommit, mayDelete, mayReuse, type FenceSeen } from '../src/core/gc-fence.js';
import { historyRoots } from '../src/store/gc/gc-roots.js';

/** Which rules are on (all of them is the code as it is). */
interface Rules {
  /** gc raises gc.json before marking and lowers it after its deletes; publish decides again across it. */
  readonly fence: boolean;
  /** publish reuses an old index or directory.json it finds (as before) instead of uploading it again. */
  readonly reuseOldMetadata: boolean;
  /** gc asks each key's age and reads the roots again before sending its batch. */
  readonly recheck: boolean;
}
const NOW: Rules = { fence: true, reuseOldMetadata: false, recheck: true };
const BEFORE: Rules = { fence: false, reuseOldMetadata: true, recheck: false };

// Time is a step counter. Everything in the bucket at the start was written at 0, older than
// both the grace and the reuse hour; whatever is written during the run is young to both.
const WINDOW = 1;

/** Publications by id: the keys each names (blobs, indexes, directory.json). */
const POINTERS: Record<string, readonly string[]> = {
  p1: ['blobs/v1', 'indexes/i1', 'directories/d1', 'blobs/duty'],
  p2: ['blobs/v2', 'indexes/i2', 'directories/d3', 'blobs/duty'],
  p3: ['blobs/v3', 'indexes/i3', 'directories/d3', 'blobs/duty'],
  // The publish: back to the first one's content (names objects no root names, all old).
  p4: ['blobs/v1', 'indexes/i1', 'directories/d1', 'blobs/duty'],
};
const historyOf = (id: string) => `publications/${id}.json`;

interface World {
  /** key → LastModified. History entries' content is their pointer's id. */
  readonly objects: ReadonlyMap<string, number>;
  readonly pointer: string;
  readonly fence: FenceSeen;
  readonly clock: number;
}

interface Gc {
  readonly pc: number;
  readonly named: ReadonlySet<string>;
  readonly doomed: readonly string[];
  readonly ages: ReadonlyMap<string, number | null>;
  readonly sent: readonly string[] | null;
}

interface Publish {
  readonly pc: number;
  readonly prev: string | null;
  readonly before: FenceSeen;
  /** Keys still to decide, then to upload. */
  readonly toCheck: readonly string[];
  readonly toUpload: readonly string[];
}

type Step<A> = (w: World, a: A, rules: Rules) => [World, A] | null;

const at = (w: World, changes: Partial<World>): World => ({ ...w, ...changes, clock: w.clock + 1 });
const put = (w: World, key: string): World => {
  const objects = new Map(w.objects);
  objects.set(key, w.clock);
  return at(w, { objects });
};
const fence = (state: 'deleting' | 'idle', run: string): FenceSeen => ({ bytes: `${state} ${run}`, fence: { state, run, expiresAt: '9999-01-01T00:00:00.000Z' } });

/** gc's mark: the current pointer, the history roots (historyRoots, keep 1), and everything they name. */
function mark(w: World): Set<string> {
  const entries = [...w.objects].filter(([k]) => k.startsWith('publications/')).map(([key, lastModified]) => ({ key, size: 1, lastModified }));
  const roots = new Set([w.pointer]);
  const named = new Set<string>();
  for (const key of historyRoots(entries, 1, WINDOW).keys()) {
    named.add(key);
    roots.add(key.slice('publications/'.length, -'.json'.length));
  }
  for (const id of roots) {
    named.add(historyOf(id));
    for (const k of POINTERS[id] ?? []) named.add(k);
  }
  return named;
}

const GC_STEPS: Step<Gc>[] = [
  // Raise the fence.
  (w, g, r) => [r.fence ? at(w, { fence: fence('deleting', 'gc') }) : w, { ...g, pc: g.pc + 1 }],
  // Mark.
  (w, g) => [at(w, {}), { ...g, pc: g.pc + 1, named: mark(w) }],
  // List: what is old and named by no root.
  (w, g) => [at(w, {}), { ...g, pc: g.pc + 1, doomed: [...w.objects].filter(([k, t]) => k !== 'current.json' && mayDelete(k, t, g.named, WINDOW)).map(([k]) => k) }],
  // Rule 3: each key's age again…
  (w, g, r) => [at(w, {}), { ...g, pc: g.pc + 1, ages: r.recheck ? new Map(g.doomed.map((k) => [k, w.objects.get(k) ?? null])) : new Map(g.doomed.map((k) => [k, 0])) }],
  // …then the roots again, and send the batch.
  (w, g, r) => {
    const named = r.recheck ? new Set([...g.named, ...mark(w)]) : g.named;
    return [at(w, {}), { ...g, pc: g.pc + 1, sent: g.doomed.filter((k) => mayDelete(k, g.ages.get(k) ?? null, named, WINDOW)) }];
  },
  // The delete lands (whenever the network lets it).
  (w, g) => {
    const objects = new Map(w.objects);
    for (const k of g.sent ?? []) objects.delete(k);
    return [at(w, { objects }), { ...g, pc: g.pc + 1 }];
  },
  // Its answer came: lower the fence.
  (w, g, r) => [r.fence ? at(w, { fence: fence('idle', 'gc') }) : w, { ...g, pc: g.pc + 1 }],
];

const P = { readPrev: 0, fence0: 1, check: 2, upload: 3, fence1: 4, history: 5, pointer: 6, done: 7 } as const;

function publishStep(w: World, p: Publish, rules: Rules): [World, Publish] | null {
  switch (p.pc) {
    case P.readPrev:
      return [at(w, {}), { ...p, pc: P.fence0, prev: w.pointer }];
    case P.fence0: {
      // Waits (no step) while a gc is deleting.
      if (rules.fence && !fenceIsIdle(w.fence, 0)) return null;
      const named = new Set(POINTERS[p.prev as string]);
      return [at(w, {}), { ...p, pc: P.check, before: w.fence, toCheck: (POINTERS.p4 as string[]).filter((k) => !named.has(k)), toUpload: [] }];
    }
    case P.check: {
      const [key, ...rest] = p.toCheck;
      if (key === undefined) return publishStep(w, { ...p, pc: P.upload }, rules);
      const t = w.objects.get(key) ?? null;
      const reuse = rules.reuseOldMetadata && !key.startsWith('blobs/') ? t !== null : mayReuse(t, WINDOW);
      return [at(w, {}), { ...p, toCheck: rest, toUpload: reuse ? p.toUpload : [...p.toUpload, key] }];
    }
    case P.upload: {
      const [key, ...rest] = p.toUpload;
      if (key === undefined) return publishStep(w, { ...p, pc: P.fence1 }, rules);
      return [put(w, key), { ...p, toUpload: rest }];
    }
    case P.fence1:
      if (!rules.fence || mayCommit(p.before, w.fence, 0)) return [at(w, {}), { ...p, pc: P.history }];
      return [at(w, {}), { ...p, pc: P.fence0 }];
    case P.history:
      return [put(w, historyOf('p4')), { ...p, pc: P.pointer }];
    case P.pointer:
      return [at(w, { pointer: 'p4' }), { ...p, pc: P.done }];
    default:
      return null;
  }
}

function start(): World {
  const objects = new Map<string, number>();
  for (const id of ['p1', 'p2', 'p3']) {
    objects.set(historyOf(id), 0);
    for (const k of POINTERS[id] ?? []) objects.set(k, 0);
  }
  objects.set('current.json', 0);
  return { objects, pointer: 'p3', fence: null, clock: WINDOW };
}

/** What a replica starting now finds missing. */
const missing = (w: World) => (POINTERS[w.pointer] ?? []).filter((k) => !w.objects.has(k));

interface Outcome {
  orderings: number;
  broken: { steps: string[]; missing: string[] } | null;
}

/** Every ordering of gc's and publish's steps, depth first; stops at the first that breaks the publication. */
function explore(rules: Rules): Outcome {
  let orderings = 0;
  let broken: Outcome['broken'] = null;
  const walk = (w: World, g: Gc, p: Publish, steps: string[]) => {
    if (broken !== null) return;
    const gone = missing(w);
    if (gone.length > 0) {
      broken = { steps, missing: gone };
      return;
    }
    const gcStep = GC_STEPS[g.pc];
    const afterGc = gcStep === undefined ? null : gcStep(w, g, rules);
    const afterPublish = publishStep(w, p, rules);
    if (afterGc === null && afterPublish === null) {
      if (p.pc !== P.done || g.pc < GC_STEPS.length) throw new Error(`stuck: gc at ${g.pc}, publish at ${p.pc}`);
      orderings++;
      return;
    }
    if (afterGc !== null) walk(afterGc[0], afterGc[1], p, [...steps, `gc#${g.pc}`]);
    if (afterPublish !== null) walk(afterPublish[0], g, afterPublish[1], [...steps, `publish#${p.pc}`]);
  };
  walk(start(), { pc: 0, named: new Set(), doomed: [], ages: new Map(), sent: null }, { pc: P.readPrev, prev: null, before: null, toCheck: [], toUpload: [] }, []);
  return { orderings, broken };
}

describe('gc --delete and publish, every ordering', () => {
  it('with the rules as they stand, no ordering leaves the pointer naming a missing object', () => {
    const out = explore(NOW);
    expect(out.broken).toBeNull();
    // Every ordering was walked to its end (thousands: the count guards against a model that stops early).
    expect(out.orderings).toBeGreaterThan(1_000);
  });

  it('the code of before (no fence, old indexes reused, no re-check) breaks it: a delete lands after publish re-uploaded a blob', () => {
    const out = explore(BEFORE);
    expect(out.broken).not.toBeNull();
    expect(out.broken?.missing).toContain('indexes/i1');
  });

  it('each of the fence and the reuse rule is needed: without either, an ordering breaks the publication', () => {
    expect(explore({ ...NOW, fence: false }).broken).not.toBeNull();
    expect(explore({ ...NOW, reuseOldMetadata: true }).broken?.missing).toEqual(expect.arrayContaining(['indexes/i1', 'directories/d1']));
  });
});
