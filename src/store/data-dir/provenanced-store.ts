// A data directory's pack store whose snapshots carry their provenance
// (provenance-recorder.ts): the same snapshots, files and reads as the
// DirPackStore inside it, each decorated with the provenance known now. A
// snapshot object is decorated once per look, so the plan route's
// per-snapshot caches still hold between changes; `generation` moves when
// either the files or what git says of them changed.

import type { ScopeName } from '../../core/scope.js';
import type { ScopeSnapshot } from '../../core/session/plan.js';
import type { PackFile, PackStore } from '../pack-store.js';
import type { DirPackStore } from './dir-pack-store.js';
import type { ProvenanceRecorder } from './provenance-recorder.js';

export class ProvenancedPackStore implements PackStore {
  private readonly decorated = new WeakMap<ScopeSnapshot, { generation: number; snapshot: ScopeSnapshot }>();
  private sorted: { from: readonly ScopeSnapshot[]; generation: number; scopes: readonly ScopeSnapshot[] } | null = null;

  constructor(
    readonly inner: DirPackStore,
    readonly recorder: ProvenanceRecorder,
  ) {}

  get generation(): number {
    return this.inner.generation + this.recorder.generation;
  }

  private decorate(s: ScopeSnapshot): ScopeSnapshot {
    const made = this.decorated.get(s);
    if (made !== undefined && made.generation === this.recorder.generation) return made.snapshot;
    const snapshot: ScopeSnapshot = { scope: s.scope, version: s.version, totalBytes: s.totalBytes, files: s.files, provenance: this.recorder.provenanceOf(s) };
    this.decorated.set(s, { generation: this.recorder.generation, snapshot });
    return snapshot;
  }

  scopes(): readonly ScopeSnapshot[] {
    const from = this.inner.scopes();
    if (this.sorted?.from === from && this.sorted.generation === this.recorder.generation) return this.sorted.scopes;
    const scopes = from.map((s) => this.decorate(s));
    this.sorted = { from, generation: this.recorder.generation, scopes };
    return scopes;
  }

  snapshot(scope: ScopeName): ScopeSnapshot | undefined {
    const s = this.inner.snapshot(scope);
    return s === undefined ? undefined : this.decorate(s);
  }

  read(scope: ScopeName, path: string): Promise<PackFile | null> {
    return this.inner.read(scope, path);
  }

  readSmallSync(scope: ScopeName, path: string, parents?: Map<string, string | null>): PackFile | null | undefined {
    return this.inner.readSmallSync(scope, path, parents);
  }
}
