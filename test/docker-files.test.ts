// The container files hold together without a Docker daemon: every COPY
// source exists, the compose file grants what a FUSE mount needs and only
// sets variables the entrypoint reads, the entrypoint parses, and the
// control-plane flags in the image are flags `serve` has.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, REPO_ROOT } from './helpers/control-plane.js';

const read = (rel: string) => readFileSync(join(REPO_ROOT, rel), 'utf8');
const dockerfile = read('docker/Dockerfile');
const compose = read('docker/compose.yaml');
const entrypoint = read('docker/runner-entrypoint.sh');

function run(cmd: string, args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.on('close', (code) => resolve({ code, out }));
  });
}

describe('docker/', () => {
  it('the Dockerfile has the runner and control-plane targets', () => {
    // Every stage starts from the base image argument, by default the active Node LTS line.
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-slim$/m);
    expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\} AS build$/m);
    expect(dockerfile).toMatch(/^FROM \$\{NODE_IMAGE\} AS base$/m);
    expect(dockerfile).not.toMatch(/^FROM node:/m);
    expect(dockerfile).toMatch(/^FROM base AS runner$/m);
    expect(dockerfile).toMatch(/^FROM base AS control-plane$/m);
    // The build stage compiles the libfuse 3 addon; the runner ships only its run-time packages.
    // libfuse2 too: fuse-native's install script loads its prebuilt binding, and without
    // libfuse.so.2 falls back to node-gyp, which has no Python in the build stage.
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends gcc make pkg-config libc6-dev libfuse3-dev libfuse2 /);
    expect(dockerfile).toMatch(/RUN npm run build:native/);
    expect(dockerfile).toMatch(/COPY --from=build \/src\/native\/build \.\/native\/build/);
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends libfuse3-3 fuse3 util-linux/);
  });

  it('npm ci in the build stage takes an optional CA bundle as the secret `ca` and checks its own result', () => {
    const npmCi = /^RUN --mount=type=secret,id=ca (.*?)\n(?=\S)/ms.exec(dockerfile)?.[1] ?? '';
    expect(npmCi).toMatch(/if \[ -s \/run\/secrets\/ca \]; then export NODE_EXTRA_CA_CERTS=\/run\/secrets\/ca; fi/);
    expect(npmCi).toMatch(/npm ci /);
    expect(npmCi).toMatch(/node_modules\/\.package-lock\.json/);
  });

  it('every COPY from the build context exists in the repository', () => {
    const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => (m[1] as string).split(/\s+/));
    expect(sources.length).toBeGreaterThan(3);
    for (const src of sources) expect(existsSync(join(REPO_ROOT, src)), src).toBe(true);
  });

  it('the entrypoint and the secrets script are executable and parse', async () => {
    for (const f of ['docker/runner-entrypoint.sh', 'docker/make-secrets.sh']) {
      expect(statSync(join(REPO_ROOT, f)).mode & 0o111, f).not.toBe(0);
    }
    expect((await run('bash', ['-n', join(REPO_ROOT, 'docker/runner-entrypoint.sh')])).code).toBe(0);
    expect((await run('sh', ['-n', join(REPO_ROOT, 'docker/make-secrets.sh')])).code).toBe(0);
  });

  it('the compose runner gets /dev/fuse, CAP_SYS_ADMIN and an unconfined AppArmor profile', () => {
    const runner = compose.slice(compose.indexOf('\n  runner:'));
    expect(runner).toMatch(/devices:\n\s+- \/dev\/fuse:\/dev\/fuse/);
    expect(runner).toMatch(/cap_add:\n\s+- SYS_ADMIN/);
    expect(runner).toMatch(/security_opt:\n\s+- apparmor:unconfined/);
  });

  it('compose sets only KNOWLEDGEFS_ variables the entrypoint reads', () => {
    const set = new Set([...compose.matchAll(/^\s+(KNOWLEDGEFS_[A-Z_]+):/gm)].map((m) => m[1]));
    expect(set.size).toBeGreaterThan(2);
    for (const name of set) expect(entrypoint, name).toContain(`\${${name}`);
  });

  it('the control-plane image and compose pass only flags `serve` and `session create` have', async () => {
    const serveHelp = (await run(process.execPath, [BIN, 'serve', '--help'])).out;
    const sessionHelp = (await run(process.execPath, [BIN, 'session', 'create', '--help'])).out;
    const cmd = /^CMD \[(.*?)\]$/ms.exec(dockerfile.slice(dockerfile.indexOf('AS control-plane')))?.[1] ?? '';
    const serveFlags = [...cmd.matchAll(/"(--[a-z-]+)"/g)].map((m) => m[1] as string);
    expect(serveFlags).toContain('--data');
    for (const flag of serveFlags) expect(serveHelp, flag).toMatch(new RegExp(`^\\s+${flag} `, 'm'));
    const sessionFlags = [...(/knowledgefs session create([\s\S]*?)\|/.exec(compose)?.[1] ?? '').matchAll(/(--[a-z-]+)/g)].map((m) => m[1] as string);
    expect(sessionFlags).toContain('--creator');
    for (const flag of sessionFlags) expect(sessionHelp, flag).toMatch(new RegExp(`^\\s+${flag} `, 'm'));
  });
});
