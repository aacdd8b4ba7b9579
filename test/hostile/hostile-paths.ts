// fast-check arbitraries for paths an attacker would try: traversal in every
// spelling (`..`, `%2e%2e`, `%252e%252e`, overlong UTF-8 `%c0%ae`), unicode
// look-alikes of `.` and `/` (U+2024, U+FF0E, U+2215, U+FF0F), backslashes,
// NUL and other control bytes, over-long names, invalid UTF-8, names of the
// server's own files, and plain random bytes. Shared by the HTTP and the
// read-tool fuzzers so both face the same inputs.

import fc from 'fast-check';

/** Names worth aiming at: real files, the server's own files and the canaries. */
export const TARGET_NAMES = [
  'DUTY.md',
  'runbooks',
  'runbooks/restart.md',
  'directory.json',
  '.knowledgefs',
  '.knowledgefs/state.json',
  '.knowledgefs/audit.log',
  'state.json',
  'audit.log',
  'CANARY.txt',
  'link.md',
  'linkdir',
  'teams',
  'account',
  'team_storage',
  'team_payments',
  'storage',
  'etc/passwd',
] as const;

const DOT_DOT = [
  '..',
  '.',
  '...',
  '%2e%2e',
  '%2E%2E',
  '.%2e',
  '%2e.',
  '%252e%252e',
  '%25252e%25252e',
  '%c0%ae%c0%ae',
  '%e0%80%ae%e0%80%ae',
  '\u2024\u2024', // one dot leader
  '\uFF0E\uFF0E', // fullwidth full stop
  '%e2%80%a4%e2%80%a4',
  '%ef%bc%8e%ef%bc%8e',
  '..;',
  '..%00',
  '..%2f',
  '..%5c',
  '..\\',
  '.\u200b.',
] as const;

const SEPARATORS = ['/', '//', '\\', '%2f', '%2F', '%5c', '%255c', '%252f', '\u2215', '\uFF0F', '%e2%88%95', '/./', '/%2e/'] as const;

const NASTY_SEGMENTS = [
  '',
  '%00',
  '\u0000',
  '%0a',
  '\n',
  '\r\n',
  '%ff',
  '%fe%ff',
  '%',
  '%zz',
  '%%32%65',
  '?',
  '#',
  '%3f',
  '%23',
  ';',
  '~',
  'a'.repeat(256),
  'b'.repeat(5000),
  '\u202e',
  'DUTY.md\u0000.txt',
  'DUTY.md%00',
  'DUTY.md/',
  'DUTY.MD',
  'duty.md',
  ' DUTY.md',
  'DUTY.md ',
  '*',
  '$(id)',
  '`id`',
] as const;

const segment: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...DOT_DOT) },
  { weight: 4, arbitrary: fc.constantFrom(...TARGET_NAMES) },
  { weight: 3, arbitrary: fc.constantFrom(...NASTY_SEGMENTS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
);

/** A path below some scope: segments joined by separators of every spelling. */
export const hostileSuffix: fc.Arbitrary<string> = fc
  .array(fc.tuple(segment, fc.constantFrom(...SEPARATORS)), { minLength: 1, maxLength: 7 })
  .map((parts) => parts.map(([seg, sep], i) => (i === 0 ? seg : sep + seg)).join(''));

/** The scope part of a files URL, valid or not. */
export const hostileScope: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'account',
    'team_payments',
    'team_storage',
    'team_search',
    'team_ghost',
    'team_',
    'team_PAYMENTS',
    'Account',
    'teams',
    'teams/storage',
    'team_payments%2f..',
    'team_..',
    '..',
    '%2e%2e',
    '',
    '.knowledgefs',
    'account\u0000',
    'team_payments\\..\\team_storage',
  ),
  segment,
);

/** Either a string (sent as UTF-8) or raw bytes that need not be UTF-8 at all. */
export const hostileBytes: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a)),
  fc.constantFrom(
    Buffer.from([0x2e, 0x2e, 0x2f]), // ../
    Buffer.from([0xc0, 0xae, 0xc0, 0xae, 0x2f]), // overlong ../
    Buffer.from([0xff, 0xfe]),
    Buffer.from([0x00]),
    Buffer.from([0x2e, 0x00, 0x2e]),
  ),
);

/** A full request target for `GET /v1/files/...`, as bytes. */
export const hostileFilesTarget: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(hostileScope, hostileSuffix).map(([s, p]) => Buffer.from(`/v1/files/${s}/${p}`, 'utf8')) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(hostileScope, hostileBytes)
      .map(([s, b]) => Buffer.concat([Buffer.from(`/v1/files/${s}/`, 'utf8'), b])),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '/v1/files/',
      '/v1/files',
      '/v1/files/account',
      '/v1/files/account/',
      '/v1/files/../directory.json',
      '/v1/files/%2e%2e/directory.json',
      '/v1/files/account/../../CANARY.txt',
      '/v1/files/account/%2e%2e/%2e%2e/CANARY.txt',
      '/v1/files/account/..%2f..%2fCANARY.txt',
      '/v1/files/account/%252e%252e/%252e%252e/CANARY.txt',
      '/v1/files/account/link.md',
      '/v1/files/account/linkdir/secret.md',
      '/v1/files/account/..%5c..%5cCANARY.txt',
      '/v1/files/account/../.knowledgefs/state.json',
      '/v1/files/account/%2e%2e/.knowledgefs/state.json',
      '/v1/files/team_payments/../../teams/storage/DUTY.md',
      '/v1/files/team_payments/..%2f..%2fteams%2fstorage%2fDUTY.md',
      '/v1/files/team_payments%2f..%2fteam_storage/DUTY.md',
      '//v1/files/team_storage/DUTY.md',
      '/v1/files//team_storage/DUTY.md',
      '/v1//files/account/DUTY.md',
      '/v1/files/account/DUTY.md?x=/../../CANARY.txt',
      '/v1/files/account/DUTY.md#/../../CANARY.txt',
      'http://127.0.0.1/v1/files/account/../../CANARY.txt',
      '*',
      '/v1/files/CANARY.txt',
      '/v1/files/teams/storage/DUTY.md',
    ).map((s) => Buffer.from(s, 'utf8')),
  },
);
