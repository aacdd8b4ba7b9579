// The CLI in a pipe and at start-up. A reader that goes away ends any command
// quietly (no stack trace, exit 141 as for `ls`/`git`). Each command loads
// only what it needs: `knowledgefs read` is what a harness without the
// library calls on every turn, so neither it nor the mount daemon may pull in
// the control plane's PostgreSQL client, the MCP SDK (and its zod), or the S3
// signer; neither `read` nor the mount's start load prom-client either (~50 ms
// of loading: the daemon makes its metrics registry at the first status or
// scrape, after the mount is ready).
// The module graph is read from the loader itself (test/helpers/module-trace.mjs),
// so a new top-level import anywhere on these paths fails here.

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './helpers/control-plane.js';
import { makeDataDir, removeDataDir } from './helpers/data-dir.js';
import { BIN, fuseSuite, REPO_ROOT, run, startMount, type MountHandle } from './helpers/mount.js';

const TRACE = join(REPO_ROOT, 'test', 'helpers', 'module-trace.mjs');
/** Packages (and our modules) the read tool's and the mount's start must not load. */
const HEAVY = [/\/node_modules\/pg\//, /\/node_modules\/@modelcontextprotocol\//, /\/node_modules\/aws4\//, /\/node_modules\/zod\//, /\/dist\/(mcp|store\/s3|server)\//];
const heavyIn = (modules: readonly string[], extra: readonly RegExp[] = []): string[] => modules.filter((m) => [...HEAVY, ...extra].some((re) => re.test(m)));

let scratch = '';
let traceN = 0;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'kfs-cli-startup-'));
});
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Env that makes a node child write its module graph to a fresh file; read it with `modules(file)`. */
function traced(): { env: Record<string, string>; file: string } {
  const file = join(scratch, `modules-${++traceN}.txt`);
  return { file, env: { NODE_OPTIONS: `--import ${TRACE}`, KNOWLEDGEFS_TEST_MODULE_TRACE: file } };
}
/** node:http or node:https reached by an ES import, which the trace sees (not require()): docs/PERFORMANCE.md, "node:http through require". */
const esImportedHttp = (loaded: readonly string[]): string[] => loaded.filter((m) => m === 'node:http' || m === 'node:https');
/**
 * The CLI runs as a bundle (scripts/bundle-cli.mjs): each loaded file of
 * dist/bundle/ stands for the modules of dist/ it holds, listed in its
 * modules.json, so a graph reads the same bundled or not.
 */
async function modules(file: string): Promise<string[]> {
  const held = JSON.parse(await readFile(join(REPO_ROOT, 'dist', 'bundle', 'modules.json'), 'utf8')) as Record<string, string[]>;
  const bundled = `${pathToFileURL(join(REPO_ROOT, 'dist', 'bundle')).href}/`;
  const inside = (url: string): string[] => {
    const list = held[url.slice(bundled.length)];
    if (list === undefined) throw new Error(`${url} is not listed in dist/bundle/modules.json: the bundle and its list disagree (npm run build)`);
    return list.map((m) => pathToFileURL(join(REPO_ROOT, m)).href);
  };
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .flatMap((url) => (url.startsWith(bundled) ? [url, ...inside(url)] : [url]));
}

