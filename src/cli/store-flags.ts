// The object-store flags shared by `serve --store` and `publish`: the
// bucket URL, the endpoint and the per-request timeout. Credentials come only
// from the standard AWS environment, never from flags (argv is visible to
// every process on the machine).

import type { Command } from 'commander';
import { formatDurationFlag, parseDuration } from '../core/text/units.js';
import { S3ObjectStore } from '../store/objects/s3-object-store.js';
import { resolveS3Config } from '../store/objects/store-config.js';
import type { CliContext } from './context.js';
import { parsedOption } from './option-parser.js';

export interface StoreFlags {
  store?: string;
  s3Endpoint?: string;
  s3Timeout: number;
}

export const STORE_ENVIRONMENT = `Object storage (S3, MinIO, R2, GCS interoperability...): path-style requests to
--s3-endpoint, else $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL, else AWS's endpoint for
$AWS_REGION. Credentials: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY, $AWS_SESSION_TOKEN.`;

export function addS3Options(command: Command, defaultTimeoutMs: number, timeoutHelp: string): Command {
  return command
    .option('--s3-endpoint <url>', 'S3-compatible endpoint, e.g. http://minio:9000 (default: $AWS_ENDPOINT_URL_S3, else AWS)')
    .addOption(parsedOption('--s3-timeout <duration>', timeoutHelp, parseDuration, defaultTimeoutMs, formatDurationFlag(defaultTimeoutMs)));
}

export function openObjectStore(store: string, flags: StoreFlags, ctx: CliContext): S3ObjectStore {
  return new S3ObjectStore(resolveS3Config({ store, endpoint: flags.s3Endpoint, timeoutMs: flags.s3Timeout, env: ctx.env }));
}
