// A stand-in for fs.watch (the data directory's watch takes one): each watch
// it places is recorded, and the test fires its events, makes it report an
// error, or makes placing a watch throw.

import { EventEmitter } from 'node:events';
import type { WatchFunction } from '../../src/server/packs/data-watch.js';

export interface FakeWatcher extends EventEmitter {
  readonly dir: string;
  closed: boolean;
  /** An event about the entry `name` of its directory (null: no name). */
  fire(name: string | null): void;
}

/** `refuse` answers the error placing a watch on `dir` throws, or undefined to place it. */
export function fakeWatch(refuse: (dir: string) => NodeJS.ErrnoException | undefined = () => undefined) {
  const placed: FakeWatcher[] = [];
  const watch: WatchFunction = (dir, listener) => {
    const err = refuse(dir);
    if (err !== undefined) throw err;
    const w = Object.assign(new EventEmitter(), {
      dir,
      closed: false,
      close() {
        w.closed = true;
      },
      fire(name: string | null) {
        listener('rename', name);
      },
    });
    placed.push(w);
    return w as unknown as ReturnType<WatchFunction>;
  };
  /** The directories watched now, in the order their watches were placed. */
  const open = () => placed.filter((w) => !w.closed).map((w) => w.dir);
  /** Fires `name` on the watch of `dir` that is open now (if any). */
  const fire = (dir: string, name: string | null) => placed.filter((w) => !w.closed && w.dir === dir).at(-1)?.fire(name);
  return { watch, placed, open, fire };
}
