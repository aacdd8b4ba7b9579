// The checks behind `knowledgefs doctor`: can this machine mount knowledge/,
// and can it reach its control plane with its token? Each check returns a
// plain result (status, what was found, how to fix it) and never throws, so
// one broken thing never hides the others. Where the machine is looked at
// (device path, library paths, PATH, uid, fuse.conf) comes in as `Probes`,
// so tests point a check at a missing or wrong file without touching the
// real /dev/fuse. Network checks are bounded by one timeout each.

import { constants as fsConstants } from 'node:fs';
import { access, open, readFile, stat } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { delimiter, dirname, join } from 'node:path';
import { request } from 'undici';

/** `note` and `skip` are informational: only `FAIL` makes doctor exit 1. */
export type CheckStatus = 'ok' | 'FAIL' | 'note' | 'skip';

export interface CheckResult {
  readonly name: string;
  readonly status: CheckStatus;
  readonly detail: string;
  readonly fix?: string;
}

export interface Probes {
  readonly devFuse: string;
  readonly libfusePaths: readonly string[];
  /** `ldconfig -p` output, or undefined when ldconfig can't run. */
  readonly ldconfig: () => Promise<string | undefined>;
  readonly pathEnv: string | undefined;
  readonly fuseConf: string;
  readonly uid: number;
  /** Supplementary and primary group ids of this process. */
  readonly groups: readonly number[];
  /** Whether the native (libfuse 3) binding loads here, from where, or why not; absent = not checked. */
  readonly nativeBinding?: () => Promise<NativeProbe>;
  /** Whether fuse-native (the optional libfuse 2 fallback) is installed; absent = not checked. */
  readonly fuseNative?: () => Promise<boolean>;
}

export type NativeProbe =
  | { readonly loads: true; /** e.g. `prebuilt linux-x64` (native-addon.ts). */ readonly origin: string }
  | { readonly loads: false; readonly why: string; /** A mount would build it from source first. */ readonly canBuild: boolean };

export function systemProbes(env: NodeJS.ProcessEnv): Probes {
  return {
    devFuse: '/dev/fuse',
    libfusePaths: [
      '/lib/x86_64-linux-gnu/libfuse.so.2',
      '/usr/lib/x86_64-linux-gnu/libfuse.so.2',
      '/lib/aarch64-linux-gnu/libfuse.so.2',
      '/usr/lib/aarch64-linux-gnu/libfuse.so.2',
      '/usr/lib/libfuse.so.2',
      '/usr/lib64/libfuse.so.2',
      '/lib64/libfuse.so.2',
    ],
    ldconfig: () =>
      new Promise((resolve) => {
        const opts = { encoding: 'utf8' as const, timeout: 5_000 };
        execFile('ldconfig', ['-p'], opts, (err, out) => {
          if (!err) return resolve(out);
          execFile('/sbin/ldconfig', ['-p'], opts, (err2, out2) => resolve(err2 ? undefined : out2));
        });
      }),
    pathEnv: env.PATH,
    fuseConf: '/etc/fuse.conf',
    uid: process.getuid?.() ?? -1,
    groups: [...new Set([...(process.getgroups?.() ?? []), process.getgid?.() ?? -1])],
    nativeBinding: async () => {
      // Looks without building: doctor writes nothing.
      const { resolveNativeAddon, thisMachine } = await import('../../daemon/fuse/native-addon.js');
      const r = resolveNativeAddon(thisMachine(env), false);
      return r.ok ? { loads: true, origin: r.origin } : { loads: false, why: r.reasons.join('; '), canBuild: r.canBuild };
    },
    fuseNative: async () => (await import('../../daemon/fuse/fuse-native-presence.js')).fuseNativeInstalled(),
  };
}