describe('a reader that goes away', () => {
  it.each([
    ['mount --help | true', `node ${BIN} mount --help | true`],
    ['read --help | true', `node ${BIN} read --help | true`],
  ])('%s ends quietly: no stack trace, exit 141 (SIGPIPE) like ls or git', async (_name, cmd) => {
    // `true` is gone before node has started, so the first write meets a closed pipe.
    // bash reports the CLI's own exit status; its stderr is the test's.
    const r = await run('bash', ['-c', `${cmd}; echo "status=\${PIPESTATUS[0]}"`]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('status=141\n');
  });

  it('--help | head -c 1 ends quietly', async () => {
    const r = await run('bash', ['-c', `node ${BIN} --help | head -c 1 >/dev/null; echo "status=\${PIPESTATUS[0]}"`]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^status=(0|141)\n$/);
  });
});

describe('what each command loads', () => {
  it('--version loads no command module', async () => {
    const t = traced();
    const r = await run(process.execPath, [BIN, '--version'], { env: t.env });
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const loaded = await modules(t.file);
    expect(loaded.some((m) => m.endsWith('/dist/bundle/main.js')), 'bin/knowledgefs.js runs the bundle').toBe(true);
    expect(loaded.filter((m) => m.includes('/dist/cli/commands/'))).toEqual([]);
  });

  it.each(['read', 'mount'])('`%s --help` loads none of pg, the MCP SDK, zod, aws4, prom-client, the server', async (command) => {
    const t = traced();
    const r = await run(process.execPath, [BIN, command, '--help'], { env: t.env });
    expect(r.code).toBe(0);
    const loaded = await modules(t.file);
    expect(loaded.some((m) => m.endsWith(`/dist/cli/commands/${command}.js`)), 'the trace sees the command module').toBe(true);
    expect(heavyIn(loaded, [/\/node_modules\/prom-client\//])).toEqual([]);
  });
});

fuseSuite('what a real mount and read load', () => {
  let data = '';
  let cp: TestControlPlane | undefined;
  let mount: MountHandle | undefined;
  let mountTrace = '';
  /** What the daemon had loaded when it printed `mounted`. */
  let loadedAtReady: string[] = [];

  beforeAll(async () => {
    data = await makeDataDir({
      teams: { payments: 'Payments' },
      users: { alice: { teams: ['payments'] } },
      files: { 'account/DUTY.md': '# Account\nSTARTUP-MARKER\n', 'teams/payments/DUTY.md': '# Payments\n' },
    });
    cp = await startControlPlane({ dataDir: data });
    const { token } = await cp.createSession({ kind: 'team', creator: 'alice', team: 'payments' });
    const t = traced();
    mountTrace = t.file;
    mount = await startMount({ serverUrl: cp.url, token, env: t.env });
    loadedAtReady = await modules(mountTrace);
  });
  afterAll(async () => {
    await mount?.stop();
    await cp?.close();
    if (data) await removeDataDir(data);
  });

  it('`read` against a running mount loads none of pg, the MCP SDK, zod, aws4, prom-client, the server', async () => {
    const m = mount as MountHandle;
    const t = traced();
    const r = await run(process.execPath, [BIN, 'read', 'knowledge/account/DUTY.md', '--socket', m.socketPath], { cwd: m.dir, env: t.env });
    expect(r.stdout).toContain('STARTUP-MARKER');
    const loaded = await modules(t.file);
    expect(loaded.some((m) => m.endsWith('/dist/cli/commands/read.js'))).toBe(true);
    expect(heavyIn(loaded, [/\/node_modules\/prom-client\//])).toEqual([]);
    expect(esImportedHttp(loaded)).toEqual([]);
  });

  it('the mount daemon is ready without pg, the MCP SDK, zod, aws4, prom-client, the server', () => {
    expect(loadedAtReady.some((m) => m.endsWith('/dist/daemon/mount-daemon.js'))).toBe(true);
    expect(loadedAtReady.some((m) => m.endsWith('/dist/daemon/fuse/native-fuse-adapter.js') || m.includes('/fuse-native/'))).toBe(true);
    expect(heavyIn(loadedAtReady, [/\/node_modules\/prom-client\//, /\/dist\/metrics\/prometheus-metrics\.js$/])).toEqual([]);
    expect(esImportedHttp(loadedAtReady)).toEqual([]);
  });

  it('`status` then loads the metrics registry and reports from it; still none of pg, the MCP SDK, zod, aws4, the server', async () => {
    const m = mount as MountHandle;
    const r = await run(process.execPath, [BIN, 'status', '--json', '--socket', m.socketPath]);
    expect(r.code, r.stderr).toBe(0);
    const status = JSON.parse(r.stdout) as { files: number; activity: { operations: unknown[]; eio: number } };
    expect(status.files).toBe(2);
    expect(status.activity.eio).toBe(0);
    const loaded = await modules(mountTrace);
    expect(loaded.some((x) => x.endsWith('/dist/metrics/prometheus-metrics.js'))).toBe(true);
    expect(heavyIn(loaded)).toEqual([]);
  });
});
