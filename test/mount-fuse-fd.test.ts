// `knowledgefs mount --fuse-fd N` and `mount-helper` refusing what cannot
// work, before anything is mounted or served, with a message naming the fix;
// and the exact kernel options and privilege drop mount-helper uses. The
// working path is in mount-unprivileged.test.ts.

import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handedMountProblems } from '../src/daemon/fuse/handed-mount.js';
import { dropPrivilegesArgs, kernelMountOptions } from '../src/daemon/mount-helper.js';
import { resolveRunAsUser } from '../src/daemon/run-as-user.js';
import { BIN } from './helpers/mount.js';

// --fuse-fd exists on the native binding only: these daemons mount with it even in
// the run of the suite on fuse-native (npm run test:fuse-native sets this to fuse-native).
process.env.KNOWLEDGEFS_FUSE_BINDING = 'native';

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'kfs-fuse-fd-'));
  await writeFile(join(scratch, 'token'), 'kfs_not_a_real_token\n', { mode: 0o600 });
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** `knowledgefs ARGS` with `fd3` (a path opened read-only) as its descriptor 3. */
function cli(args: string[], fd3?: string): Promise<{ code: number | null; stderr: string }> {
  const fd = fd3 === undefined ? undefined : openSync(fd3, 'r');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe', ...(fd === undefined ? [] : [fd])] });
    if (fd !== undefined) closeSync(fd);
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

const mountArgs = (mountpoint: string, ...more: string[]) => ['mount', mountpoint, '--server', 'http://127.0.0.1:9', '--token-file', join(scratch, 'token'), ...more];

describe('knowledgefs mount --fuse-fd: refused with the fix named', () => {
  it('with fuse-native (libfuse 2 cannot serve a descriptor it did not mount)', async () => {
    const r = await cli(mountArgs(join(scratch, 'k1'), '--fuse-fd', '3', '--fuse-binding', 'fuse-native'), '/dev/null');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--fuse-fd needs the native binding (libfuse 3): fuse-native (libfuse 2) cannot serve a descriptor another process mounted');
  });

  it('/dev/fd/N as the mount point: the directory is needed (the read tool resolves under it)', async () => {
    const r = await cli(mountArgs('/dev/fd/3'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('/dev/fd/3 is a descriptor, not a mount point: give the directory where it is mounted');
    expect(r.stderr).toContain('--fuse-fd 3');
  });

  it('a descriptor number that is stdin/out/err or not a number', async () => {
    for (const bad of ['1', 'three', '-4']) {
      const r = await cli(mountArgs(join(scratch, 'k2'), `--fuse-fd=${bad}`));
      expect(r.code, bad).toBe(2);
      expect(r.stderr, bad).toContain('--fuse-fd must be an open descriptor number ≥ 3');
    }
  });

  it('a descriptor that is not open, or not /dev/fuse on a FUSE mount', async () => {
    const closed = await cli(mountArgs(join(scratch, 'k3'), '--fuse-fd', '900'));
    expect(closed.code).toBe(2);
    expect(closed.stderr).toContain('--fuse-fd 900 is not an open descriptor (EBADF)');
    const file = await cli(mountArgs(scratch, '--fuse-fd', '3'), join(scratch, 'token'));
    expect(file.code).toBe(2);
    expect(file.stderr).toContain('--fuse-fd 3 is not /dev/fuse');
    expect(file.stderr).toContain(`${scratch} is not a FUSE mount`);
  });
});

describe('handed mount: its kernel options must be ro and match --allow-other and --group', () => {
  const entry = (options: string) => ({ source: 'knowledgefs', target: '/k', fstype: 'fuse.knowledgefs', options: options.split(',') });
  const fuse = () => true;
  it('agreeing options pass; each disagreement is named', () => {
    expect(handedMountProblems(3, '/k', entry('ro,user_id=1,group_id=1,default_permissions,allow_other'), { allowOther: true, defaultPermissions: true }, fuse)).toEqual([]);
    expect(handedMountProblems(3, '/k', entry('ro,user_id=1,group_id=1'), { allowOther: false, defaultPermissions: false }, fuse)).toEqual([]);
    expect(handedMountProblems(3, '/k', entry('ro,user_id=1,group_id=1'), { allowOther: true, defaultPermissions: false }, fuse).join()).toContain('mounted without allow_other');
    expect(handedMountProblems(3, '/k', entry('ro,allow_other'), { allowOther: false, defaultPermissions: false }, fuse).join()).toContain('mounted with allow_other (every local user may read it)');
    expect(handedMountProblems(3, '/k', entry('ro,allow_other'), { allowOther: true, defaultPermissions: true }, fuse).join()).toContain('--group would not be enforced');
    expect(handedMountProblems(3, '/k', undefined, { allowOther: false, defaultPermissions: false }, fuse).join()).toContain('/k is not a FUSE mount');
    expect(handedMountProblems(3, '/k', entry('rw,user_id=1,group_id=1'), { allowOther: false, defaultPermissions: false }, fuse)).toEqual([
      '/k was mounted read-write: a knowledge mount is read-only at the kernel level (writes get EROFS), so mount it ro (mount-helper does)',
    ]);
  });
});

describe('mount-helper', () => {
  it('mounts the way fusermount3 does: nosuid, nodev, the descriptor, a directory root owned by the daemon user', () => {
    const user = { uid: 1000, gid: 1001 };
    expect(kernelMountOptions({ user, allowOther: false, defaultPermissions: false }, 3)).toBe('ro,nosuid,nodev,fd=3,rootmode=40000,user_id=1000,group_id=1001');
    expect(kernelMountOptions({ user, allowOther: true, defaultPermissions: true }, 3)).toBe('ro,nosuid,nodev,fd=3,rootmode=40000,user_id=1000,group_id=1001,allow_other,default_permissions');
  });

  it('drops to the user with no groups, no capabilities (the bounding set too) and no way back', () => {
    expect(dropPrivilegesArgs({ uid: 1000, gid: 1001 })).toEqual(['--reuid=1000', '--regid=1001', '--clear-groups', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all', '--no-new-privs']);
  });

  it('--user: root, root\'s group, a uid without a group, an unknown name are refused', () => {
    expect(() => resolveRunAsUser('0:1000')).toThrow(/must run as an ordinary user, not root/);
    expect(() => resolveRunAsUser('root')).toThrow(/not root/);
    expect(() => resolveRunAsUser('1000:0')).toThrow(/root's group/);
    expect(() => resolveRunAsUser('987654')).toThrow(/has no entry in the user database, so give its group too \(--user 987654:GID\)/);
    expect(() => resolveRunAsUser('no-such-user-kfs')).toThrow(/no such user/);
    expect(() => resolveRunAsUser('a:b:c')).toThrow(/expected NAME\|UID or NAME\|UID:GROUP\|GID/);
    expect(resolveRunAsUser('987654:987654')).toEqual({ uid: 987654, gid: 987654 });
  });

  it('without a daemon command it says what is missing', async () => {
    const none = await cli(['mount-helper', join(scratch, 'k4'), '--user', '987654:987654']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/missing required argument 'command'|no daemon command/);
  });
});
