// The npm tarball the way a platform team gets it (`npm run test:artifacts`):
//   1. `git clone` of HEAD into a temporary directory, `npm ci`, `npm pack`
//      there, with nothing built before; the tarball's files are checked
//      (scripts/package-contents.mjs): everything its entry points import is
//      inside it, and nothing but git's files and what prepack generates;
//   2. an image from the Node 24 base (the stand-in of test:images) with only
//      the runtime packages the README names (libfuse3-3, fuse3): no
//      compiler, no Python, no libfuse 2;
//   3. one container that runs test/artifacts/platform-run.sh: `npm i -g` of
//      the tarball, then doctor, serve, session create, mount-helper with a
//      daemon user holding no capabilities, a separate agent user (ls, a
//      hidden team, `read` mounting a team, grep, the manifest, EROFS, no way
//      to unmount or signal), a revocation, and a stop that leaves no mount.
// Containers and the image are named kfs-artifacts-test…; the container is
// removed even on failure. The report gives the tarball's size, what
// `npm i -g` printed and its time, the image's size and the run's time.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { packageContentProblems, tarballFileList, trackedFiles } from '../../scripts/package-contents.mjs';
import { REPO_ROOT } from '../helpers/control-plane.js';
import { ensureBaseImage } from '../images/base-image.js';
import { containersEnv, ensureContainerTools, removeContainersConf, run, say, seconds, type RunOptions } from '../images/podman.js';

const NODE_IMAGE = 'node:24-slim';
const IMAGE = 'localhost/kfs-artifacts-test/platform:latest';
const CONTAINER = 'kfs-artifacts-test-run';
const CA_BUNDLE = process.env.KNOWLEDGEFS_TEST_CA_BUNDLE ?? (existsSync('/etc/ssl/certs/ca-certificates.crt') ? '/etc/ssl/certs/ca-certificates.crt' : '');
/** The README's runtime packages for the native binding, and nothing else. */
const RUNTIME_PACKAGES = ['libfuse3-3', 'fuse3'];

const CONTAINERFILE = `FROM ${NODE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES.join(' ')} && rm -rf /var/lib/apt/lists/* \\
 && for t in gcc cc make python3 python; do if command -v $t; then echo "$t is in the image" >&2; exit 1; fi; done \\
 && if ldconfig -p | grep -q 'libfuse\\.so\\.2'; then echo 'libfuse 2 is in the image' >&2; exit 1; fi
`;

const env = containersEnv();
const podman = (args: readonly string[], o: RunOptions = {}) => run('podman', args, { env, ...o });
const report: string[] = [];
let tmp = '';
let tarball = '';
let out = '';

const field = (name: string): string => new RegExp(`^${name}=(.*)$`, 'm').exec(out)?.[1] ?? `<no ${name}= line>`;
const fieldBlock = (name: string): string => new RegExp(`^${name}-begin\\n([\\s\\S]*?)^${name}-end$`, 'm').exec(out)?.[1] ?? `<no ${name} block>`;

beforeAll(async () => {
  ensureContainerTools();
  await podman(['rm', '-f', '-t', '2', CONTAINER], { allowFailure: true });
  tmp = mkdtempSync(join(tmpdir(), 'kfs-artifacts-'));
  report.push(await ensureBaseImage(NODE_IMAGE, env));
}, 900_000);

afterAll(async () => {
  await podman(['rm', '-f', '-t', '2', CONTAINER], { allowFailure: true });
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  removeContainersConf();
  say(`report:\n  ${report.join('\n  ')}`);
}, 120_000);