const errnoOf = (err: unknown): string => (err as NodeJS.ErrnoException | undefined)?.code ?? 'error';
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export async function checkDevFuse(p: Probes): Promise<CheckResult> {
  const name = p.devFuse;
  const containerFix = 'in a container: docker run --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor:unconfined; on a host: modprobe fuse';
  let st;
  try {
    st = await stat(p.devFuse);
  } catch (err) {
    return { name, status: 'FAIL', detail: `${p.devFuse} is missing (${errnoOf(err)})`, fix: containerFix };
  }
  if (!st.isCharacterDevice()) {
    return { name, status: 'FAIL', detail: `${p.devFuse} is not a character device`, fix: containerFix };
  }
  try {
    const fh = await open(p.devFuse, 'r+');
    await fh.close();
  } catch (err) {
    const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
    return {
      name,
      status: 'FAIL',
      detail: `cannot open ${p.devFuse} read-write (${errnoOf(err)}; mode ${mode}, owner ${st.uid}:${st.gid})`,
      fix: 'run as root, or make /dev/fuse mode 0666 (the Debian default); in a container also add --cap-add SYS_ADMIN',
    };
  }
  return { name, status: 'ok', detail: 'character device, opens read-write' };
}

/**
 * The FUSE binding `knowledgefs mount` (--fuse-binding auto) would use, and
 * why: the native addon (libfuse 3) when it loads, else fuse-native when
 * libfuse.so.2 is here.
 */
export async function checkLibfuse(p: Probes): Promise<CheckResult> {
  const name = 'fuse binding';
  const native: NativeProbe = p.nativeBinding === undefined ? { loads: false, why: 'not checked', canBuild: false } : await p.nativeBinding();
  if (native.loads) return { name, status: 'ok', detail: `native (${native.origin}): a mount uses it` };
  if (native.canBuild) {
    return { name, status: 'note', detail: `native, built from source at the first mount (${native.why})`, fix: 'the build needs libfuse3-dev (Debian: apt-get install -y libfuse3-dev pkg-config)' };
  }
  const fix = 'apt-get install -y libfuse3-3 fuse3 for the native binding, or libfuse2 for fuse-native (Debian/Ubuntu)';
  if (p.fuseNative !== undefined && !(await p.fuseNative())) {
    return { name, status: 'FAIL', detail: `native does not load (${native.why}), and fuse-native is not installed to fall back on`, fix: 'apt-get install -y libfuse3-3 fuse3 (Debian/Ubuntu) for the native binding' };
  }
  const out = await p.ldconfig();
  const line = out?.split('\n').find((l) => /\blibfuse\.so\.2\b/.test(l));
  let libfuse2 = line === undefined ? undefined : (line.split('=>')[1]?.trim() ?? 'a path ldconfig knows');
  for (const path of libfuse2 === undefined ? p.libfusePaths : []) {
    try {
      await access(path, fsConstants.R_OK);
      libfuse2 = path;
      break;
    } catch {
      // try the next one
    }
  }
  if (libfuse2 !== undefined) return { name, status: 'ok', detail: `fuse-native (libfuse.so.2 at ${libfuse2}); native does not load: ${native.why}` };
  return { name, status: 'FAIL', detail: `native does not load (${native.why}) and libfuse.so.2 is not found for fuse-native`, fix };
}

/**
 * fuse-native, the libfuse 2 fallback: an optional peer, installed only by
 * whoever wants it. Absent is a note, not a failure (the native binding
 * needs nothing of it); checkLibfuse fails when nothing else can mount.
 */
export async function checkFuseNative(p: Probes): Promise<CheckResult> {
  const name = 'fuse-native';
  if (p.fuseNative === undefined) return { name, status: 'skip', detail: 'not checked' };
  if (await p.fuseNative()) return { name, status: 'ok', detail: 'installed: the libfuse 2 fallback (--fuse-binding fuse-native, or auto when native does not load)' };
  const { FUSE_NATIVE_INSTALL } = await import('../../daemon/fuse/fuse-native-presence.js');
  return { name, status: 'note', detail: 'not installed (the optional libfuse 2 fallback; the native binding does not need it)', fix: FUSE_NATIVE_INSTALL };
}

