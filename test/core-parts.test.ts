// The small pure rules of src/core that the rest of knowledgefs leans on,
// each through its exported functions: user names, request ids, pages cut by
// characters, sha256 text, scope names, the can-load request, the default
// socket path, the socket trust rule, pack paths and error codes.

import { describe, expect, it } from 'vitest';
import { CAN_LOAD_EXAMPLE, parseCanLoadRequest } from '../src/core/can-load-request.js';
import { ERROR_CODES, errorCodeOf, isErrorCode, isKnowledgeError, KnowledgeError } from '../src/core/errors.js';
import { defaultSocketPath, SOCKET_ENV } from '../src/core/local/socket-path.js';
import { directoriesUpToRoot, directoryTrustProblem, socketFileTrustProblem } from '../src/core/local/socket-trust.js';
import { assertPackPath, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, packPathProblem, segmentProblem, splitScopePath } from '../src/core/paths.js';
import { pageSha256, readPage, sliceChars } from '../src/core/read-page.js';
import { acceptRequestId, newRequestId, REQUEST_ID_HEADER } from '../src/core/request-id.js';
import { compareScopes, isValidTeamId, parseScope, teamScope } from '../src/core/scope.js';
import { isSha256, sha256Hex } from '../src/core/sha256.js';
import { httpUrl, parseListenAddress } from '../src/core/text/listen-address.js';
import { formatLogLine, LOG_FORMATS, parseLogFormat, redactSecrets } from '../src/core/text/log-line.js';
import { userNameError, userNameProblem } from '../src/core/user-name.js';

const thrown = (fn: () => unknown): KnowledgeError => {
  try {
    fn();
  } catch (err) {
    if (err instanceof KnowledgeError) return err;
    throw err;
  }
  throw new Error('expected a throw');
};

describe('user names', () => {
  it('refuses each kind of bad name with its own reason', () => {
    expect(userNameProblem('')).toBe('is empty');
    expect(userNameProblem('.')).toBe('is a path step ("." or "..")');
    expect(userNameProblem('..')).toBe('is a path step ("." or "..")');
    expect(userNameProblem('a/b')).toBe('contains a path separator ("/" or "\\")');
    expect(userNameProblem('a\\b')).toBe('contains a path separator ("/" or "\\")');
    expect(userNameProblem('a%2e')).toBe('contains "%" (no percent-encoding in names)');
    for (const c of ['\u0000', '\u001f', '\u007f', '\u0085', '\u009f']) expect(userNameProblem(`a${c}b`), JSON.stringify(c)).toBe('contains a control character');
  });

  it('takes names as directories spell them', () => {
    for (const name of ['alice', 'a.b', '...', '.a', 'a b', 'anna@example.com', 'Zoë', '\u0020', '\u00a0x', '~']) expect(userNameProblem(name), name).toBeUndefined();
  });

  it('words the error with the field and the name', () => {
    expect(userNameError('creator', '..')).toBe('"creator" is a path step ("." or ".."), got "..": a user name is one path segment, not ".", "..", nor containing "/", "\\", "%" or control characters');
    expect(userNameError('creator', 'alice')).toBeUndefined();
  });
});

describe('request ids', () => {
  it('keeps a short plain id and drops anything else', () => {
    expect(REQUEST_ID_HEADER).toBe('x-request-id');
    for (const id of ['a', 'A9', 'r-1.2_3:4', `a${'b'.repeat(63)}`]) expect(acceptRequestId(id), id).toBe(id);
    for (const id of ['', '-a', '.a', 'a b', 'a/b', `a${'b'.repeat(64)}`, 'ab\n', 'é']) expect(acceptRequestId(id), id).toBeNull();
    expect(acceptRequestId(['a', 'b'])).toBeNull();
    expect(acceptRequestId(undefined)).toBeNull();
  });

  it('makes fresh ids with the prefix and 16 hex digits', () => {
    const a = newRequestId('kfs');
    expect(a).toMatch(/^kfs-[0-9a-f]{16}$/);
    expect(newRequestId('kfs')).not.toBe(a);
    expect(acceptRequestId(a)).toBe(a);
  });
});

