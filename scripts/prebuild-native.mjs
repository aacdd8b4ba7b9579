#!/usr/bin/env node
// The libfuse 3 addon prebuilt for every Linux arch in PREBUILD_ARCHES,
// prebuilds/linux-<arch>/knowledgefs_fuse.node, compiled from every native/*.c
// by scripts/build-native.mjs (the prebuildify layout the loader in src/daemon/fuse/native-addon.ts looks in), for the npm tarball
// (scripts/prepack.mjs runs it; `node scripts/prebuild-native.mjs` alone
// builds them). Node-API is ABI-stable, so one build serves every Node line.
// Anything else under prebuilds/ is removed: only these ship.
// The other arch is cross-compiled with Debian's toolchain. Run as root, it
// installs what it lacks (dpkg --add-architecture, apt-get) and says so;
// otherwise it names the packages and fails. Each prebuild's ELF machine is
// checked, so a mixed-up toolchain cannot ship an x86-64 file as arm64.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, openSync, readSync, closeSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg) => process.stderr.write(`prebuild-native: ${msg}\n`);
const die = (msg) => {
  say(msg);
  process.exit(1);
};

/** Node arch → Debian arch, multiarch triplet, ELF e_machine. */
export const PREBUILD_ARCHES = {
  x64: { deb: 'amd64', triplet: 'x86_64-linux-gnu', elfMachine: 0x3e },
  arm64: { deb: 'arm64', triplet: 'aarch64-linux-gnu', elfMachine: 0xb7 },
};
export const prebuildPath = (arch) => join(root, 'prebuilds', `linux-${arch}`, 'knowledgefs_fuse.node');

const hasCommand = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
const dpkgHas = (pkg) => spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' }).stdout?.includes('install ok installed') === true;

/** The Debian packages building for `arch` on this machine still needs. */
function missingPackages(arch) {
  const { deb, triplet } = PREBUILD_ARCHES[arch];
  if (arch === process.arch) {
    return [
      ...(hasCommand('gcc') ? [] : ['gcc', 'libc6-dev']),
      ...(hasCommand('pkg-config') ? [] : ['pkg-config']),
      ...(existsSync('/usr/include/fuse3/fuse_lowlevel.h') ? [] : ['libfuse3-dev']),
    ];
  }
  return [
    ...(hasCommand(`${triplet}-gcc`) ? [] : [`gcc-${triplet.replaceAll('_', '-')}`]),
    ...(existsSync(`/usr/${triplet}/include/stdio.h`) ? [] : [`libc6-dev-${deb}-cross`]),
    ...(existsSync(`/usr/lib/${triplet}/libfuse3.so`) ? [] : [`libfuse3-dev:${deb}`]),
  ];
}

function installPackages(packages) {
  const foreign = [...new Set(packages.map((p) => p.split(':')[1]).filter((a) => a !== undefined))];
  const commands = [
    ...foreign.map((a) => `dpkg --add-architecture ${a}`),
    'apt-get update',
    `apt-get install -y ${packages.join(' ')}`,
  ];
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    die(`cannot build the prebuilt addons: missing ${packages.join(' ')}.\n  As root on Debian 12: ${commands.join(' && ')}`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const a of foreign) {
    say(`adding the ${a} architecture (dpkg --add-architecture ${a})…`);
    execFileSync('dpkg', ['--add-architecture', a], { stdio: 'inherit' });
  }
  say('apt-get update…');
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  say(`installing ${packages.join(' ')} (apt-get)…`);
  execFileSync('apt-get', ['install', '-y', '-qq', ...packages], { stdio: 'inherit', env });
}

/** e_machine of an ELF file (little-endian), or undefined when it is not ELF. */
export function elfMachine(file) {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  return header.readUInt32BE(0) === 0x7f454c46 ? header.readUInt16LE(18) : undefined;
}

/** Builds prebuilds/linux-<arch>/ for every arch (installing the toolchain as root when missing), and removes anything else there. */
export function buildPrebuilds() {
  if (process.platform !== 'linux') die(`the prebuilt addons are Linux shared objects; pack on Linux (this is ${process.platform})`);
  if (!Object.hasOwn(PREBUILD_ARCHES, process.arch)) die(`cannot pack on ${process.arch}: only ${Object.keys(PREBUILD_ARCHES).join(', ')} hosts are known`);
  const missing = [...new Set(Object.keys(PREBUILD_ARCHES).flatMap(missingPackages))];
  if (missing.length > 0) installPackages(missing);
  const wanted = new Set(Object.keys(PREBUILD_ARCHES).map((arch) => `linux-${arch}`));
  for (const entry of existsSync(join(root, 'prebuilds')) ? readdirSync(join(root, 'prebuilds')) : []) {
    if (!wanted.has(entry)) rmSync(join(root, 'prebuilds', entry), { recursive: true, force: true });
  }
  for (const [arch, { elfMachine: expected }] of Object.entries(PREBUILD_ARCHES)) {
    const out = prebuildPath(arch);
    say(`building prebuilds/linux-${arch}…`);
    const built = spawnSync(process.execPath, [join(root, 'scripts', 'build-native.mjs'), '--arch', arch, '--out', out, '--force'], { stdio: 'inherit' });
    if (built.status !== 0) die(`the linux-${arch} build failed`);
    const machine = elfMachine(out);
    if (machine !== expected) die(`${out} is ELF machine ${machine} (expected ${expected} for ${arch})`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildPrebuilds();
