// Page-cache coherence on a real mount, with the default flags: a file is
// replaced (write + rename) while a descriptor to the old version is held.
// The held descriptor's reads run in a child process (a real open file
// description, pread at fixed offsets); the other readers are `head` and
// `cat`. What must hold (docs/SEMANTICS.md, "Reading"):
//   - every open after the change reads exactly the new version, whole;
//   - fuse-native (one inode, one page cache per path): the held descriptor
//     never brings old bytes back into the kernel's cache: a read the kernel
//     passes to the daemon fails with ESTALE, a read it answers from its
//     cache gives bytes of the new version;
//   - native (an inode per version): the held descriptor keeps reading the
//     version it opened, whole, and no read fails.

import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { constants } from 'node:os';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { bindingOf, fuseSuite, run, startMount, waitFor, type MountHandle } from './helpers/mount.js';

const SIZE = 512 * 1024;
const OFFSETS = [0, 128 * 1024, 250_000, 400_000, 520_000];
const ESTALE = constants.errno.ESTALE;
const BOUND = 20_000; // the sync (default 2 s) and the rescan, on a busy machine

// The held descriptor: opens, reads 4 KiB, says "opened <bytes>", then on
// "read\n" preads 4 KiB at each offset and prints one JSON line per offset.
const HOLDER = `
const fs = require('node:fs');
const fd = fs.openSync(process.argv[1], 'r');
const buf = Buffer.alloc(4096);
const first = fs.readSync(fd, buf, 0, 4096, 0);
process.stdout.write('opened ' + buf.subarray(0, first).toString('latin1').replace(/A/g, '').length + ' ' + first + '\\n');
process.stdin.once('data', () => {
  for (const offset of JSON.parse(process.argv[2])) {
    try {
      const n = fs.readSync(fd, buf, 0, 4096, offset);
      const text = buf.subarray(0, n).toString('latin1');
      process.stdout.write(JSON.stringify({ offset, n, a: text.split('A').length - 1, b: text.split('B').length - 1 }) + '\\n');
    } catch (err) {
      process.stdout.write(JSON.stringify({ offset, errno: -err.errno }) + '\\n');
    }
  }
  fs.closeSync(fd);
  process.stdin.destroy();
});
`;

interface HeldRead {
  readonly offset: number;
  readonly n?: number;
  readonly a?: number;
  readonly b?: number;
  readonly errno?: number;
}

let cp: TestControlPlane;
let dataDir: string;
let m: MountHandle | undefined;
let holder: ChildProcessWithoutNullStreams | undefined;

function counts(text: string): { a: number; b: number; other: number } {
  const a = text.split('A').length - 1;
  const b = text.split('B').length - 1;
  return { a, b, other: text.length - a - b };
}

/** Replaces a data file the way editors do: write elsewhere, rename over. */
async function replace(rel: string, content: string): Promise<void> {
  const tmp = join(dataDir, '..', `${dataDir.split('/').pop()}-${rel.replace(/\W/g, '_')}.tmp`);
  await writeFile(tmp, content);
  await rename(tmp, join(dataDir, rel));
}

const syncLines = (): number => (m?.stderr.match(/^sync: plan /gm) ?? []).length;

fuseSuite('mount coherence: a held descriptor across a change', () => {
  beforeAll(async () => {
    dataDir = await makeDataDir({
      users: { alice: { teams: [] } },
      files: { 'account/DUTY.md': '# Account\n', 'account/big.txt': 'A'.repeat(SIZE) },
    });
    cp = await startControlPlane({ dataDir });
  });

  afterAll(async () => {
    holder?.kill('SIGKILL');
    await m?.stop();
    await cp?.close();
    await removeDataDir(dataDir);
  });

  it('new opens read one version whole; the held descriptor keeps its version (native) or reads the new bytes or fails with ESTALE (fuse-native)', async () => {
    const { token } = await cp.createSession({ kind: 'personal', creator: 'alice' });
    m = await startMount({ serverUrl: cp.url, token });
    const file = join(m.mountpoint, 'account/big.txt');

    // 1. Reader 1 opens the file and reads 4 KiB of A.
    holder = spawn(process.execPath, ['-e', HOLDER, file, JSON.stringify(OFFSETS)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    holder.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
    expect(await waitFor(() => out.includes('\n'), BOUND)).toBe(true);
    expect(out).toBe('opened 0 4096\n');

    // 2. The file is replaced by B; wait until the daemon has the new plan.
    const before = syncLines();
    await replace('account/big.txt', 'B'.repeat(SIZE));
    expect(await waitFor(() => syncLines() > before, BOUND)).toBe(true);

    // 3. Reader 2 opens, reads 4 KiB, closes: the new version.
    const second = await run('head', ['-c', '4096', file], { binary: true });
    expect(second.code).toBe(0);
    expect(counts(second.stdout)).toEqual({ a: 0, b: 4096, other: 0 });

    // 4. Reader 1 reads through its old descriptor: never an A.
    holder.stdin.write('read\n');
    await once(holder, 'exit');
    const reads = out.trim().split('\n').slice(1).map((line) => JSON.parse(line) as HeldRead);
    expect(reads.map((r) => r.offset)).toEqual(OFFSETS);
    if (bindingOf(m) === 'native') {
      for (const r of reads) expect(r).toEqual({ offset: r.offset, n: 4096, a: 4096, b: 0 });
    } else {
      for (const r of reads) {
        if (r.errno !== undefined) expect(r.errno).toBe(ESTALE);
        else expect({ offset: r.offset, a: r.a, b: r.b }).toEqual({ offset: r.offset, a: 0, b: r.n });
      }
      // The kernel cannot have read 520 000 ahead for a 4 KiB read: that one reached the daemon.
      expect(reads.some((r) => r.errno === ESTALE)).toBe(true);
    }

    // 5. A brand-new open reads the new version, whole; so does every one after it.
    for (let i = 0; i < 3; i++) {
      const third = await run('cat', [file], { binary: true });
      expect(third.code).toBe(0);
      expect(counts(third.stdout)).toEqual({ a: 0, b: SIZE, other: 0 });
    }
    expect(m.stderr).not.toMatch(/error|EIO/i);
  });
});
