#!/usr/bin/env node
// One-time machine setup run before `npm test`, `npm run demo` and `npm run bench`:
// installs what the two FUSE bindings need when missing (root only, Debian):
// libfuse2 for fuse-native; libfuse3-3, and gcc, pkg-config and libfuse3-dev
// to build the native addon; fuse3 for fusermount. Then the npm dependencies
// when node_modules is absent. Says what to do when it can't.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg) => process.stderr.write(`setup: ${msg}\n`);

function hasLibfuse2() {
  const out = spawnSync('ldconfig', ['-p'], { encoding: 'utf8' });
  if (out.status === 0 && /libfuse\.so\.2\b/.test(out.stdout)) return true;
  return ['/lib/x86_64-linux-gnu/libfuse.so.2', '/usr/lib/x86_64-linux-gnu/libfuse.so.2', '/lib/aarch64-linux-gnu/libfuse.so.2', '/usr/lib/libfuse.so.2']
    .some((p) => existsSync(p));
}
const hasCommand = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
const hasLibfuse3 = () => /libfuse3\.so\.3\b/.test(spawnSync('ldconfig', ['-p'], { encoding: 'utf8' }).stdout ?? '');

function ensureFuse() {
  const missing = [];
  if (!hasLibfuse2()) missing.push('libfuse2');
  if (!hasLibfuse3()) missing.push('libfuse3-3');
  if (!existsSync('/usr/include/fuse3/fuse_lowlevel.h')) missing.push('libfuse3-dev');
  if (!hasCommand('fusermount')) missing.push('fuse3');
  if (!hasCommand('gcc')) missing.push('gcc', 'libc6-dev');
  if (!hasCommand('pkg-config')) missing.push('pkg-config');
  if (missing.length === 0) return;
  const isRoot = process.getuid?.() === 0;
  if (!isRoot || !existsSync('/usr/bin/apt-get')) {
    say(`missing Debian package(s): ${missing.join(' ')}.`);
    say(`install them as root: apt-get update && apt-get install -y ${missing.join(' ')}`);
    // Without the build tools the addon is not built and mounts use fuse-native; without any binding nothing mounts.
    const mountable = hasCommand('fusermount') && (hasLibfuse2() || (hasLibfuse3() && existsSync(join(root, 'native', 'build', 'knowledgefs_fuse.node'))));
    if (!mountable) process.exit(1);
    return;
  }
  say(`installing ${missing.join(' ')} (apt-get)…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env });
}

function ensureNodeModules() {
  if (existsSync(join(root, 'node_modules', 'fuse-native'))) return;
  say('installing npm dependencies (npm ci)…');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { stdio: 'inherit', cwd: root });
}

ensureFuse();
ensureNodeModules();
if (!existsSync('/dev/fuse')) {
  say('/dev/fuse is missing: FUSE mounts will not work here.');
  say('in a container, run it with --device /dev/fuse --cap-add SYS_ADMIN (see README, "Running in containers").');
}
