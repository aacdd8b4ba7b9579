// What a platform team gets from the npm package. A fresh `npm ci` must be
// quiet: npm 11 warns about every dependency whose install script
// package.json's `allowScripts` does not cover (and a later npm blocks them).
// fuse-native's install script picks its prebuilt binding; it is allowed by
// name (its version is pinned in dependencies). This asks npm itself,
// offline, which installed packages are still unreviewed.
//
// Then the tarball: `npm pack` (its prepack builds dist/ and the prebuilt
// addons), `npm i -g` into an empty prefix on a PATH without a C compiler,
// which runs no install script and warns of none (fuse-native, the libfuse 2
// fallback, is an optional peer and is not installed), and the installed CLI
// must mount with the native binding from the tarball's prebuilt, say so in
// doctor and status (and that fuse-native is absent), and serve `cat`; the
// addon's sources it ships must build it from the installed package.
// test:artifacts does the same from a clean clone, in an image without
// libfuse 2, a compiler or Python.

import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { fuseSuite, REPO_ROOT, run, startMount, type MountHandle } from './helpers/mount.js';

it('every installed dependency with an install script is covered by allowScripts (no npm ci warning)', async () => {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)('npm', ['install-scripts', 'ls', '--json'], { cwd: REPO_ROOT }));
  } catch (err) {
    throw new Error(`\`npm install-scripts ls\` failed (npm ≥ 11.16 is needed): ${err instanceof Error ? err.message : String(err)}`);
  }
  const pending = (JSON.parse(stdout) as { allowScripts: { name: string }[] }).allowScripts.map((p) => p.name);
  expect(pending, 'approve them with `npm install-scripts approve <name>` after reviewing their install scripts').toEqual([]);
});

/** A bin directory with every command of this machine except C compilers. */
async function pathWithoutCompilers(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const compiler = /(^|-)(gcc|g\+\+|cc|c\+\+|cpp|clang|tcc|c89|c99)(-[\d.]+)?$/;
  for (const from of ['/usr/local/bin', '/usr/bin', '/usr/sbin', '/bin', '/sbin']) {
    for (const name of await readdir(from).catch(() => [] as string[])) {
      if (compiler.test(name) || existsSync(join(dir, name))) continue;
      await symlink(join(from, name), join(dir, name));
    }
  }
  return dir;
}

const ELF_MACHINE = { x64: 'Advanced Micro Devices X86-64', arm64: 'AArch64' };

