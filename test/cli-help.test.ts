// The CLI as a newcomer meets it (`node bin/knowledgefs.js`, built):
// `--help` on every command shows its usage and examples, `--version` prints
// the package version, and an unknown command, an unknown flag or a bad
// value is one clear error line (plus at most the "run with --help" hint),
// exit 2, with nothing started and nothing written.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseDuration, parseSize } from '../src/core/text/units.js';
import { BIN, REPO_ROOT } from './helpers/control-plane.js';

interface Run { code: number | null; stdout: string; stderr: string }

const tmp = mkdtempSync(join(tmpdir(), 'kfs-cli-help-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KNOWLEDGEFS_')));
    const child = spawn(process.execPath, [BIN, ...args], { cwd: tmp, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    // A usage error must never start anything: bound the wait well above a node start-up.
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The commands a user runs, with the arguments that satisfy their required options. */
const LEAF_COMMANDS: { name: string; args: string[] }[] = [
  { name: 'serve', args: ['serve', '--data', tmp] },
  { name: 'session create', args: ['session', 'create', '--server', 'http://127.0.0.1:9', '--kind', 'personal', '--creator', 'alice'] },
  { name: 'mount', args: ['mount', join(tmp, 'knowledge'), '--server', 'http://127.0.0.1:9'] },
  { name: 'read', args: ['read', 'knowledge/account/DUTY.md'] },
  { name: 'manifest', args: ['manifest'] },
  { name: 'reminder', args: ['reminder'] },
  { name: 'doctor', args: ['doctor'] },
  { name: 'status', args: ['status'] },
  { name: 'mcp', args: ['mcp'] },
  { name: 'explain', args: ['explain', '--server', 'http://127.0.0.1:9', '--session', 's_x'] },
];

/**
 * A usage error: exit 2, one error line naming the problem, followed at most
 * by commander's "(Did you mean …?)" suggestion and the help hint; no stack
 * trace, no help dump.
 */
function expectUsageError(r: Run, mentions: RegExp): void {
  expect(r.code).toBe(2);
  expect(r.stdout).toBe('');
  const [first, ...rest] = r.stderr.trimEnd().split('\n');
  expect(first).toMatch(/^(error|knowledgefs): /);
  expect(first).toMatch(mentions);
  for (const line of rest) expect(line).toMatch(/^\((run with --help for usage|Did you mean .+\?)\)$/);
  expect(rest.length).toBeLessThanOrEqual(2);
}

describe.concurrent('--help and --version', () => {
  it('--version and -V print the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const r = await cli([flag]);
      expect(r).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('knowledgefs --help lists every command', async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: knowledgefs \[options\] \[command\]/);
    for (const name of ['serve', 'session', 'mount', 'read', 'manifest', 'reminder', 'doctor', 'status', 'mcp', 'explain']) {
      expect(r.stdout).toMatch(new RegExp(`^  ${name}\\b.*\\S`, 'm'));
    }
    expect(r.stdout).not.toContain('not built yet');
  });

  for (const { name } of LEAF_COMMANDS) {
    it(`knowledgefs ${name} --help: usage, a description, every option explained, examples`, async () => {
      const r = await cli([...name.split(' '), '--help']);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(new RegExp(`^Usage: knowledgefs ${name} `));
      expect(r.stdout).not.toContain('not built yet');
      // Every option line carries an explanation after the flag.
      const optionLines = r.stdout.split('\n').filter((l) => /^ {2}-/.test(l));
      expect(optionLines.length).toBeGreaterThan(0);
      for (const l of optionLines) expect(l, l).toMatch(/^ {2}\S.*\s{2,}\S/);
      // An Examples section with at least one runnable line.
      const examples = r.stdout.split(/^Examples:\n/m)[1];
      expect(examples, `knowledgefs ${name} --help has no "Examples:" section`).toBeDefined();
      expect(examples).toMatch(new RegExp(`knowledgefs ${name.split(' ')[0]}\\b`));
    });
  }

  it('knowledgefs session --help lists its subcommand', async () => {
    const r = await cli(['session', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}create\b/m);
  });
});

describe.concurrent('usage errors: one clear line, exit 2', () => {
  it('an unknown command', async () => {
    const typo = await cli(['mountt']);
    expectUsageError(typo, /unknown command 'mountt'/);
    expect(typo.stderr).toContain('(Did you mean mount?)');
    expectUsageError(await cli(['session', 'delete-everything']), /unknown command 'delete-everything'/);
  });

  for (const { name, args } of LEAF_COMMANDS) {
    it(`knowledgefs ${name}: an unknown flag`, async () => {
      expectUsageError(await cli([...args, '--no-such-flag']), /unknown option '--no-such-flag'/);
    });
  }

  const BAD_VALUES: { what: string; args: string[]; mentions: RegExp }[] = [
    { what: 'serve --listen', args: ['serve', '--data', tmp, '--listen', 'everywhere'], mentions: /--listen.*everywhere/ },
    { what: 'serve --max-file-size', args: ['serve', '--data', tmp, '--max-file-size', 'big'], mentions: /--max-file-size.*big/ },
    { what: 'serve --scan-interval', args: ['serve', '--data', tmp, '--scan-interval', 'often'], mentions: /--scan-interval.*often/ },
    { what: 'serve --membership-timeout', args: ['serve', '--data', tmp, '--membership-timeout', '-1s'], mentions: /--membership-timeout/ },
    { what: 'mcp --reminder', args: ['mcp', '--reminder', 'sometimes'], mentions: /--reminder.*sometimes/ },
    { what: 'mcp --instructions', args: ['mcp', '--instructions', 'all'], mentions: /--instructions.*all/ },
    { what: 'mcp --manifest-poll (too short)', args: ['mcp', '--manifest-poll', '10ms'], mentions: /--manifest-poll must be at least 100ms, not "10ms"/ },
    { what: 'mcp --manifest-poll (not a duration)', args: ['mcp', '--manifest-poll', 'often'], mentions: /--manifest-poll.*often/ },
    { what: 'session create --kind', args: ['session', 'create', '--server', 'http://127.0.0.1:9', '--kind', 'robot', '--creator', 'alice'], mentions: /--kind.*robot/ },
    { what: 'mount --prefetch-threshold', args: ['mount', join(tmp, 'k1'), '--server', 'http://127.0.0.1:9', '--prefetch-threshold', 'lots'], mentions: /--prefetch-threshold.*lots/ },
    { what: 'mount --prefetch-content', args: ['mount', join(tmp, 'k2'), '--server', 'http://127.0.0.1:9', '--prefetch-content', 'maybe'], mentions: /--prefetch-content.*maybe/ },
    { what: 'mount --cache-size', args: ['mount', join(tmp, 'k3'), '--server', 'http://127.0.0.1:9', '--cache-size', '12 parsecs'], mentions: /--cache-size/ },
    { what: 'mount --grant-ttl', args: ['mount', join(tmp, 'k4'), '--server', 'http://127.0.0.1:9', '--grant-ttl', 'soon'], mentions: /--grant-ttl.*soon/ },
    { what: 'mount --sync-interval', args: ['mount', join(tmp, 'k5'), '--server', 'http://127.0.0.1:9', '--sync-interval', 'x'], mentions: /--sync-interval/ },
    { what: 'mount --request-timeout', args: ['mount', join(tmp, 'k6'), '--server', 'http://127.0.0.1:9', '--request-timeout', '1ms'], mentions: /--request-timeout/ },
    { what: 'mount --server', args: ['mount', join(tmp, 'k7'), '--server', 'not a url'], mentions: /--server.*not a url/ },
    { what: 'read --offset', args: ['read', 'knowledge/account/DUTY.md', '--offset', '-1'], mentions: /--offset/ },
    { what: 'read --limit', args: ['read', 'knowledge/account/DUTY.md', '--limit', '0'], mentions: /--limit/ },
    { what: 'serve --metrics-listen', args: ['serve', '--data', tmp, '--metrics-listen', 'anywhere'], mentions: /--metrics-listen.*anywhere/ },
    { what: 'mount --metrics-listen', args: ['mount', join(tmp, 'k8'), '--server', 'http://127.0.0.1:9', '--metrics-listen', '9464'], mentions: /--metrics-listen.*9464/ },
    { what: 'serve --log-format', args: ['serve', '--data', tmp, '--log-format', 'yaml'], mentions: /--log-format.*yaml/ },
    { what: 'mount --log-format', args: ['mount', join(tmp, 'k9'), '--server', 'http://127.0.0.1:9', '--log-format', 'xml'], mentions: /--log-format.*xml/ },
    { what: 'explain --threshold', args: ['explain', '--server', 'http://127.0.0.1:9', '--session', 's_x', '--threshold', 'huge'], mentions: /--threshold.*huge/ },
    { what: 'doctor --timeout', args: ['doctor', '--timeout', 'soon'], mentions: /--timeout.*soon/ },
  ];
  for (const { what, args, mentions } of BAD_VALUES) {
    it(`a bad value: ${what}`, async () => {
      expectUsageError(await cli(args, { KNOWLEDGEFS_TOKEN: 'kfs_test_token_value_0123456789' }), mentions);
      // Nothing started: no mount point created, nothing written into the data dir.
      if (args[0] === 'mount' && what !== 'mount --server') expect(existsSync(args[1] as string)).toBe(false);
      if (args[0] === 'serve') expect(existsSync(join(tmp, '.knowledgefs'))).toBe(false);
    });
  }

  it('a missing required option or argument', async () => {
    expectUsageError(await cli(['serve']), /--data/);
    expectUsageError(await cli(['mount', join(tmp, 'k8')]), /--server/);
    expect(existsSync(join(tmp, 'k8'))).toBe(false);
    expectUsageError(await cli(['read']), /path/);
  });

  it('serve --data pointing nowhere refuses to start and creates nothing there', async () => {
    const missing = join(tmp, 'no-such-data-dir');
    const r = await cli(['serve', '--data', missing, '--listen', '127.0.0.1:0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(missing);
    expect(existsSync(missing)).toBe(false);
  });
});

/** `--help` options as {flag, default?}, continuation lines joined. */
function helpOptions(help: string): { flag: string; dflt: string | undefined }[] {
  const entries: string[] = [];
  for (const line of help.split('\n')) {
    if (/^ {2}-/.test(line)) entries.push(line.trim());
    else if (/^ {4,}\S/.test(line) && entries.length > 0) entries[entries.length - 1] += ` ${line.trim()}`;
    else if (!/^\s/.test(line) && entries.length > 0 && line !== '') break;
  }
  return entries
    .map((e) => ({ flag: /--[a-z0-9-]+/.exec(e)?.[0] ?? '', dflt: /\(default: "?([^")]*)"?\)$/.exec(e)?.[1] }))
    .filter((o) => o.flag !== '' && o.flag !== '--help');
}

/** The same value, whatever units README and --help use. */
function sameDefault(readme: string, help: string): boolean {
  const r = readme.replace(/`/g, '').trim();
  if (r === help) return true;
  if (help === 'true' || help === 'false') return (r === 'on') === (help === 'true');
  for (const parse of [parseSize, parseDuration]) {
    try {
      if (parse(r) === parse(help)) return true;
    } catch {
      // not this kind of value
    }
  }
  return false;
}

describe('README', () => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  for (const command of ['serve', 'mount', 'mcp']) {
    it(`documents every flag of ${command}, with the default --help shows`, async () => {
      const help = (await cli([command, '--help'])).stdout;
      const options = helpOptions(help);
      expect(options.length).toBeGreaterThan(3);
      for (const { flag, dflt } of options) {
        const row = readme.split('\n').find((l) => l.startsWith(`| \`${flag}`));
        expect(row, `README has no table row for ${command} ${flag}`).toBeDefined();
        // Only commander's own "(default: VALUE)"; prose defaults in descriptions have spaces.
        if (dflt === undefined || /\s/.test(dflt)) continue;
        const cell = (row as string).split(' | ')[1] ?? '';
        expect(sameDefault(cell, dflt), `${command} ${flag}: README says ${cell}, --help says ${dflt}`).toBe(true);
      }
    });
  }

  it('gives exactly two quick-start commands: npm run demo and npm test', () => {
    const quick = readme.split('## Quick start')[1]?.split('\n## ')[0] ?? '';
    const block = /```sh\n([\s\S]*?)```/.exec(quick)?.[1] ?? '';
    expect(block.trim().split('\n').map((l) => l.split('#')[0]?.trim())).toEqual(['npm run demo', 'npm test']);
  });
});