describe('pages cut by characters', () => {
  const text = 'a😀b\u{1F600}c';
  it('counts a surrogate pair as one character and never cuts inside it', () => {
    expect(sliceChars(text, 0, 2)).toEqual({ content: 'a😀', totalChars: 5 });
    expect(sliceChars(text, 1, 1)).toEqual({ content: '😀', totalChars: 5 });
    expect(sliceChars(text, 2, 2)).toEqual({ content: 'b\u{1F600}', totalChars: 5 });
    expect(sliceChars(text, 4, 10)).toEqual({ content: 'c', totalChars: 5 });
    expect(sliceChars(text, 5, 1)).toEqual({ content: '', totalChars: 5 });
    expect(sliceChars(text, 9, 1)).toEqual({ content: '', totalChars: 5 });
    expect(sliceChars('', 0, 5)).toEqual({ content: '', totalChars: 0 });
    expect(sliceChars('abc', 0, 3)).toEqual({ content: 'abc', totalChars: 3 });
    expect(sliceChars('abc', 0, 0)).toEqual({ content: '', totalChars: 3 });
    expect(sliceChars('abc', 1, 0)).toEqual({ content: '', totalChars: 3 });
    // The first and last pairs of the surrogate ranges.
    expect(sliceChars('\ud800\udc00\udbff\udfffz', 1, 1)).toEqual({ content: '\udbff\udfff', totalChars: 3 });
    expect(sliceChars('\ud800\udc00\udbff\udfffz', 0, 1)).toEqual({ content: '\ud800\udc00', totalChars: 3 });
  });

  it('counts a lone surrogate as one character', () => {
    expect(sliceChars('\ud83dx', 0, 1)).toEqual({ content: '\ud83d', totalChars: 2 });
    expect(sliceChars('x\ud83d', 1, 1)).toEqual({ content: '\ud83d', totalChars: 2 });
    expect(sliceChars('\ude00\ud83d', 0, 1)).toEqual({ content: '\ude00', totalChars: 2 });
    // A high surrogate before a character that is not a low one is alone.
    expect(sliceChars('\ud83d\ud83d', 1, 1)).toEqual({ content: '\ud83d', totalChars: 2 });
    // A high surrogate before the first character past the low range (U+E000) is alone too.
    expect(sliceChars('\ud83d\ue000', 0, 1)).toEqual({ content: '\ud83d', totalChars: 2 });
    expect(sliceChars('\ud83d\udbff', 0, 1)).toEqual({ content: '\ud83d', totalChars: 2 });
  });

  it('carries the page\'s offset, the whole length and the sha256 of the page as UTF-8', () => {
    const page = readPage(Buffer.from('héllo wörld'), 2, 5);
    expect(page).toEqual({ content: 'llo w', offset: 2, totalChars: 11, contentSha256: sha256Hex(Buffer.from('llo w', 'utf8')) });
    expect(pageSha256('ö')).toBe(sha256Hex(Buffer.from([0xc3, 0xb6])));
    expect(readPage(Buffer.from([0x61, 0xff, 0x62]), 0, 3).content).toBe('a\ufffdb');
  });
});

describe('sha256 text', () => {
  it('is exactly 64 lowercase hex digits', () => {
    const h = sha256Hex('abc');
    expect(h).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(isSha256(h)).toBe(true);
    expect(isSha256('0123456789abcdef'.repeat(4))).toBe(true);
    expect(isSha256(h.toUpperCase())).toBe(false);
    expect(isSha256(h.slice(1))).toBe(false);
    expect(isSha256(`${h}0`)).toBe(false);
    for (const bad of ['g', '/', ':', '`', '@']) expect(isSha256(`${h.slice(0, 63)}${bad}`), bad).toBe(false);
    expect(isSha256(64)).toBe(false);
    expect(isSha256(undefined)).toBe(false);
  });
});