fuseSuite('npm pack → npm i -g on a machine without a compiler', () => {
  let scratch = '';
  let prefix = '';
  let bin = '';
  let tarball = '';
  let noCompiler = '';
  let data = '';
  let cp: TestControlPlane | undefined;
  let mount: MountHandle | undefined;
  let installOutput = '';

  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'kfs-pack-'));
    const packed = await run('npm', ['pack', '--pack-destination', scratch], { cwd: REPO_ROOT, timeoutMs: 540_000 });
    expect(packed.code, packed.stderr).toBe(0);
    tarball = join(scratch, packed.stdout.trim().split('\n').pop() ?? '');
    noCompiler = await pathWithoutCompilers(join(scratch, 'path'));
    prefix = join(scratch, 'prefix');
    const installed = await run('npm', ['i', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], { cwd: scratch, env: { PATH: noCompiler }, timeoutMs: 300_000 });
    expect(installed.code, installed.stderr).toBe(0);
    installOutput = `${installed.stdout}${installed.stderr}`;
    bin = join(prefix, 'lib', 'node_modules', 'knowledgefs', 'bin', 'knowledgefs.js');
    data = await makeDataDir({
      teams: { payments: 'Payments' },
      users: { alice: { teams: ['payments'] } },
      files: { 'account/DUTY.md': '# Account\nPACKED-MARKER\n', 'teams/payments/DUTY.md': '# Payments\n' },
    });
    cp = await startControlPlane({ dataDir: data });
  }, 900_000);

  afterAll(async () => {
    await mount?.stop();
    await cp?.close();
    if (data) await removeDataDir(data);
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it('the tarball carries the addon prebuilt for linux-x64 and linux-arm64, each for its machine, linked to libfuse3', async () => {
    const list = await run('tar', ['tzf', tarball]);
    for (const arch of ['x64', 'arm64'] as const) {
      const member = `package/prebuilds/linux-${arch}/knowledgefs_fuse.node`;
      expect(list.stdout.split('\n')).toContain(member);
      const out = join(scratch, `unpacked-${arch}`);
      await mkdir(out);
      expect((await run('tar', ['xzf', tarball, '-C', out, member])).code).toBe(0);
      const header = await run('readelf', ['-h', '-d', join(out, member)]);
      expect(header.stdout).toMatch(new RegExp(`Machine:\\s+${ELF_MACHINE[arch]}\\n`));
      expect(header.stdout).toMatch(/\(NEEDED\)\s+Shared library: \[libfuse3\.so\.3\]/);
    }
  });

  it("the tarball ships every source file of the addon, and the installed package builds it from them (the fallback when no prebuilt fits)", async () => {
    const list = (await run('tar', ['tzf', tarball])).stdout.split('\n');
    const sources = (await readdir(join(REPO_ROOT, 'native'))).filter((f) => /\.[ch]$/.test(f));
    expect(sources.length).toBeGreaterThan(1);
    for (const f of sources) expect(list).toContain(`package/native/${f}`);
    const pkg = join(prefix, 'lib', 'node_modules', 'knowledgefs');
    const out = join(scratch, 'from-installed', 'knowledgefs_fuse.node');
    const built = await run(process.execPath, [join(pkg, 'scripts', 'build-native.mjs'), '--out', out], { cwd: pkg, timeoutMs: 120_000 });
    expect(built.code, built.stderr).toBe(0);
    const loaded = await run(process.execPath, ['-e', `const a = require(${JSON.stringify(out)}); process.stdout.write(typeof a.mount + ' ' + typeof a.replyDirPlus)`]);
    expect(loaded.stdout).toBe('function function');
  });

  it('the install warns of no install script and leaves fuse-native out', () => {
    expect(installOutput).not.toMatch(/install-scripts|gyp|ERR!/);
    expect(installOutput).toMatch(/^added \d+ packages? in /m);
    expect(existsSync(join(prefix, 'lib', 'node_modules', 'knowledgefs', 'node_modules', 'fuse-native'))).toBe(false);
    expect(existsSync(join(prefix, 'lib', 'node_modules', 'fuse-native'))).toBe(false);
  });

  it('the installed CLI has no compiler on its PATH, and doctor names the prebuilt native binding and fuse-native absent', async () => {
    expect((await run('sh', ['-c', 'command -v gcc || command -v cc || echo none'], { env: { PATH: noCompiler } })).stdout.trim()).toBe('none');
    const doctor = await run(process.execPath, [bin, 'doctor'], { env: { PATH: noCompiler } });
    expect(doctor.stdout).toMatch(/^ok\s+fuse binding\s+native \(prebuilt linux-x64\): a mount uses it$/m);
    expect(doctor.stdout).toMatch(/^note\s+fuse-native\s+not installed \(the optional libfuse 2 fallback; the native binding does not need it\) — fix: npm i -g fuse-native@2\.2\.6 /m);
  });

  it('a mount with --fuse-binding auto runs on the prebuilt native addon: its line and status say so, and cat reads', async () => {
    const { token } = await (cp as TestControlPlane).createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    mount = await startMount({ serverUrl: (cp as TestControlPlane).url, token, bin, args: ['--fuse-binding', 'auto'], env: { PATH: noCompiler } });
    expect(mount.stderr).toMatch(/^fuse binding: native \(prebuilt linux-x64\)$/m);
    expect(mount.stderr.split('\n').filter((l) => l.includes('fuse-native'))).toEqual([expect.stringMatching(/^fuse-native: not installed \(the optional libfuse 2 fallback; to add it: npm i -g fuse-native@2\.2\.6 /)]);
    const status = await run(process.execPath, [bin, 'status', '--socket', mount.socketPath], { env: { PATH: noCompiler } });
    expect(status.stdout).toMatch(/^fuse\s+native \(prebuilt linux-x64\)$/m);
    const cat = await run('cat', [join(mount.mountpoint, 'account', 'DUTY.md')]);
    expect(cat.stdout).toBe('# Account\nPACKED-MARKER\n');
  });
});
