// directory.json: what a valid file becomes, and for each kind of mistake the
// exact message (file, field, problem) an operator reads at start-up.

import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnowledgeError } from '../src/core/errors.js';
import { loadDirectory, parseDirectory, readDirectoryFile, ROLES } from '../src/store/data-dir/directory.js';

const FILE = 'DATA/directory.json';

/** The message parseDirectory refuses `value` with (and that it is a config error). */
function refusal(value: unknown): string {
  try {
    parseDirectory(value, FILE);
  } catch (err) {
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('config');
    return (err as Error).message;
  }
  throw new Error(`accepted: ${JSON.stringify(value)}`);
}

const payments = { payments: { name: 'Payments' } };

describe('parseDirectory', () => {
  it('teams with their names, users with their teams (duplicates once, order kept) and roles', () => {
    const d = parseDirectory(
      {
        teams: { payments: { name: 'Payments' }, 'sre_on-call': { name: 'SRE' }, infra: {} },
        users: { alice: { teams: ['sre_on-call', 'payments', 'sre_on-call'], role: 'admin' }, 'bob smith': { teams: [] }, carol: {} },
      },
      FILE,
    );
    expect([...d.teams]).toEqual([
      ['payments', { name: 'Payments' }],
      ['sre_on-call', { name: 'SRE' }],
      ['infra', { name: 'infra' }], // no name: the id
    ]);
    expect([...d.users]).toEqual([
      ['alice', { teams: ['sre_on-call', 'payments'], role: 'admin' }],
      ['bob smith', { teams: [], role: 'member' }],
      ['carol', { teams: [], role: 'member' }],
    ]);
  });

  it('no teams and no users is an empty directory; null is the same as leaving a field out', () => {
    for (const value of [{}, { teams: null, users: null }]) {
      const d = parseDirectory(value, FILE);
      expect(d.teams.size).toBe(0);
      expect(d.users.size).toBe(0);
    }
    const d = parseDirectory({ teams: { infra: { name: null } }, users: { u: { teams: null, role: null } } }, FILE);
    expect(d.teams.get('infra')).toEqual({ name: 'infra' });
    expect(d.users.get('u')).toEqual({ teams: [], role: 'member' });
  });

  it('every role is accepted as written', () => {
    expect(ROLES).toEqual(['member', 'admin', 'owner']);
    for (const role of ROLES) expect(parseDirectory({ users: { u: { role } } }, FILE).users.get('u')?.role).toBe(role);
  });

  it('user names of 1 to 128 characters without control characters or "/"', () => {
    for (const name of ['a', 'x'.repeat(128), 'Ünïcode name', 'a.b@example.com']) {
      expect(parseDirectory({ users: { [name]: {} } }, FILE).users.has(name)).toBe(true);
    }
  });

  it('the top level must be an object', () => {
    for (const value of [null, [], 'x', 3, true]) {
      expect(refusal(value)).toBe(`${FILE}: (top level): expected an object with "teams" and "users"`);
    }
  });

  it('teams: an object of valid ids, each an object with a string name', () => {
    expect(refusal({ teams: [] })).toBe(`${FILE}: teams: expected an object mapping team id to {"name": ...}`);
    expect(refusal({ teams: 'payments' })).toBe(`${FILE}: teams: expected an object mapping team id to {"name": ...}`);
    expect(refusal({ teams: { Payments: {} } })).toBe(`${FILE}: teams.Payments: invalid team id (expected [a-z0-9][a-z0-9_-]{0,62})`);
    // A key that would confuse the message is quoted.
    expect(refusal({ teams: { 'a b': {} } })).toBe(`${FILE}: teams."a b": invalid team id (expected [a-z0-9][a-z0-9_-]{0,62})`);
    expect(refusal({ teams: { payments: 'Payments' } })).toBe(`${FILE}: teams.payments: expected an object like {"name": "Payments"}`);
    expect(refusal({ teams: { payments: [] } })).toBe(`${FILE}: teams.payments: expected an object like {"name": "Payments"}`);
    expect(refusal({ teams: { payments: { name: 7 } } })).toBe(`${FILE}: teams.payments.name: expected a string`);
  });

  it('users: an object of valid names, each an object', () => {
    expect(refusal({ users: [] })).toBe(`${FILE}: users: expected an object mapping user name to {"teams": [...], "role": ...}`);
    expect(refusal({ users: 'alice' })).toBe(`${FILE}: users: expected an object mapping user name to {"teams": [...], "role": ...}`);
    const badName = `${FILE}: users.%s: invalid user name (1-128 characters, no control characters or "/")`;
    expect(refusal({ users: { '': {} } })).toBe(badName.replace('%s', '""'));
    expect(refusal({ users: { 'a/b': {} } })).toBe(badName.replace('%s', '"a/b"'));
    expect(refusal({ users: { 'a\nb': {} } })).toBe(badName.replace('%s', '"a\\nb"'));
    expect(refusal({ users: { 'a\u007fb': {} } })).toBe(badName.replace('%s', JSON.stringify('a\u007fb')));
    expect(refusal({ users: { ['x'.repeat(129)]: {} } })).toBe(badName.replace('%s', 'x'.repeat(129)));
    expect(refusal({ users: { alice: ['payments'] } })).toBe(`${FILE}: users.alice: expected an object like {"teams": ["payments"], "role": "member"}`);
    expect(refusal({ users: { alice: null } })).toBe(`${FILE}: users.alice: expected an object like {"teams": ["payments"], "role": "member"}`);
  });

  it("a user's teams: an array of ids listed under teams, each named by its index", () => {
    expect(refusal({ teams: payments, users: { alice: { teams: 'payments' } } })).toBe(`${FILE}: users.alice.teams: expected an array of team ids`);
    expect(refusal({ teams: payments, users: { alice: { teams: ['payments', 3] } } })).toBe(`${FILE}: users.alice.teams[1]: expected a team id string`);
    expect(refusal({ teams: payments, users: { alice: { teams: ['payments', 'Bad Id'] } } })).toBe(`${FILE}: users.alice.teams[1]: expected a team id string`);
    expect(refusal({ teams: payments, users: { alice: { teams: ['payments', 'infra'] } } })).toBe(
      `${FILE}: users.alice.teams[1]: unknown team "infra" (not listed under "teams")`,
    );
  });

  it('a role is one of the known roles', () => {
    const message = `${FILE}: users.alice.role: expected one of "member", "admin", "owner"`;
    expect(refusal({ users: { alice: { role: 'root' } } })).toBe(message);
    expect(refusal({ users: { alice: { role: 1 } } })).toBe(message);
    expect(refusal({ users: { alice: { role: '' } } })).toBe(message);
  });
});