describe('scope names', () => {
  it('parses the account and team scopes, and nothing else', () => {
    expect(parseScope('account')).toEqual({ kind: 'account' });
    expect(parseScope('team_search')).toEqual({ kind: 'team', teamId: 'search' });
    expect(parseScope('team_a-b_9')).toEqual({ kind: 'team', teamId: 'a-b_9' });
    for (const s of ['', 'Account', 'team_', 'team_Search', 'team_-x', 'search', 'xteam_search', `team_${'a'.repeat(64)}`]) expect(parseScope(s), s).toBeNull();
    expect(parseScope(`team_${'a'.repeat(63)}`)).toEqual({ kind: 'team', teamId: 'a'.repeat(63) });
    expect(isValidTeamId('9lives')).toBe(true);
    expect(isValidTeamId('x y')).toBe(false);
    expect(teamScope('search')).toBe('team_search');
  });

  it('sorts the account first, then teams by id', () => {
    expect(['team_b', 'account', 'team_a', 'team_b'].sort(compareScopes)).toEqual(['account', 'team_a', 'team_b', 'team_b']);
    expect(compareScopes('account', 'account')).toBe(0);
    expect(compareScopes('account', 'team_a')).toBe(-1);
    expect(compareScopes('team_a', 'account')).toBe(1);
    expect(compareScopes('team_a', 'team_b')).toBe(-1);
    expect(compareScopes('team_b', 'team_a')).toBe(1);
  });
});

describe('the can-load request', () => {
  it('takes scope names and a kind', () => {
    expect(parseCanLoadRequest({ scopes: ['account', 'team_x'], for: 'agent' })).toEqual({ scopes: ['account', 'team_x'], for: 'agent' });
    expect(parseCanLoadRequest({ scopes: Array(100).fill('account'), for: 'knowledge' }).scopes).toHaveLength(100);
  });

  it('says what is wrong with anything else', () => {
    const msg = (body: unknown) => { const e = thrown(() => parseCanLoadRequest(body)); expect(e.code).toBe('invalid_argument'); return e.message; };
    for (const body of [null, 'x', [], 3]) expect(msg(body)).toBe(`request body must be JSON like ${CAN_LOAD_EXAMPLE}`);
    expect(msg({ scopes: ['account'] })).toBe('"for" must be one of knowledge, skill, tool, agent');
    expect(msg({ scopes: ['account'], for: 7 })).toBe('"for" must be one of knowledge, skill, tool, agent');
    expect(msg({ scopes: ['account'], for: `x${'y'.repeat(60)}` })).toBe(`"for" must be one of knowledge, skill, tool, agent, not "x${'y'.repeat(39)}"`);
    expect(msg({ scopes: [], for: 'skill' })).toBe(`"scopes" must be a non-empty list, like ${CAN_LOAD_EXAMPLE}`);
    expect(msg({ scopes: 'account', for: 'skill' })).toBe(`"scopes" must be a non-empty list, like ${CAN_LOAD_EXAMPLE}`);
    expect(msg({ scopes: Array(101).fill('account'), for: 'skill' })).toBe('at most 100 scopes per request, got 101');
    expect(msg({ scopes: ['account', `team_${'Q'.repeat(100)}`], for: 'skill' })).toBe(`"team_${'Q'.repeat(75)}" is not a scope name: the account is "account", a team "team_<id>" (as on the mount)`);
    expect(msg({ scopes: [{ a: 1 }], for: 'skill' })).toBe('{"a":1} is not a scope name: the account is "account", a team "team_<id>" (as on the mount)');
  });
});

describe('the default control socket path', () => {
  it('takes $KNOWLEDGEFS_SOCKET unless empty, else /run for root and the temp dir for others', () => {
    expect(SOCKET_ENV).toBe('KNOWLEDGEFS_SOCKET');
    expect(defaultSocketPath({ KNOWLEDGEFS_SOCKET: '/e.sock' }, 1000, '/tmp')).toBe('/e.sock');
    expect(defaultSocketPath({ KNOWLEDGEFS_SOCKET: '' }, 0, '/tmp')).toBe('/run/knowledgefs/control.sock');
    expect(defaultSocketPath({}, 1000, '/var/tmp')).toBe('/var/tmp/knowledgefs-1000/control.sock');
  });
});

