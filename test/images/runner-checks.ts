// What a runner container's command does with knowledge/, and what it must
// see: the commands an agent uses (ls, cat, grep -r, the read tool), the
// scope it may not load, and that the runner token stays out of its reach.
// Expected values come from examples/knowledge-base on the host, for a
// personal session of alice (teams payments and search, not storage).

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { REPO_ROOT } from '../helpers/control-plane.js';

const KB = join(REPO_ROOT, 'examples', 'knowledge-base');
/** knowledge/<scope> for each source directory alice's session may load. */
const SCOPES: Record<string, string> = { account: 'account', team_payments: 'teams/payments', team_search: 'teams/search' };
const GREP_WORD = 'failover';

/** The command given to the runner image (after its entrypoint has mounted knowledge/). */
export const RUNNER_SCRIPT = [
  'cd /workspace',
  'echo "user=$(id -un)"',
  'mountpoint -q knowledge && echo mounted=yes || echo mounted=no',
  'echo "ls=$(ls knowledge | tr "\\n" " ")"',
  'echo "cat-begin"; cat knowledge/team_payments/DUTY.md; echo "cat-end"',
  `echo "grep=$(grep -rl ${GREP_WORD} knowledge | sort | tr "\\n" " ")"`,
  'r=$(knowledgefs read knowledge/team_search/DUTY.md --json); echo "read-exit=$?"; printf "read=%s\\n" "$r"',
  'knowledgefs read knowledge/team_storage/DUTY.md >/dev/null 2>&1; echo "read-storage-exit=$?"',
  'if cat /tokens/runner-token >/dev/null 2>&1; then echo token-file=readable; else echo token-file=unreadable; fi',
  'if env | grep -q "^KNOWLEDGEFS_TOKEN="; then echo token-env=set; else echo token-env=unset; fi',
].join('\n');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

function expectedGrep(): string[] {
  return Object.entries(SCOPES)
    .flatMap(([scope, src]) =>
      files(join(KB, src))
        .filter((f) => readFileSync(f, 'utf8').includes(GREP_WORD))
        .map((f) => `knowledge/${scope}/${f.slice(join(KB, src).length + 1)}`))
    .sort();
}

const field = (out: string, name: string): string => new RegExp(`^${name}=(.*)$`, 'm').exec(out)?.[1] ?? `<no ${name}= line>`;

/** Checks a runner's output against the knowledge base; `user` is who the command must run as. */
export function expectRunnerOutput(out: string, user: string): void {
  expect(field(out, 'user'), out).toBe(user);
  expect(field(out, 'mounted'), out).toBe('yes');
  expect(field(out, 'ls').trim().split(' ').sort(), out).toEqual(Object.keys(SCOPES).sort());
  const cat = /^cat-begin\n([\s\S]*?)cat-end$/m.exec(out)?.[1];
  expect(cat, out).toBe(readFileSync(join(KB, 'teams/payments/DUTY.md'), 'utf8'));
  expect(field(out, 'grep').trim().split(' '), out).toEqual(expectedGrep());
  expect(field(out, 'read-exit'), out).toBe('0');
  const read = JSON.parse(field(out, 'read')) as { ok: boolean; content: string };
  expect(read.ok).toBe(true);
  expect(read.content).toBe(readFileSync(join(KB, 'teams/search/DUTY.md'), 'utf8'));
  // Not alice's team: no such file for this session (exit 1), not a crash.
  expect(field(out, 'read-storage-exit'), out).toBe('1');
  // The runner token reaches the daemon only.
  expect(field(out, 'token-env'), out).toBe('unset');
  if (user !== 'root') expect(field(out, 'token-file'), out).toBe('unreadable');
}
