// Wakes plan long-polls when something that can change a plan happened,
// instead of each long-poll recomputing its plan on a timer (which also asked
// the membership service every time), and caps how many long-polls one
// session may hold at once.
//
// What changes a plan: the packs or directory.json (a scan that changed
// something: `allChanged`), or the session itself (a team mounted, the
// session revoked: `sessionChanged`). Memberships held by an external
// service change without telling us; long-polls re-check those on their own,
// at most once per --membership-recheck (plan-route.ts).
//
// No wakeup is lost between a long-poll computing its plan and starting to
// wait: it takes a `mark()` before computing, and `wait` returns at once if
// anything happened since that mark. Per-session state exists only while the
// session holds a long-poll.

export interface LongPoll {
  /** Where this session's changes stand now; pass it to `wait`. */
  mark(): string;
  /** Resolves when something changed since `mark` (at once if it already did), after `ms`, or when `signal` aborts. */
  wait(mark: string, ms: number, signal: AbortSignal): Promise<void>;
  /** The long-poll is over (always call it, once). */
  end(): void;
}

interface SessionPolls {
  active: number;
  changes: number;
  readonly waiters: Set<() => void>;
}

export class PlanWakeups {
  private all = 0;
  private readonly sessions = new Map<string, SessionPolls>();

  constructor(private readonly maxPerSession: number) {}

  /** Something that may change every session's plan happened (packs, directory.json). */
  allChanged(): void {
    // Stryker disable next-line UpdateOperator: a mark only has to differ from every earlier one; a counter that only goes down never repeats either
    this.all++;
    for (const s of this.sessions.values()) for (const wake of [...s.waiters]) wake();
  }

  /** Something that may change this session's plan happened (a mount, a revocation). */
  sessionChanged(sessionId: string): void {
    const s = this.sessions.get(sessionId);
    if (s === undefined) return; // no long-poll waiting: the next one computes afresh
    // Stryker disable next-line UpdateOperator: as for `all`: marks never repeat, whichever way the counter goes
    s.changes++;
    for (const wake of [...s.waiters]) wake();
  }

  /** Starts a long-poll for the session, or null when it already holds the most allowed. */
  begin(sessionId: string): LongPoll | null {
    let s = this.sessions.get(sessionId);
    if (s !== undefined && s.active >= this.maxPerSession) return null;
    if (s === undefined) {
      s = { active: 0, changes: 0, waiters: new Set() };
      this.sessions.set(sessionId, s);
    }
    s.active++;
    const polls = s;
    let ended = false;
    const mark = () => `${this.all}:${polls.changes}`;
    return {
      mark,
      wait: (since, ms, signal) => {
        if (mark() !== since || signal.aborted || ended) return Promise.resolve();
        return new Promise((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            // Stryker disable next-line CallExpression: a done() left in the set is a no-op when called again, and the set goes with the session's last long-poll; only memory
            polls.waiters.delete(done);
            resolve();
          };
          const timer = setTimeout(done, ms);
          // Stryker disable next-line ObjectLiteral,BooleanLiteral: done() removes the listener itself, so `once` changes nothing
          signal.addEventListener('abort', done, { once: true });
          polls.waiters.add(done);
        });
      },
      end: () => {
        if (ended) return;
        ended = true;
        polls.active--;
        if (polls.active === 0) this.sessions.delete(sessionId);
      },
    };
  }
}
