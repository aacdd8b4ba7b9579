// What a FUSE mount needs from the machine, checked before mounting so a
// missing piece is one clear message (what is missing, how to fix it)
// instead of a native stack trace. Also used by `knowledgefs doctor`.

import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface FuseProblem {
  readonly missing: string;
  readonly fix: string;
}

const LIBFUSE_PATHS = [
  '/lib/x86_64-linux-gnu/libfuse.so.2',
  '/usr/lib/x86_64-linux-gnu/libfuse.so.2',
  '/lib/aarch64-linux-gnu/libfuse.so.2',
  '/usr/lib/aarch64-linux-gnu/libfuse.so.2',
  '/lib64/libfuse.so.2',
  '/usr/lib64/libfuse.so.2',
  '/usr/lib/libfuse.so.2',
  '/lib/libfuse.so.2',
];

export function hasLibfuse2(): boolean {
  if (LIBFUSE_PATHS.some((p) => existsSync(p))) return true;
  const out = spawnSync('ldconfig', ['-p'], { encoding: 'utf8' });
  return out.status === 0 && /libfuse\.so\.2\b/.test(out.stdout);
}

export function findOnPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  for (const dir of [...path.split(delimiter), '/bin', '/usr/bin', '/sbin', '/usr/sbin']) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** How the checks look at the machine; tests pass a fake one. */
export interface FuseProbe {
  exists(path: string): boolean;
  readWritable(path: string): boolean;
  hasLibfuse2(): boolean;
  findOnPath(name: string): string | undefined;
  uid(): number | undefined;
}

export const MACHINE: FuseProbe = {
  exists: existsSync,
  readWritable: (path) => {
    try {
      accessSync(path, constants.R_OK | constants.W_OK);
      return true;
    } catch {
      return false;
    }
  },
  hasLibfuse2,
  findOnPath: (name) => findOnPath(name),
  uid: () => process.getuid?.(),
};

/**
 * Everything missing for a FUSE mount on this machine; empty when all is there.
 * `binding` decides the library: libfuse 2 for fuse-native; the native addon links libfuse 3 itself (it would not load without it).
 */
export function fuseProblems(probe: FuseProbe = MACHINE, binding: 'native' | 'fuse-native' = 'fuse-native'): FuseProblem[] {
  const problems: FuseProblem[] = [];
  if (!probe.exists('/dev/fuse')) {
    problems.push({
      missing: '/dev/fuse does not exist',
      fix: 'load the fuse kernel module (modprobe fuse); in a container, run it with --device /dev/fuse --cap-add SYS_ADMIN',
    });
  } else if (!probe.readWritable('/dev/fuse')) {
    problems.push({
      missing: `no read/write permission on /dev/fuse for uid ${probe.uid() ?? '?'}`,
      fix: 'run as root, or give this user access (add it to the group owning /dev/fuse, or chmod 0666 /dev/fuse)',
    });
  }
  if (binding === 'fuse-native' && !probe.hasLibfuse2()) {
    problems.push({ missing: 'libfuse.so.2 (libfuse 2.9) is not installed', fix: 'apt-get install -y libfuse2 (Debian/Ubuntu)' });
  }
  if (probe.findOnPath('fusermount') === undefined) {
    problems.push({ missing: 'fusermount is not on PATH', fix: `apt-get install -y ${binding === 'native' ? 'fuse3' : 'fuse'} (Debian/Ubuntu)` });
  }
  return problems;
}

export function describeFuseProblems(problems: readonly FuseProblem[]): string {
  return `FUSE is not usable here:\n${problems.map((p) => `  - ${p.missing}: ${p.fix}`).join('\n')}`;
}