async function findOnPath(command: string, pathEnv: string | undefined): Promise<string | undefined> {
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, command);
    try {
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export async function checkFusermount(p: Probes): Promise<CheckResult> {
  const name = 'fusermount';
  const path = await findOnPath('fusermount', p.pathEnv);
  if (path === undefined) {
    return { name, status: 'FAIL', detail: 'fusermount is not on PATH (unmounting and stale-mount clean-up need it)', fix: 'apt-get install -y fuse' };
  }
  if (p.uid !== 0) {
    const st = await stat(path).catch(() => undefined);
    if (st !== undefined && (st.mode & 0o4000) === 0) {
      return { name, status: 'FAIL', detail: `${path} is not setuid root, so a non-root user cannot mount`, fix: `run as root, or: chmod u+s ${path}` };
    }
  }
  return { name, status: 'ok', detail: path };
}

/** Which group owns /dev/fuse and whether this user is in it: the usual way a non-root user gets the device. */
async function fuseGroupNote(p: Probes): Promise<string> {
  const st = await stat(p.devFuse).catch(() => undefined);
  if (st === undefined) return '';
  const mode = st.mode & 0o777;
  const octal = mode.toString(8).padStart(4, '0');
  if ((mode & 0o006) === 0o006) return `; ${p.devFuse} is open to everyone (mode ${octal})`;
  if ((mode & 0o060) !== 0o060) return `; ${p.devFuse} is mode ${octal}: only its owner (uid ${st.uid}) can open it`;
  const inGroup = p.groups.includes(st.gid);
  return inGroup
    ? `; member of group ${st.gid}, which owns ${p.devFuse}`
    : `; not in group ${st.gid}, which owns ${p.devFuse} (add the user to it, e.g. usermod -aG fuse USER, if the device is group-only)`;
}

export async function checkPermissions(p: Probes): Promise<CheckResult> {
  const name = 'permissions';
  if (p.uid === 0) return { name, status: 'ok', detail: 'running as root (can mount, and may use --allow-other)' };
  const group = await fuseGroupNote(p);
  const conf = await readFile(p.fuseConf, 'utf8').catch(() => '');
  const allowOther = conf.split('\n').some((l) => l.trim() === 'user_allow_other');
  if (allowOther) {
    return { name, status: 'ok', detail: `running as uid ${p.uid}${group}; user_allow_other is set in ${p.fuseConf}, so --allow-other works` };
  }
  return {
    name,
    status: 'note',
    detail: `running as uid ${p.uid}${group}; mounts go through setuid fusermount; --allow-other (an agent running as another user) needs user_allow_other in ${p.fuseConf}`,
    fix: `as root: echo user_allow_other >> ${p.fuseConf}`,
  };
}

export interface ServerCheckOptions {
  readonly server: string | undefined;
  readonly token: string | undefined;
  /** Where the token came from, for messages (`--token-file F`, `KNOWLEDGEFS_TOKEN`). */
  readonly tokenSource: string | undefined;
  /** A problem reading the token (unreadable file, empty file). */
  readonly tokenError: string | undefined;
  readonly timeoutMs: number;
}

async function get(url: string, timeoutMs: number, token?: string): Promise<{ status: number; body: string }> {
  const res = await request(url, {
    method: 'GET',
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = await res.body.text();
  return { status: res.statusCode, body: body.slice(0, 2_000) };
}

function networkReason(err: unknown, timeoutMs: number): string {
  const code = errnoOf(err);
  const cause = (err as { cause?: NodeJS.ErrnoException }).cause?.code;
  const c = cause ?? code;
  if (c === 'ECONNREFUSED') return 'connection refused (nothing listening there)';
  if (c === 'ENOTFOUND' || c === 'EAI_AGAIN') return 'host name does not resolve';
  if (c === 'UND_ERR_HEADERS_TIMEOUT' || c === 'UND_ERR_BODY_TIMEOUT' || (err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError') {
    return `no answer within ${timeoutMs} ms`;
  }
  return messageOf(err);
}

function errorMessage(body: string): string | undefined {
  try {
    const m = (JSON.parse(body) as { error?: { message?: unknown } }).error?.message;
    return typeof m === 'string' ? m : undefined;
  } catch {
    return undefined;
  }
}

/** Control plane reachability, then the token; the token check is skipped when the first fails. */
export async function checkServer(o: ServerCheckOptions): Promise<CheckResult[]> {
  if (o.server === undefined) {
    return [
      { name: 'control plane', status: 'skip', detail: 'no --server given (or KNOWLEDGEFS_SERVER)' },
      { name: 'token', status: 'skip', detail: 'no --server given' },
    ];
  }
  const base = o.server.replace(/\/+$/, '');
  let reachable: CheckResult;
  try {
    new URL(base);
    const started = Date.now();
    const res = await get(`${base}/healthz`, o.timeoutMs);
    const ms = Date.now() - started;
    let healthy = false;
    try {
      healthy = (JSON.parse(res.body) as { ok?: unknown }).ok === true;
    } catch {
      // not JSON: not a knowledgefs control plane
    }
    reachable = res.status === 200 && healthy
      ? { name: 'control plane', status: 'ok', detail: `${base}/healthz answered in ${ms} ms` }
      : {
          name: 'control plane',
          status: 'FAIL',
          detail: `${base}/healthz answered ${res.status}${healthy ? '' : ' without {"ok": true}'}: is this a knowledgefs control plane?`,
          fix: 'check the URL (the line `listening on http://HOST:PORT` that `knowledgefs serve` prints)',
        };
  } catch (err) {
    reachable = {
      name: 'control plane',
      status: 'FAIL',
      detail: `${base}: ${err instanceof TypeError && /URL/i.test(err.message) ? 'not a URL' : networkReason(err, o.timeoutMs)}`,
      fix: 'start `knowledgefs serve` there, or fix --server / the network between this machine and it',
    };
  }
  return [reachable, await checkToken(o, base, reachable.status === 'ok')];
}

async function checkToken(o: ServerCheckOptions, base: string, reachable: boolean): Promise<CheckResult> {
  const name = 'token';
  if (o.tokenError !== undefined) {
    return { name, status: 'FAIL', detail: o.tokenError, fix: 'point --token-file at the file holding the runner token from `knowledgefs session create`' };
  }
  if (o.token === undefined) return { name, status: 'skip', detail: 'no --token-file given (or KNOWLEDGEFS_TOKEN)' };
  if (!reachable) return { name, status: 'skip', detail: 'control plane unreachable' };
  const createFix = 'create a session: knowledgefs session create --server URL --admin-token-file F --kind team|personal --creator USER [--team ID]';
  try {
    const res = await get(`${base}/v1/session`, o.timeoutMs, o.token);
    if (res.status === 200) {
      const s = JSON.parse(res.body) as { sessionId?: string; kind?: string; creator?: string; team?: string; mounted?: string[] };
      const bound = s.team === undefined ? 'no bound team' : `bound to ${s.team}`;
      const mounted = s.mounted !== undefined && s.mounted.length > 0 ? `, mounted: ${s.mounted.join(', ')}` : '';
      return { name, status: 'ok', detail: `${o.tokenSource ?? 'token'} is valid: session ${s.sessionId ?? '?'} (${s.kind ?? '?'}, creator ${s.creator ?? '?'}, ${bound}${mounted})` };
    }
    const why = errorMessage(res.body);
    if (res.status === 401) {
      return { name, status: 'FAIL', detail: `${o.tokenSource ?? 'token'} was refused (401${why ? `: ${why}` : ''}): wrong token, or the session was deleted`, fix: createFix };
    }
    if (res.status === 403) {
      return { name, status: 'FAIL', detail: `${o.tokenSource ?? 'token'} was refused (403${why ? `: ${why}` : ''}): is this the admin token? the mount needs a runner token`, fix: createFix };
    }
    return { name, status: 'FAIL', detail: `GET /v1/session answered ${res.status}${why ? `: ${why}` : ''}`, fix: 'see the control plane log' };
  } catch (err) {
    return { name, status: 'FAIL', detail: `GET /v1/session: ${networkReason(err, o.timeoutMs)}`, fix: 'see the control plane log' };
  }
}

/**
 * A mount point: not mounted, mounted and answering, or stale (its daemon is
 * gone). `stat` runs in a child process with a timeout: a stat of a hung FUSE
 * mount in this process could hold a libuv thread until the kernel gives up.
 */
export async function checkMountpoint(dir: string, timeoutMs: number): Promise<CheckResult> {
  const name = 'mount point';
  const staleFix = `fusermount -uz ${dir} (then start \`knowledgefs mount\` again)`;
  const probe = await runProbe('stat', ['-c', '%d %F', '--', dir, dirname(dir)], timeoutMs);
  if (probe.timedOut) {
    return { name, status: 'FAIL', detail: `${dir} did not answer stat within ${timeoutMs} ms (a hung mount)`, fix: staleFix };
  }
  if (probe.failed) {
    if (/Transport endpoint is not connected/i.test(probe.err)) {
      return { name, status: 'FAIL', detail: `${dir} is a stale mount (transport endpoint is not connected: its daemon is gone)`, fix: staleFix };
    }
    if (/No such file or directory/i.test(probe.err)) {
      return { name, status: 'note', detail: `${dir} does not exist yet (\`knowledgefs mount\` creates it)` };
    }
    return { name, status: 'FAIL', detail: `stat ${dir}: ${probe.err.trim().split('\n')[0] ?? 'failed'}` };
  }
  const [self, parent] = probe.out.trim().split('\n').map((l) => {
    const [dev, ...type] = l.split(' ');
    return { dev, type: type.join(' ') };
  });
  if (self === undefined || parent === undefined) return { name, status: 'FAIL', detail: `stat ${dir}: unexpected output` };
  if (self.type !== 'directory') return { name, status: 'FAIL', detail: `${dir} is not a directory`, fix: 'choose a directory as the mount point' };
  if (self.dev === parent.dev) return { name, status: 'note', detail: `${dir} exists and is not mounted` };
  // stat can be answered from the kernel's attribute cache for a moment after
  // the daemon died; listing the directory always reaches the daemon.
  const listing = await runProbe('ls', ['-a', '--', dir], timeoutMs);
  if (listing.timedOut) {
    return { name, status: 'FAIL', detail: `${dir} did not answer ls within ${timeoutMs} ms (a hung mount)`, fix: staleFix };
  }
  if (listing.failed) {
    if (/Transport endpoint is not connected/i.test(listing.err)) {
      return { name, status: 'FAIL', detail: `${dir} is a stale mount (transport endpoint is not connected: its daemon is gone)`, fix: staleFix };
    }
    return { name, status: 'FAIL', detail: `ls ${dir}: ${listing.err.trim().split('\n')[0] ?? 'failed'}` };
  }
  return { name, status: 'ok', detail: `${dir} is mounted and answers` };
}

interface ProbeResult { out: string; err: string; timedOut: boolean; failed: boolean }

/** Runs a shell tool against a path in a child process, killed after `timeoutMs`. */
function runProbe(command: string, args: string[], timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolvePromise) => {
    execFile(command, args, { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', env: { ...process.env, LC_ALL: 'C' } }, (err, out, errOut) => {
      const timedOut = err !== null && (err as { killed?: boolean }).killed === true;
      resolvePromise({ out, err: errOut, timedOut, failed: err !== null });
    });
  });
}
