// Provenance for a data directory served as it is (`serve --data`): each
// file's first-scanned time (when this control plane first saw these bytes
// at this path), this release, and, when the data directory is in a git work
// tree, the commit that last changed the file (git-history.ts) — given only
// while the bytes served are the ones git looked at, so an edit not yet
// committed never borrows the previous commit. The source URL template, when
// the operator gave one, is kept per scope with the scope's path in the
// repository.
//
// `look` runs after every scan (and on its own timer: a commit of bytes
// already served changes no file, so no scan sees it); `provenanceOf` is
// synchronous and cached per snapshot object and look, so a plan never waits
// for git.

import { buildScopeProvenance, provenanceRecord, type ProvenanceRecord, type ScopeProvenance, type SourceTemplate } from '../../core/provenance/provenance.js';
import { parseScope, type ScopeName } from '../../core/scope.js';
import type { ScopeSnapshot } from '../../core/session/plan.js';
import { lookAtGit, type FileCommit } from './git-history.js';

export interface ProvenanceRecorderOptions {
  readonly dataDir: string;
  /** The knowledgefs release recording it. */
  readonly release: string;
  /** The operator's `--source-url` template (checked by the caller). */
  readonly sourceUrl?: string | undefined;
  readonly log: (line: string) => void;
  readonly now?: () => number;
}

/** A scope's directory inside the data directory, ending in `/`. */
export function scopeDirPrefix(scope: ScopeName): string {
  const parsed = parseScope(scope);
  return parsed?.kind === 'team' ? `teams/${parsed.teamId}/` : 'account/';
}

interface Looked {
  readonly commit: FileCommit;
  /** The sha256 the file had in the snapshot git was asked about. */
  readonly sha256: string;
}

export class ProvenanceRecorder {
  /** Increases whenever what git says changed: snapshots are decorated again. */
  generation = 0;
  private commits = new Map<string, Looked>();
  private prefix = '';
  private lookedHead: string | null = null;
  private said: string | null = null;
  private readonly firstSeen = new Map<string, { sha256: string; at: string }>();
  private readonly cache = new WeakMap<ScopeSnapshot, { generation: number; provenance: ScopeProvenance }>();

  constructor(private readonly opts: ProvenanceRecorderOptions) {}

  private queue: Promise<unknown> = Promise.resolve();

  /** The HEAD of the last look; null when the data directory has no git history. */
  get head(): string | null {
    return this.lookedHead;
  }

  /** Asks git about every file of `snapshots`; true when anything it says changed. Looks run one at a time. */
  look(snapshots: readonly ScopeSnapshot[]): Promise<boolean> {
    const next = this.queue.then(() => this.lookNow(snapshots));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async lookNow(snapshots: readonly ScopeSnapshot[]): Promise<boolean> {
    const now = new Date((this.opts.now ?? Date.now)()).toISOString();
    const paths: string[] = [];
    const shaOf = new Map<string, string>();
    for (const s of snapshots) {
      const dir = scopeDirPrefix(s.scope);
      for (const f of s.files) {
        const rel = `${dir}${f.path}`;
        paths.push(rel);
        shaOf.set(rel, f.sha256);
        this.seen(rel, f.sha256, now);
      }
    }
    let result;
    try {
      result = await lookAtGit(this.opts.dataDir, paths);
    } catch (err) {
      result = `git failed: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (typeof result === 'string') {
      if (this.said !== result) this.opts.log(`provenance: ${this.opts.dataDir} has no git history to record (${result}); files carry no commit`);
      this.said = result;
      const changed = this.commits.size > 0 || this.lookedHead !== null;
      this.commits = new Map();
      this.lookedHead = null;
      if (changed) this.generation++;
      return changed;
    }
    this.said = null;
    const next = new Map<string, Looked>();
    for (const [rel, commit] of result.commits) next.set(rel, { commit, sha256: shaOf.get(rel) as string });
    const changed = this.lookedHead !== result.head || this.prefix !== result.prefix || !sameCommits(this.commits, next);
    this.commits = next;
    this.lookedHead = result.head;
    this.prefix = result.prefix;
    if (changed) this.generation++;
    return changed;
  }

  private seen(rel: string, sha256: string, at: string): string {
    const before = this.firstSeen.get(rel);
    if (before !== undefined && before.sha256 === sha256) return before.at;
    this.firstSeen.set(rel, { sha256, at });
    return at;
  }

  /** The provenance of `snapshot`'s files now. */
  provenanceOf(snapshot: ScopeSnapshot): ScopeProvenance {
    const cached = this.cache.get(snapshot);
    if (cached !== undefined && cached.generation === this.generation) return cached.provenance;
    const dir = scopeDirPrefix(snapshot.scope);
    const now = new Date((this.opts.now ?? Date.now)()).toISOString();
    const perFile: ProvenanceRecord[] = [];
    for (const f of snapshot.files) {
      const rel = `${dir}${f.path}`;
      const looked = this.commits.get(rel);
      const committed = looked !== undefined && looked.sha256 === f.sha256 ? looked.commit : undefined;
      perFile.push(
        provenanceRecord({
          publishedAt: this.seen(rel, f.sha256, now),
          knowledgefsVersion: this.opts.release,
          ...(committed !== undefined ? { commit: committed.commit, committedAt: committed.committedAt } : {}),
        }),
      );
    }
    const source: SourceTemplate | undefined = this.opts.sourceUrl === undefined ? undefined : { template: this.opts.sourceUrl, prefix: `${this.lookedHead === null ? '' : this.prefix}${dir}` };
    const provenance = buildScopeProvenance(perFile, source);
    this.cache.set(snapshot, { generation: this.generation, provenance });
    return provenance;
  }
}

function sameCommits(a: ReadonlyMap<string, Looked>, b: ReadonlyMap<string, Looked>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) {
    const w = b.get(k);
    if (w === undefined || w.commit.commit !== v.commit.commit || w.sha256 !== v.sha256) return false;
  }
  return true;
}
