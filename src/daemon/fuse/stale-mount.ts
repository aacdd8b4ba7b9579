// A daemon killed with SIGKILL leaves its mount point attached but dead:
// every access fails with ENOTCONN ("Transport endpoint is not connected").
// Before mounting, such a mount is detached with `fusermount -uz`. A mount
// point that is still served by a live process is left alone (that is
// someone else's mount): the caller gets an error instead.
//
// The probe runs `stat` in a child process with a timeout, because a stat
// of a hung FUSE mount in this process could block a libuv thread forever.

import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { KnowledgeError } from '../../core/errors.js';

/** Decodes the octal escapes /proc/mounts uses for spaces, tabs, newlines and backslashes. */
export function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export interface MountEntry {
  readonly source: string;
  readonly target: string;
  readonly fstype: string;
  /** The mount options, e.g. `rw,nosuid,nodev,relatime,user_id=0,group_id=0,allow_other`. */
  readonly options: readonly string[];
}

export function parseMounts(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const [source, target, fstype, options] = line.split(' ');
    if (source === undefined || target === undefined || fstype === undefined) continue;
    entries.push({ source: unescapeMountPath(source), target: unescapeMountPath(target), fstype, options: options?.split(',') ?? [] });
  }
  return entries;
}

export async function mountEntry(mountpoint: string): Promise<MountEntry | undefined> {
  let text: string;
  try {
    text = await readFile('/proc/mounts', 'utf8');
  } catch {
    return undefined;
  }
  return parseMounts(text).findLast((e) => e.target === mountpoint);
}

type Probe = 'alive' | 'dead';

function probe(mountpoint: string, timeoutMs: number): Promise<Probe> {
  return new Promise((resolve) => {
    execFile('stat', ['-c', '%F', mountpoint], { timeout: timeoutMs, killSignal: 'SIGKILL' }, (err) => {
      resolve(err ? 'dead' : 'alive');
    });
  });
}

function run(cmd: string, args: string[]): Promise<{ ok: boolean; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 10_000 }, (err, _stdout, stderr) => resolve({ ok: !err, stderr: String(stderr).trim() }));
  });
}

/**
 * Detaches a dead mount at `mountpoint`. Returns a message when it did;
 * throws when a live filesystem is mounted there.
 */
export async function cleanStaleMount(mountpoint: string, probeTimeoutMs = 3000): Promise<string | undefined> {
  const entry = await mountEntry(mountpoint);
  if (entry === undefined) return undefined;
  if ((await probe(mountpoint, probeTimeoutMs)) === 'alive') {
    throw new KnowledgeError(
      'config',
      `${mountpoint} is already mounted (${entry.fstype} from ${entry.source}) and answering; stop the process serving it or choose another mount point`,
    );
  }
  const res = await run('fusermount', ['-uz', mountpoint]);
  if (!res.ok && (await mountEntry(mountpoint)) !== undefined) {
    throw new KnowledgeError('config', `${mountpoint} holds a dead mount that fusermount -uz could not detach: ${res.stderr}`);
  }
  return `cleaned up a stale mount at ${mountpoint} (left by a daemon that did not exit cleanly)`;
}
