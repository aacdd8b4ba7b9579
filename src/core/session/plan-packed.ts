// The packed form of a plan: the answer to GET /v1/plan when the request
// accepts PACKED_PLAN_TYPE (docs/API.md). The plan's JSON without its file
// lists comes first; then each scope sent whole has four sections of bytes:
//
//   paths     every path in UTF-8, each followed by "\n" (a pack path has no
//             control character, so "\n" cannot occur inside one)
//   sha256s   32 raw bytes per file
//   sizes     one float64 (little-endian) per file
//   mtimesMs  one float64 (little-endian) per file
//
// in the rows' order (sorted by path). Why: at 100 000 files the JSON forms
// are 12–16 MB of 400 000 values, each a string or a number the mount
// daemon makes, checks and keeps before its mount is ready, and on a VM
// that is mostly fresh memory touched and copied by the garbage collector.
// Packed, the paths become one string a path is cut from when asked for,
// the sha256s stay bytes until a file is built or fetched, and sizes and
// mtimes are two flat arrays. The scope version is the same hash over the
// same text, computed here from the bytes (packedScopeVersion).

import { createHash } from 'node:crypto';
import type { ScopeSnapshot } from './plan.js';
import type { FileTable, ScopeSurvey } from './file-table.js';

/** The media type a request accepts, and the packed answer carries. */
export const PACKED_PLAN_TYPE = 'application/vnd.knowledgefs.packed-plan';

/** The body's first bytes: the format and its revision. */
export const PACKED_PLAN_MAGIC = 'kfsplan1';

/** Magic, then the header's length as a uint32 (little-endian), then the header. */
export const PACKED_HEADER_OFFSET = PACKED_PLAN_MAGIC.length + 4;

/** Bytes per file in the sha256s section. */
export const SHA256_BYTES = 32;
/** Bytes per file in the sizes and mtimesMs sections. */
export const FLOAT64_BYTES = 8;
const NEWLINE = 0x0a;

/** A scope sent whole, as the header lists it: its sections' sizes follow from these two counts. */
export interface PackedScopeHead {
  readonly scope: string;
  readonly version: string;
  readonly totalBytes: number;
  readonly fileCount: number;
  /** Bytes of the paths section, its newlines included. */
  readonly pathBytes: number;
}

/** One scope, packed once per snapshot by the control plane. */
export interface PackedScope {
  readonly head: PackedScopeHead;
  /** The four sections, one after another. */
  readonly sections: Buffer;
}

/** Bytes of a scope's four sections. */
export function packedSectionBytes(fileCount: number, pathBytes: number): number {
  return pathBytes + fileCount * (SHA256_BYTES + 2 * FLOAT64_BYTES);
}

export function packScope(snapshot: ScopeSnapshot): PackedScope {
  const files = snapshot.files;
  const n = files.length;
  let text = '';
  for (const f of files) text += `${f.path}\n`;
  const pathBytes = Buffer.byteLength(text);
  const sections = Buffer.allocUnsafe(packedSectionBytes(n, pathBytes));
  sections.write(text, 0, 'utf8');
  let at = pathBytes;
  for (const f of files) at += sections.write(f.sha256, at, 'hex');
  for (const f of files) at = sections.writeDoubleLE(f.size, at);
  for (const f of files) at = sections.writeDoubleLE(f.mtimeMs, at);
  const head: PackedScopeHead = { scope: snapshot.scope, version: snapshot.version, totalBytes: snapshot.totalBytes, fileCount: n, pathBytes };
  return { head, sections };
}

/** Magic, the header's length, the header: what comes before the scopes' sections. */
export function packedPlanPrefix(headerJson: string): Buffer {
  const header = Buffer.from(headerJson, 'utf8');
  const prefix = Buffer.allocUnsafe(PACKED_HEADER_OFFSET + header.length);
  prefix.write(PACKED_PLAN_MAGIC, 0, 'latin1');
  prefix.writeUInt32LE(header.length, PACKED_PLAN_MAGIC.length);
  header.copy(prefix, PACKED_HEADER_OFFSET);
  return prefix;
}

