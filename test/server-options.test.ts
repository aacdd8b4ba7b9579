// resolveOptions: the control plane's options validated once at start. Each
// default is the documented one, each bad value is a config error naming the
// option, and the files default into <data>/.knowledgefs only when there is a
// data directory (with --store they must be given).

import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { AUDIT_TO_POSTGRES, AUDIT_TO_STDOUT, internalDir, isStateUrl, resolveOptions, type ControlPlaneOptions } from '../src/server/options.js';

const TOKEN = 'kfsadmin_0123456789abcdef';
const base: ControlPlaneOptions = { dataDir: '/srv/knowledge', adminToken: TOKEN };
const AWS = { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret' };

/** The config error resolveOptions throws for `o`, as its message. */
function refusal(o: ControlPlaneOptions): string {
  try {
    resolveOptions(o);
  } catch (err) {
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('config');
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(o)}`);
}

describe('defaults', () => {
  it('are the documented ones, files under <data>/.knowledgefs', () => {
    const r = resolveOptions(base);
    expect(r).toMatchObject({
      dataDir: '/srv/knowledge',
      s3: undefined,
      stateFile: '/srv/knowledge/.knowledgefs/state.json',
      auditLog: '/srv/knowledge/.knowledgefs/audit.log',
      stateUrl: undefined,
      membershipUrl: undefined,
      blobCacheDir: undefined,
      membershipTimeoutMs: 2_000,
      watch: true,
      watchScanIntervalMs: 30_000,
      scanIntervalMs: 1_000,
      maxFileSize: 64 * 1024 * 1024,
      maxBodyBytes: 64 * 1024,
      maxWaitMs: 30_000,
      membershipRecheckMs: 2_000,
      maxLongPollsPerSession: 4,
      stateHeartbeatMs: 1_000,
      publicationPollMs: 500,
      blobCacheBytes: 256 * 1024 * 1024,
      blobCacheDiskBytes: 4 * 1024 * 1024 * 1024,
      auditRetentionMs: 30 * 24 * 3600 * 1000,
      auditBufferRecords: 10_000,
      replicaId: hostname(),
      adminToken: TOKEN,
      now: Date.now,
    });
    expect(internalDir('/d')).toBe('/d/.knowledgefs');
    // The --audit-log values that are not paths.
    expect([AUDIT_TO_STDOUT, AUDIT_TO_POSTGRES]).toEqual(['-', 'postgres']);
  });

  it('the log goes to stderr, one line each', () => {
    const r = resolveOptions(base);
    const written: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string) => (written.push(chunk), true)) as typeof process.stderr.write;
    try {
      r.log('hello');
    } finally {
      process.stderr.write = write;
    }
    expect(written).toEqual(['hello\n']);
  });

  it('what is given is kept; a trailing slash of the membership URL is dropped', () => {
    const log = () => {};
    const now = () => 7;
    const r = resolveOptions({
      ...base,
      stateFile: '/var/state.json',
      auditLog: '-',
      membershipUrl: 'https://members.example/api//',
      watch: false,
      maxWaitMs: 0,
      replicaId: 'replica-1:8080',
      auditBufferRecords: 1,
      maxLongPollsPerSession: 1,
      blobCacheDir: '/var/cache/kfs',
      log,
      now,
    });
    expect(r).toMatchObject({ stateFile: '/var/state.json', auditLog: '-', membershipUrl: 'https://members.example/api', watch: false, maxWaitMs: 0, replicaId: 'replica-1:8080', auditBufferRecords: 1, maxLongPollsPerSession: 1, blobCacheDir: '/var/cache/kfs' });
    expect(r.log).toBe(log);
    expect(r.now).toBe(now);
  });
});

describe('where packs, state and the audit log come from', () => {
  it('needs a data directory or a store, not both', () => {
    expect(refusal({ adminToken: TOKEN })).toBe('the data directory is required (--data DIR), or object storage (--store s3://BUCKET/PREFIX)');
    expect(refusal({ adminToken: TOKEN, dataDir: '' })).toMatch(/^the data directory is required/);
    expect(refusal({ ...base, store: 's3://knowledge/p' })).toBe('--data and --store exclude each other: packs come from the data directory or from object storage');
  });

  it('with --store, --state and --audit-log must be given, and the S3 config is resolved', () => {
    const store = { adminToken: TOKEN, store: 's3://knowledge/p', env: AWS };
    expect(refusal(store)).toBe('with --store, --state and --audit-log must be given (there is no data directory to keep them in)');
    expect(refusal({ ...store, stateFile: '/s.json' })).toBe('with --store, --audit-log must be given (there is no data directory to keep them in)');
    expect(refusal({ ...store, auditLog: '-' })).toBe('with --store, --state must be given (there is no data directory to keep them in)');
    const r = resolveOptions({ ...store, stateFile: '/s.json', auditLog: '-', s3Endpoint: 'http://127.0.0.1:9000', s3TimeoutMs: 1234 });
    expect(r.dataDir).toBeUndefined();
    expect(r.stateFile).toBe('/s.json');
    expect(r.s3).toMatchObject({ bucket: 'knowledge', prefix: 'p', endpoint: 'http://127.0.0.1:9000', timeoutMs: 1234, region: 'us-east-1' });
    expect(resolveOptions({ ...store, stateFile: '/s.json', auditLog: '-' }).s3?.timeoutMs).toBe(3_000);
    // PostgreSQL state: the state file is never opened, so none is needed.
    const pg = resolveOptions({ ...store, stateUrl: 'postgres://kfs@db:5432/kfs', auditLog: 'postgres' });
    expect(pg.stateFile).toBe('');
    expect(pg.auditLog).toBe('postgres');
    expect(refusal({ ...store, stateFile: '/s.json', auditLog: '-', s3TimeoutMs: 0 })).toBe('--s3-timeout must be a positive number, got 0');
  });

  it('--audit-log postgres needs PostgreSQL state', () => {
    expect(refusal({ ...base, auditLog: 'postgres' })).toBe('--audit-log postgres writes decisions to the state database: it needs --state postgres://… (or $KNOWLEDGEFS_STATE_URL)');
    expect(resolveOptions({ ...base, auditLog: 'postgres', stateUrl: 'postgresql://kfs@db/kfs' }).stateUrl).toBe('postgresql://kfs@db/kfs');
  });
});

describe('bad values name the option', () => {
  it('the admin token: at least 16 characters', () => {
    expect(refusal({ ...base, adminToken: '' })).toBe('the admin token must be at least 16 characters');
    expect(refusal({ ...base, adminToken: 'x'.repeat(15) })).toBe('the admin token must be at least 16 characters');
    expect(resolveOptions({ ...base, adminToken: 'x'.repeat(16) }).adminToken).toBe('x'.repeat(16));
  });

  it('the membership URL: an http(s) URL', () => {
    expect(refusal({ ...base, membershipUrl: 'members' })).toBe('--membership-url: not a URL: members');
    expect(refusal({ ...base, membershipUrl: 'ftp://members' })).toBe('--membership-url: expected http:// or https://, got ftp:');
    expect(resolveOptions({ ...base, membershipUrl: 'http://members' }).membershipUrl).toBe('http://members');
  });

  it('the state URL: postgres:// or postgresql://, and a URL', () => {
    const message = 'the session-state URL must look like postgres://USER@HOST:PORT/DATABASE';
    expect(refusal({ ...base, stateUrl: 'mysql://db/kfs' })).toBe(message);
    expect(refusal({ ...base, stateUrl: 'postgres://db:port/kfs' })).toBe(message);
    expect(resolveOptions({ ...base, stateUrl: 'POSTGRES://db/kfs' }).stateUrl).toBe('POSTGRES://db/kfs');
    expect(isStateUrl('postgresql://db')).toBe(true);
    expect(isStateUrl('postgres://db')).toBe(true);
    expect(isStateUrl('x-postgres://db')).toBe(false);
    expect(isStateUrl('/var/lib/postgres://x')).toBe(false);
    expect(isStateUrl('postgre://db')).toBe(false);
  });

  it('the audit retention: at least a day', () => {
    expect(refusal({ ...base, auditRetentionMs: 86_399_999 })).toBe('--audit-retention must be at least 1d (decisions are kept in daily partitions), got 86399999 ms');
    expect(resolveOptions({ ...base, auditRetentionMs: 86_400_000 }).auditRetentionMs).toBe(86_400_000);
    expect(refusal({ ...base, auditRetentionMs: -1 })).toBe('--audit-retention must be a positive number, got -1');
  });

  it('the replica id: 1-128 printable characters without spaces', () => {
    expect(refusal({ ...base, replicaId: 'a b' })).toBe('--replica-id must be 1-128 printable characters without spaces, got "a b"');
    expect(refusal({ ...base, replicaId: '' })).toMatch(/^--replica-id must be/);
    expect(refusal({ ...base, replicaId: 'x'.repeat(129) })).toMatch(/^--replica-id must be/);
    expect(refusal({ ...base, replicaId: 'é' })).toMatch(/^--replica-id must be/);
    expect(resolveOptions({ ...base, replicaId: 'x'.repeat(128) }).replicaId).toHaveLength(128);
    expect(resolveOptions({ ...base, replicaId: '!~' }).replicaId).toBe('!~');
  });

  it('durations and sizes: positive numbers (maxWaitMs may be 0)', () => {
    const cases: [keyof ControlPlaneOptions, string][] = [
      ['publicationPollMs', '--publication-poll'],
      ['blobCacheBytes', '--blob-cache'],
      ['blobCacheDiskBytes', '--blob-cache-disk'],
      ['stateHeartbeatMs', '--state-heartbeat'],
      ['membershipTimeoutMs', '--membership-timeout'],
      ['watchScanIntervalMs', '--watch-scan-interval'],
      ['scanIntervalMs', '--scan-interval'],
      ['maxFileSize', '--max-file-size'],
      ['maxBodyBytes', 'maxBodyBytes'],
      ['membershipRecheckMs', '--membership-recheck'],
    ];
    for (const [key, name] of cases) {
      expect(refusal({ ...base, [key]: 0 })).toBe(`${name} must be a positive number, got 0`);
      expect(refusal({ ...base, [key]: -5 })).toBe(`${name} must be a positive number, got -5`);
      expect(refusal({ ...base, [key]: Number.NaN })).toBe(`${name} must be a positive number, got NaN`);
      expect(refusal({ ...base, [key]: Number.POSITIVE_INFINITY })).toBe(`${name} must be a positive number, got Infinity`);
      expect(resolveOptions({ ...base, [key]: 0.5 })[key as 'maxFileSize']).toBe(0.5);
    }
    expect(refusal({ ...base, maxWaitMs: -1 })).toBe('maxWaitMs must be a non-negative number, got -1');
  });

  it('counts: whole numbers from 1', () => {
    expect(refusal({ ...base, maxLongPollsPerSession: 0 })).toBe('--max-long-polls must be a whole number ≥ 1, got 0');
    expect(refusal({ ...base, maxLongPollsPerSession: 1.5 })).toBe('--max-long-polls must be a whole number ≥ 1, got 1.5');
    expect(refusal({ ...base, auditBufferRecords: 0 })).toBe('auditBufferRecords must be a whole number ≥ 1, got 0');
  });
});
