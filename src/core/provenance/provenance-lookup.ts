// A scope's provenance looked up by path rather than by file index, for the
// mount: its tree keeps no file list per scope, only nodes, so the runs are
// turned once per plan into the path each run starts at (a handful for most
// scopes) and a file's record is one binary search over those. Built from
// the plan's file table, in whatever form it came (file-table.ts).

import type { FileTable } from '../session/file-table.js';
import { fileProvenance, type FileProvenance, type ProvenanceRecord, type ScopeProvenance } from './provenance.js';

export class ProvenanceLookup {
  private constructor(
    readonly provenance: ScopeProvenance,
    private readonly firstPaths: readonly string[],
    private readonly records: readonly ProvenanceRecord[],
  ) {}

  /** `provenance` of the files in `table` (its runs cover them in order). */
  static of(provenance: ScopeProvenance, table: FileTable): ProvenanceLookup {
    const firstPaths: string[] = [];
    const records: ProvenanceRecord[] = [];
    let at = 0;
    for (let r = 0; r < provenance.runs.length; r += 2) {
      if (at >= table.length) break;
      // A copy of its own: a path cut from a packed plan's one string would keep all of that string alive.
      firstPaths.push(Buffer.from(table.path(at), 'utf8').toString('utf8'));
      records.push(provenance.records[provenance.runs[r] as number] as ProvenanceRecord);
      at += provenance.runs[r + 1] as number;
    }
    return new ProvenanceLookup(provenance, firstPaths, records);
  }

  /** The record of the file at `path` (inside the scope), which the caller knows is one of the table's. */
  recordOf(path: string): ProvenanceRecord | undefined {
    const firsts = this.firstPaths;
    let lo = 0;
    let hi = firsts.length - 1;
    if (hi < 0 || path < (firsts[0] as string)) return undefined;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((firsts[mid] as string) <= path) lo = mid;
      else hi = mid - 1;
    }
    return this.records[lo];
  }

  /** The file's provenance as clients see it (its source URL expanded), or undefined. */
  fileProvenance(scope: string, path: string): FileProvenance | undefined {
    const record = this.recordOf(path);
    return record === undefined ? undefined : fileProvenance(record, this.provenance, scope, path);
  }
}