describe.sequential('the npm tarball from a clean clone, installed without a compiler', () => {
  it('a clean clone of HEAD packs with npm ci + npm pack alone, and the tarball holds what its entry points import and nothing else', async () => {
    const clone = join(tmp, 'clone');
    const start = performance.now();
    await run('git', ['clone', '--quiet', '--no-hardlinks', REPO_ROOT, clone]);
    const head = (await run('git', ['rev-parse', 'HEAD'], { cwd: REPO_ROOT })).stdout.trim();
    expect((await run('git', ['rev-parse', 'HEAD'], { cwd: clone })).stdout.trim()).toBe(head);
    expect(existsSync(join(clone, 'dist')) || existsSync(join(clone, 'prebuilds'))).toBe(false);
    await run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: clone });
    const packed = await run('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: clone });
    // The JSON is the end of stdout (prepack's lines may come before it).
    const json = packed.stdout.slice(packed.stdout.search(/^\[\s*\{/m));
    const filename = (JSON.parse(json) as Array<{ filename: string }>)[0]!.filename;
    tarball = join(tmp, filename);
    report.push(`clone → npm ci → npm pack: ${seconds(start)}; ${filename} ${(statSync(tarball).size / 1000).toFixed(0)} kB`);

    const files = (tarballFileList as (t: string) => string[])(tarball);
    expect(files).toContain('dist/bundle/main.js');
    expect(files).toContain('dist/bundle/broken-pipe.js');
    expect(files).toContain('prebuilds/linux-x64/knowledgefs_fuse.node');
    expect(files).toContain('prebuilds/linux-arm64/knowledgefs_fuse.node');
    const unpacked = join(tmp, 'unpacked');
    mkdirSync(unpacked);
    execFileSync('tar', ['xzf', tarball, '-C', unpacked]);
    const problems = await (packageContentProblems as (o: object) => Promise<string[]>)({
      root: join(unpacked, 'package'),
      files,
      tracked: (trackedFiles as (r: string) => string[])(clone),
    });
    expect(problems).toEqual([]);
  }, 600_000);

  it(`builds an image from ${NODE_IMAGE} with ${RUNTIME_PACKAGES.join(' and ')} only: no compiler, no Python, no libfuse 2`, async () => {
    const ctx = join(tmp, 'image');
    mkdirSync(ctx);
    writeFileSync(join(ctx, 'Containerfile'), CONTAINERFILE);
    const start = performance.now();
    await podman(['build', '--pull=never', '--format', 'docker', '-t', IMAGE, ctx]);
    const size = Number((await podman(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).stdout.trim());
    report.push(`${IMAGE}: built in ${seconds(start)}, ${(size / 2 ** 20).toFixed(0)} MiB`);
  }, 600_000);

  it('in the container: npm i -g of the tarball prints no warning and no error, runs nothing, and needs nothing more', async () => {
    expect(tarball).not.toBe('');
    const start = performance.now();
    const r = await podman([
      'run', '--rm', '--name', CONTAINER,
      '--device', '/dev/fuse', '--cap-add', 'SYS_ADMIN', '--security-opt', 'apparmor=unconfined',
      '-v', `${tarball}:/pkg/knowledgefs.tgz:ro`,
      '-v', `${join(REPO_ROOT, 'examples', 'knowledge-base')}:/kb:ro`,
      '-v', `${join(REPO_ROOT, 'test', 'artifacts', 'platform-run.sh')}:/checks/run.sh:ro`,
      ...(CA_BUNDLE ? ['-v', `${CA_BUNDLE}:/ca.pem:ro`] : []),
      IMAGE, 'bash', '/checks/run.sh',
    ], { allowFailure: true });
    out = `${r.stdout}\n${r.stderr}`;
    report.push(`container run: ${seconds(start)} (npm i -g ${field('install-ms')} ms)`);
    report.push(`npm i -g printed: ${JSON.stringify(fieldBlock('install').trim())}`);
    expect(r.code, out).toBe(0);
    expect(field('done'), out).toBe('yes');
    expect(out).not.toMatch(/^has=/m);
    expect(field('install-exit'), out).toBe('0');
    const install = fieldBlock('install');
    expect(install, out).toMatch(/^added \d+ packages in [\d.]+m?s$/m);
    expect(install, out).not.toMatch(/warn|ERR|gyp|install-scripts|fuse-native/i);
    expect(field('bin')).toBe('/usr/local/bin/knowledgefs');
    expect(field('version')).toBe(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version);
  }, 600_000);

  it('doctor, serve and session create work; doctor names the prebuilt native binding and fuse-native as absent', () => {
    expect(field('serve-healthy'), out).toBe('yes');
    expect(field('session-exit'), out).toBe('0');
    expect(field('session-token'), out).toBe('yes');
    const doctor = fieldBlock('doctor');
    expect(doctor, out).toMatch(/^ok\s+fuse binding\s+native \(prebuilt linux-x64\): a mount uses it$/m);
    expect(doctor, out).toMatch(/^note\s+fuse-native\s+not installed \(the optional libfuse 2 fallback/m);
    expect(doctor, out).toMatch(/^ok\s+control plane/m);
    expect(field('doctor-exit'), out).toBe('0');
  });

  it('mount-helper mounts ro with a daemon user holding no capabilities, and makes the socket directory for the agent group', () => {
    expect(field('mounted'), out).toBe('yes');
    expect(field('daemon-user'), out).toBe('kfs');
    expect(field('daemon-capeff'), out).toBe('0000000000000000');
    expect(field('daemon-capbnd'), out).toBe('0000000000000000');
    expect(field('mount-options').split(','), out).toEqual(expect.arrayContaining(['ro', 'nosuid', 'nodev', 'allow_other', 'default_permissions']));
    expect(field('socket-dir'), out).toBe('kfs:agent 2750');
    expect(fieldBlock('helper'), out).toMatch(/^fuse binding: native \(prebuilt linux-x64\)$/m);
    expect(fieldBlock('helper'), out).toMatch(/^fuse-native: not installed /m);
  });

  it('the agent (its own uid): ls shows alice\'s teams, a team she is not in is a missing file, read and grep -r work, the manifest', () => {
    expect(field('uids'), out).toMatch(/^kfs=(\d+) agent=(?!\1)\d+$/);
    // A personal session: every team alice belongs to (payments, search); storage is hidden.
    expect(field('ls1').trim().split(' '), out).toEqual(['account', 'team_payments', 'team_search']);
    expect(field('cat-search'), out).toBe('');
    expect(field('cat-storage'), out).toMatch(/No such file or directory/);
    // The socket's directory is kfs's: without the daemon's user named, the client refuses it.
    expect(field('read-unnamed-exit'), out).toBe('4');
    expect(field('read-unnamed-err'), out).toMatch(/refusing to use the control socket .* owned by uid \d+, not by root or uid \d+/);
    expect(field('read-exit'), out).toBe('0');
    const read = JSON.parse(field('read')) as { ok: boolean; content: string; mounted?: unknown };
    expect(read.ok).toBe(true);
    expect(read.content).toBe(readFileSync(join(REPO_ROOT, 'examples/knowledge-base/teams/search/DUTY.md'), 'utf8'));
    expect(field('read-storage-exit'), out).toBe('1');
    expect(field('ls2').trim().split(' '), out).toEqual(['account', 'team_payments', 'team_search']);
    expect(field('grep').trim().split(' ').every((p) => /^knowledge\/(account|team_payments|team_search)\//.test(p)), out).toBe(true);
    expect(field('grep'), out).toContain('knowledge/team_payments/runbooks/psp-failover.md');
    expect(field('manifest-exit'), out).toBe('0');
    expect(fieldBlock('manifest'), out).toMatch(/^### team_payments \(`knowledge\/team_payments\/`\)$/m);
  });

  it('the agent gets EROFS on writes and cannot unmount, signal the daemon, read its environment or its token', () => {
    expect(field('write-append'), out).toMatch(/Read-only file system/);
    expect(field('write-create'), out).toMatch(/Read-only file system/);
    expect(field('write-opens').trim(), out).toBe('r+ EROFS w EROFS a EROFS');
    for (const name of ['agent-umount-exit', 'agent-fusermount-exit', 'agent-signal-exit', 'agent-environ-exit', 'agent-token-exit']) {
      expect(field(name), `${name}\n${out}`).not.toBe('0');
    }
    expect(field('still-mounted'), out).toBe('1');
  });

  it('a revocation takes the team away; a stop leaves no mount and no daemon', () => {
    expect(field('revoked'), out).toBe('yes');
    expect(field('cat-after-revoke'), out).toMatch(/No such file or directory/);
    expect(field('helper-exit'), out).toBe('0');
    expect(field('mounts-after'), out).toBe('0');
    expect(field('daemon-after'), out).toBe('gone');
  });
});