describe('the socket trust rule', () => {
  const dir = (mode: number, uid = 0) => ({ path: '/d', uid, mode: 0o040000 | mode });
  it('trusts directories owned by root or the user and not writable by others, or root\'s sticky ones', () => {
    expect(directoryTrustProblem(dir(0o755), 1000)).toBeUndefined();
    expect(directoryTrustProblem(dir(0o700, 1000), 1000)).toBeUndefined();
    expect(directoryTrustProblem(dir(0o1777), 1000)).toBeUndefined();
    expect(directoryTrustProblem(dir(0o1777, 1000), 1000)).toBe('/d is writable by other users (mode 1777)');
    expect(directoryTrustProblem(dir(0o775), 1000)).toBe('/d is writable by other users (mode 0775)');
    expect(directoryTrustProblem(dir(0o757), 1000)).toBe('/d is writable by other users (mode 0757)');
    expect(directoryTrustProblem(dir(0o755, 2000), 1000)).toBe('/d is owned by uid 2000, not by root or uid 1000');
    expect(directoryTrustProblem(dir(0o755, 2000), 0)).toBe('/d is owned by uid 2000, not by root');
    expect(directoryTrustProblem({ path: '/f', uid: 0, mode: 0o100644 }, 0)).toBe('/f is not a directory');
  });

  it('trusts only a socket itself, owned by root or the user', () => {
    expect(socketFileTrustProblem({ path: '/s', uid: 1000, mode: 0o140600 }, 1000)).toBeUndefined();
    expect(socketFileTrustProblem({ path: '/s', uid: 0, mode: 0o140777 }, 1000)).toBeUndefined();
    expect(socketFileTrustProblem({ path: '/s', uid: 2000, mode: 0o140600 }, 1000)).toBe('/s is owned by uid 2000, not by root or uid 1000');
    expect(socketFileTrustProblem({ path: '/s', uid: 0, mode: 0o120777 }, 0)).toBe('/s is a symbolic link, not the socket itself');
    expect(socketFileTrustProblem({ path: '/s', uid: 0, mode: 0o100600 }, 0)).toBe('/s is not a socket');
  });

  it('walks from a directory up to /', () => {
    expect(directoriesUpToRoot('/a/b/c')).toEqual(['/a/b/c', '/a/b', '/a', '/']);
    expect(directoriesUpToRoot('/a/b//')).toEqual(['/a/b', '/a', '/']);
    expect(directoriesUpToRoot('/')).toEqual(['/']);
    expect(directoriesUpToRoot('/a')).toEqual(['/a', '/']);
  });
});

describe('pack paths', () => {
  it('says why a segment or path is refused', () => {
    expect(segmentProblem('')).toBe('empty path segment');
    expect(segmentProblem('.')).toBe('"." segment');
    expect(segmentProblem('..')).toBe('".." segment');
    expect(segmentProblem('a\\b')).toBe('backslash in name');
    expect(segmentProblem('a\u0085')).toBe('control character in name');
    expect(segmentProblem('\ud800')).toBe('name is not valid UTF-8');
    expect(segmentProblem('é'.repeat(128))).toBe(`name longer than ${MAX_SEGMENT_BYTES} bytes`);
    expect(segmentProblem('a'.repeat(255))).toBeNull();
    expect(packPathProblem('')).toBe('empty path');
    expect(packPathProblem('/a')).toBe('absolute path');
    expect(packPathProblem('a//b')).toBe('empty path segment');
    expect(packPathProblem(`${'a/'.repeat(2048)}b`)).toBe(`path longer than ${MAX_PATH_BYTES} bytes`);
    expect(packPathProblem(`${'a/'.repeat(2047)}bc`)).toBeNull();
    expect(packPathProblem('a/b.md')).toBeNull();
    expect(assertPackPath('a/b')).toBe('a/b');
    expect(thrown(() => assertPackPath('a/../b'))).toMatchObject({ code: 'invalid_argument', message: 'invalid path: ".." segment' });
  });

  it('splits the scope off at the first slash', () => {
    expect(splitScopePath('account/a/b')).toEqual({ scope: 'account', rest: 'a/b' });
    expect(splitScopePath('account')).toEqual({ scope: 'account', rest: '' });
    expect(splitScopePath('/x')).toEqual({ scope: '', rest: 'x' });
  });
});

describe('error codes', () => {
  it('knows its codes, and calls anything it did not raise internal', () => {
    expect(ERROR_CODES.every((c) => isErrorCode(c))).toBe(true);
    expect(isErrorCode('nope')).toBe(false);
    expect(isErrorCode(undefined)).toBe(false);
    const e = new KnowledgeError('denied', 'no', { cause: 'why' });
    expect({ name: e.name, code: e.code, message: e.message, cause: e.cause }).toEqual({ name: 'KnowledgeError', code: 'denied', message: 'no', cause: 'why' });
    expect(isKnowledgeError(e)).toBe(true);
    expect(isKnowledgeError(new Error('x'))).toBe(false);
    expect(errorCodeOf(e)).toBe('denied');
    expect(errorCodeOf(new Error('x'))).toBe('internal');
  });
});