const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
/** Bytes handed to the hash at once: one update per file costs more than the hashing. */
const HASH_PIECE_BYTES = 64 * 1024;
/** Room one file needs in a piece besides its path: "\0", 64 hex digits, "\n". */
const ENTRY_TAIL_BYTES = 66;

// The typed array's own indexOf, a V8 builtin (Buffer's is a JS wrapper around it).
const indexOfByte = Uint8Array.prototype.indexOf;

/** Where the path starting at `at` ends: its newline, or the end of the section. */
function pathEnd(paths: Uint8Array, at: number): number {
  const end = indexOfByte.call(paths, NEWLINE, at);
  return end === -1 ? paths.length : end;
}

/** Writes `path \0 sha256-hex \n` for one file into `piece` at `k`; returns where it ends. */
function writeEntry(piece: Buffer, k: number, paths: Uint8Array, at: number, end: number, sha256s: Uint8Array, sha: number): number {
  for (let j = at; j < end; j++) piece[k++] = paths[j] as number;
  piece[k++] = 0;
  for (let j = sha; j < sha + SHA256_BYTES; j++) {
    const b = sha256s[j] as number;
    piece[k++] = HEX_DIGITS[b >> 4] as number;
    piece[k++] = HEX_DIGITS[b & 15] as number;
  }
  piece[k++] = NEWLINE;
  return k;
}

/**
 * sortedScopeVersion (plan.ts) of packed sections: sha256 over
 * `path \0 sha256-hex \n` for every file, the path as its UTF-8 bytes. The
 * paths section must hold `count` newline-ended paths, which the caller
 * has checked. The work per file is in two small functions rather than in
 * the loop: V8 optimises a function called thousands of times long before
 * it replaces a loop it is already running (6 003 files: ~5 ms instead of
 * ~15 ms on a cold start).
 */
export function packedScopeVersion(paths: Uint8Array, sha256s: Uint8Array, count: number): string {
  const hash = createHash('sha256');
  const piece = Buffer.allocUnsafe(HASH_PIECE_BYTES);
  let k = 0;
  let at = 0;
  for (let i = 0; i < count; i++) {
    const end = pathEnd(paths, at);
    if (k + (end - at) + ENTRY_TAIL_BYTES > HASH_PIECE_BYTES) {
      hash.update(piece.subarray(0, k));
      k = 0;
    }
    if (end - at + ENTRY_TAIL_BYTES <= HASH_PIECE_BYTES) k = writeEntry(piece, k, paths, at, end, sha256s, i * SHA256_BYTES);
    else {
      // A pack path is at most 4 096 bytes; a longer one is hashed where it lies.
      hash.update(paths.subarray(at, end));
      k = writeEntry(piece, 0, paths, end, end, sha256s, i * SHA256_BYTES);
    }
    at = end + 1;
  }
  hash.update(piece.subarray(0, k));
  return hash.digest('hex');
}

/**
 * A packed scope's files, read by index. The paths stay one string with the
 * offset where each starts (a path is cut out when asked for: a cut that
 * dies young costs the collector nothing, 100 000 strings kept for good are
 * copied twice), and the sha256s stay bytes until asked for.
 */
export class PackedTable implements FileTable {
  constructor(
    private readonly paths: string,
    /** Where each path starts in `paths`, and one more entry past the last one's newline. */
    private readonly starts: Uint32Array,
    private readonly sha256s: Buffer,
    private readonly sizes: Float64Array,
    private readonly mtimesMs: Float64Array,
    readonly survey?: ScopeSurvey | undefined,
  ) {}
  get length(): number {
    return this.sizes.length;
  }
  path(i: number): string {
    return this.paths.slice(this.starts[i], (this.starts[i + 1] as number) - 1);
  }
  size(i: number): number {
    return this.sizes[i] as number;
  }
  mtimeMs(i: number): number {
    return this.mtimesMs[i] as number;
  }
  sha256(i: number): string {
    return this.sha256s.toString('hex', i * SHA256_BYTES, (i + 1) * SHA256_BYTES);
  }
}