describe('loadDirectory and readDirectoryFile', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kfs-directory-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads and validates the file, and answers the bytes it read', async () => {
    const file = join(dir, 'ok.json');
    const text = JSON.stringify({ teams: payments, users: { alice: { teams: ['payments'] } } });
    await writeFile(file, text);
    const read = await readDirectoryFile(file);
    expect(read.bytes.equals(Buffer.from(text))).toBe(true);
    expect(read.directory.users.get('alice')?.teams).toEqual(['payments']);
    expect([...(await loadDirectory(file)).teams.keys()]).toEqual(['payments']);
  });

  it('a missing file says how to create one', async () => {
    const file = join(dir, 'missing.json');
    await expect(loadDirectory(file)).rejects.toThrow(new KnowledgeError('config', `${file}: missing (create it with {"teams": {}, "users": {}})`));
  });

  it('a file that cannot be read names it and why', async () => {
    // A directory in its place: readFile fails with EISDIR (root reads any file, so no mode can refuse it).
    const err = await loadDirectory(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KnowledgeError);
    expect((err as KnowledgeError).code).toBe('config');
    expect((err as Error).message).toMatch(new RegExp(`^${dir}: cannot read: .*EISDIR`));
  });

  it('bad JSON names the file and the parser', async () => {
    const file = join(dir, 'bad.json');
    await writeFile(file, '{"teams": ');
    await chmod(file, 0o644);
    const err = await loadDirectory(file).catch((e: unknown) => e);
    expect((err as KnowledgeError).code).toBe('config');
    expect((err as Error).message).toMatch(new RegExp(`^${file}: \\(top level\\): not valid JSON: .+`));
  });

  it('valid JSON that is not a directory names the field', async () => {
    const file = join(dir, 'wrong.json');
    await writeFile(file, '{"teams": {"X": {}}}');
    await expect(loadDirectory(file)).rejects.toThrow(`${file}: teams.X: invalid team id`);
  });
});