describe('log lines', () => {
  const t = new Date('2026-12-01T10:00:00.000Z');
  it('prints text as the message on one line, and json as one object with the fields that have values', () => {
    expect(formatLogLine('text', t, 'serve', 'a\nb\rc\u0085d\u2028e\u2029f')).toBe('a\\nb\\rc\\u0085d\\u2028e\\u2029f\n');
    expect(formatLogLine('json', t, 'mount', 'hello', { requestId: 'r-1', n: 3, ok: false, none: null, skipped: undefined, time: 'x', component: 'y', message: 'z' })).toBe(
      `${JSON.stringify({ time: '2026-12-01T10:00:00.000Z', level: 'info', component: 'mount', message: 'hello', requestId: 'r-1', n: 3, ok: false, none: null })}\n`,
    );
    expect(JSON.parse(formatLogLine('json', t, 'mount', 'x', { level: 'warn' }))).toEqual({ time: '2026-12-01T10:00:00.000Z', level: 'warn', component: 'mount', message: 'x' });
    expect(formatLogLine('json', t, 'c', 'm')).toBe('{"time":"2026-12-01T10:00:00.000Z","level":"info","component":"c","message":"m"}\n');
  });

  it('scrubs tokens, bearer credentials and URL passwords from the message and from string fields', () => {
    expect(redactSecrets('kfs_abcdefgh kfsadmin_ABCDEFGH-_1 kfs_short')).toBe('kfs_[redacted] kfsadmin_[redacted] kfs_short');
    expect(redactSecrets('xkfs_abcdefgh')).toBe('xkfs_abcdefgh');
    expect(redactSecrets('Authorization: bearer   abc.def ghi')).toBe('Authorization: bearer   [redacted] ghi');
    expect(redactSecrets('postgres://kfs:s3cret@db:5432/x and https://u:p@h/ and http://h:80/')).toBe('postgres://kfs:[redacted]@db:5432/x and https://u:[redacted]@h/ and http://h:80/');
    expect(JSON.parse(formatLogLine('json', t, 'c', 'Bearer tok1', { header: 'Bearer tok2', count: 1 }))).toMatchObject({ message: 'Bearer [redacted]', header: 'Bearer [redacted]', count: 1 });
    expect(formatLogLine('text', t, 'c', 'token kfs_abcdefghij')).toBe('token kfs_[redacted]\n');
  });

  it('takes text or json as the format', () => {
    expect(LOG_FORMATS).toEqual(['text', 'json']);
    expect(parseLogFormat('text')).toBe('text');
    expect(parseLogFormat('json')).toBe('json');
    expect(() => parseLogFormat('JSON')).toThrow('expected text or json, not "JSON"');
  });
});

describe('listen addresses', () => {
  it('parses HOST:PORT and [IPv6]:PORT, ports 0..65535', () => {
    expect(parseListenAddress('127.0.0.1:7420')).toEqual({ host: '127.0.0.1', port: 7420 });
    expect(parseListenAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(parseListenAddress('localhost:65535')).toEqual({ host: 'localhost', port: 65535 });
    for (const bad of ['127.0.0.1', ':80', 'h:65536', 'h:123456', 'h:x', '::1:80', '[::1]', 'h:80 ']) {
      expect(thrown(() => parseListenAddress(bad, '--metrics-listen')), bad).toMatchObject({ code: 'invalid_argument', message: `invalid --metrics-listen "${bad}" (expected HOST:PORT, e.g. 127.0.0.1:7420)` });
    }
    expect(thrown(() => parseListenAddress('x')).message).toBe('invalid --listen "x" (expected HOST:PORT, e.g. 127.0.0.1:7420)');
  });

  it('brackets IPv6 hosts in URLs', () => {
    expect(httpUrl('::1', 80)).toBe('http://[::1]:80');
    expect(httpUrl('127.0.0.1', 7420)).toBe('http://127.0.0.1:7420');
  });
});
