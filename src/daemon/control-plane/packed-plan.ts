// A packed plan's body (core/session/plan-packed.ts) cut into its header and
// each scope's sections. Every length is checked against the body before a
// section is cut, and the body must end with the last section: a body that
// is not exactly that is garbage on the wire (`unavailable`). What the header
// and the sections say is then checked as any plan is (wire-check.ts, which
// takes a scope whose `packed` is a PackedFiles: a value JSON cannot make).

import { KnowledgeError } from '../../core/errors.js';
import { FLOAT64_BYTES, PACKED_HEADER_OFFSET, PACKED_PLAN_MAGIC, PACKED_PLAN_TYPE, SHA256_BYTES, packedSectionBytes } from '../../core/session/plan-packed.js';

/** One scope's four sections, cut from the body, not yet checked. */
export class PackedFiles {
  constructor(
    readonly count: number,
    readonly paths: Buffer,
    readonly sha256s: Buffer,
    readonly sizes: Buffer,
    readonly mtimesMs: Buffer,
  ) {}
}

function bad(what: string): never {
  throw new KnowledgeError('unavailable', `control plane sent an invalid packed plan (${what})`);
}

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** Whether a response's content type is the packed plan. */
export function isPackedPlanType(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(';')[0]?.trim().toLowerCase() === PACKED_PLAN_TYPE;
}

/**
 * The header, each scope sent whole given `packed` sections in place of
 * its two counts. Stubs, and anything that is not an object, are left for
 * the plan check to judge.
 */
export function unpackPlan(body: Buffer): unknown {
  if (body.length < PACKED_HEADER_OFFSET || body.toString('latin1', 0, PACKED_PLAN_MAGIC.length) !== PACKED_PLAN_MAGIC) bad('no packed plan header');
  const headerBytes = body.readUInt32LE(PACKED_PLAN_MAGIC.length);
  if (headerBytes > body.length - PACKED_HEADER_OFFSET) bad('header longer than the body');
  let at = PACKED_HEADER_OFFSET + headerBytes;
  let header: unknown;
  try {
    header = JSON.parse(body.toString('utf8', PACKED_HEADER_OFFSET, at));
  } catch {
    bad('header is not JSON');
  }
  if (typeof header !== 'object' || header === null || !Array.isArray((header as { scopes?: unknown }).scopes)) bad('header without a list of scopes');
  const scopes = ((header as { scopes: unknown[] }).scopes).map((s: unknown) => {
    if (typeof s !== 'object' || s === null || (s as { unchanged?: unknown }).unchanged !== undefined) return s;
    const { fileCount, pathBytes, files, columns, ...rest } = s as Record<string, unknown>;
    if (files !== undefined || columns !== undefined || !isCount(fileCount) || !isCount(pathBytes)) bad('a scope sent whole must give fileCount and pathBytes, and no files or columns');
    if (packedSectionBytes(fileCount, pathBytes) > body.length - at) bad('sections longer than the body');
    const cut = (bytes: number): Buffer => body.subarray(at, (at += bytes));
    return { ...rest, packed: new PackedFiles(fileCount, cut(pathBytes), cut(SHA256_BYTES * fileCount), cut(FLOAT64_BYTES * fileCount), cut(FLOAT64_BYTES * fileCount)) };
  });
  if (at !== body.length) bad('bytes after the last scope');
  return { ...(header as object), scopes };
}
