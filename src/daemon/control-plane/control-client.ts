// What the mount daemon needs from the control plane, as one interface:
// HttpControlClient (http-control-client.ts) is the real one, over HTTP to
// one or several replicas; tests wrap or fake it.

import type { Plan } from '../../core/session/plan.js';
import type { CanLoadRequest, CanLoadResponse, ManifestResponse, ReadRequest, ReadResponse, ReminderResponse, SessionView } from '../../core/wire.js';
import type { BatchItem } from './batch-stream.js';

export interface FileBody {
  readonly body: Buffer;
  /** The sha256 the server claims (x-kfs-sha256), if it sent one. */
  readonly sha256: string | undefined;
  /** The body's own sha256 when the client already computed it (so the caller need not hash it again). */
  readonly actual?: string | undefined;
}

export interface PlanRequest {
  readonly threshold: number;
  /** The version the daemon has: a 304 (null) when the plan still matches it. */
  readonly etag?: string | undefined;
  /** Long-poll: let the server hold an unchanged answer up to this long. */
  readonly waitMs?: number | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** What the daemon needs from the control plane; tests wrap or fake it. */
export interface ControlClient {
  readonly serverUrl: string;
  session(): Promise<SessionView>;
  /** The current plan, or null when it still equals `etag`. */
  plan(req: PlanRequest): Promise<Plan | null>;
  /** Resolves when the session may open files of `scope` now; throws not_found/denied otherwise. */
  grant(scope: string): Promise<void>;
  /**
   * Raw file bytes; more than `maxBytes` → `integrity`. Verification is the
   * caller's job. `sha256`: the version the plan names (a control plane that
   * still holds it may answer it rather than a newer one).
   */
  file(scope: string, path: string, maxBytes: number, sha256?: string): Promise<FileBody>;
  /**
   * Files of one scope in one request, in `paths` order, each verified against
   * the sha256 its frame announces (not the plan's: that is the caller's job).
   * Throws at the first framing error, wrong byte or truncation; items already
   * yielded stay valid. Optional: clients without it are used file by file.
   */
  batch?(scope: string, paths: readonly string[], opts: BatchOptions): AsyncIterable<BatchItem>;
  read(req: ReadRequest): Promise<ReadResponse>;
  /** CanLoadScope for a harness's skills, tools and sub-agents; refusals are answers. */
  canLoad(req: CanLoadRequest): Promise<CanLoadResponse>;
  manifest(): Promise<ManifestResponse>;
  reminder(): Promise<ReminderResponse>;
  close(): Promise<void>;
}

export interface BatchOptions {
  /** A frame announcing more bytes than this fails the batch (`integrity`). */
  readonly maxFileBytes: number;
  readonly signal?: AbortSignal | undefined;
  /** Background work (content prefetch): marked so the control plane may shed it (ShedError) while it serves agents first. */
  readonly prefetch?: boolean;
}
