// directory.json while serving: taken again when the file changes, an invalid
// edit keeps the last good version (said once per distinct problem, and once
// when it is valid again).

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DirectorySource } from '../src/server/packs/directory-source.js';

let dir: string;
let file: string;
let log: string[];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kfs-dirsource-'));
  file = join(dir, 'directory.json');
  log = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const withTeams = (...teams: string[]) => JSON.stringify({ teams: Object.fromEntries(teams.map((t) => [t, { name: t.toUpperCase() }])), users: {} });
const teamsOf = (source: DirectorySource) => [...source.directory.teams.keys()];

describe('DirectorySource', () => {
  it('opens a valid file; a missing or invalid one stops the start with a config error', async () => {
    await expect(DirectorySource.open(file, (l) => log.push(l))).rejects.toMatchObject({ code: 'config', message: expect.stringContaining(`${file}: missing`) });
    await writeFile(file, '{"teams": []}');
    await expect(DirectorySource.open(file, (l) => log.push(l))).rejects.toMatchObject({ code: 'config', message: expect.stringContaining(`${file}: teams:`) });
    await writeFile(file, withTeams('payments'));
    const source = await DirectorySource.open(file, (l) => log.push(l));
    expect(source.file).toBe(file);
    expect(teamsOf(source)).toEqual(['payments']);
    expect(log).toEqual([]);
  });

  it('an unchanged file is not read again; a changed one is taken', async () => {
    await writeFile(file, withTeams('payments'));
    const source = await DirectorySource.open(file, (l) => log.push(l));
    const first = source.directory;
    expect(await source.refresh()).toBe(false);
    expect(source.directory).toBe(first);
    await writeFile(file, withTeams('payments', 'search'));
    expect(await source.refresh()).toBe(true);
    expect(teamsOf(source)).toEqual(['payments', 'search']);
    expect(await source.refresh()).toBe(false);
    expect(log).toEqual([]);
  });

  it('an invalid edit keeps the last good version, said once; valid again is said once too', async () => {
    await writeFile(file, withTeams('payments'));
    const source = await DirectorySource.open(file, (l) => log.push(l));
    await writeFile(file, '{"teams": {"Bad": {}}}');
    expect(await source.refresh()).toBe(false);
    expect(teamsOf(source)).toEqual(['payments']);
    expect(log).toEqual([`${file}: teams.Bad: invalid team id (expected [a-z0-9][a-z0-9_-]{0,62}) (keeping the last good version)`]);
    // The same problem in another edit: not said again.
    await writeFile(file, '{"teams": {"Bad": {}}, "users": {}}');
    expect(await source.refresh()).toBe(false);
    expect(log.length).toBe(1);
    // Another problem is.
    await writeFile(file, 'not json');
    expect(await source.refresh()).toBe(false);
    expect(log.length).toBe(2);
    expect(log[1]).toMatch(new RegExp(`^${file}: \\(top level\\): not valid JSON: .* \\(keeping the last good version\\)$`));
    await writeFile(file, withTeams('search'));
    expect(await source.refresh()).toBe(true);
    expect(teamsOf(source)).toEqual(['search']);
    expect(log[2]).toBe(`${file}: valid again, using the new version`);
    await writeFile(file, withTeams('ops'));
    expect(await source.refresh()).toBe(true);
    expect(log.length).toBe(3);
  });

  it('a deleted file keeps the last good version; it coming back is taken', async () => {
    await writeFile(file, withTeams('payments'));
    const source = await DirectorySource.open(file, (l) => log.push(l));
    await rm(file);
    expect(await source.refresh()).toBe(false);
    expect(await source.refresh()).toBe(false);
    expect(teamsOf(source)).toEqual(['payments']);
    expect(log).toEqual([`${file}: missing (create it with {"teams": {}, "users": {}}) (keeping the last good version)`]);
    await writeFile(file, withTeams('payments'));
    expect(await source.refresh()).toBe(true);
    expect(log[1]).toBe(`${file}: valid again, using the new version`);
  });

});
