// 200 sessions against one control plane (its own process, so its memory
// can be read from /proc): each session asks for its plan, its grants,
// several files and a read-tool read (some of which mount a team), all
// sessions at once. Then all 200 hold a plan long-poll while a file
// changes: every one must come back with the new plan. No request may fail,
// every body is checked byte for byte, denials are exact, and the control
// plane's memory stays within a bound.

import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnControlPlane, type SpawnedControlPlane } from '../helpers/control-plane.js';
import { makeDataDir, removeDataDir } from '../helpers/data-dir.js';

const SESSIONS = 200;
const TEAMS = Array.from({ length: 10 }, (_, i) => `team${i}`);
const USERS = Array.from({ length: 50 }, (_, i) => `user${i}`);
/** Generous: the control plane holds 200 sessions and ~230 small files. */
const RSS_BOUND_BYTES = 300 * 1024 * 1024;

interface SessionCase {
  readonly kind: 'team' | 'personal';
  readonly creator: string;
  readonly team: string;
  token: string;
}

const teamsOf = (u: number) => TEAMS.filter((_, t) => (u + t) % 3 === 0);

async function rssOf(pid: number): Promise<{ rss: number; hwm: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

describe('200 sessions against one control plane', () => {
  let dir: string;
  let cp: SpawnedControlPlane;
  const files = new Map<string, string>();
  const sessions: SessionCase[] = [];

  beforeAll(async () => {
    const spec: Record<string, string> = {};
    for (const scope of ['account', ...TEAMS.map((t) => `team_${t}`)]) {
      for (let i = 0; i < 20; i++) {
        const rel = i === 0 ? 'DUTY.md' : `docs/d${i}.md`;
        const content = `${scope} ${rel}\n${'knowledge '.repeat(20 + i * 30)}\n`;
        files.set(`${scope}/${rel}`, content);
        spec[`${scope === 'account' ? 'account' : `teams/${scope.slice(5)}`}/${rel}`] = content;
      }
    }
    dir = await makeDataDir({
      teams: Object.fromEntries(TEAMS.map((t) => [t, t])),
      users: Object.fromEntries(USERS.map((u, i) => [u, { teams: teamsOf(i) }])),
      files: spec,
    });
    cp = await spawnControlPlane({ dataDir: dir });
    for (let i = 0; i < SESSIONS; i++) {
      const u = i % USERS.length;
      const own = teamsOf(u);
      const team = own[i % own.length] ?? (TEAMS[0] as string);
      const kind = i % 2 === 0 ? 'team' : 'personal';
      const created = await cp.createSession({ kind, creator: USERS[u] as string, team });
      sessions.push({ kind, creator: USERS[u] as string, team, token: created.token });
    }
  }, 120_000);

  afterAll(async () => {
    await cp?.kill('SIGTERM');
    if (dir) await removeDataDir(dir);
  });

  it('plan, grants, files and reads for all 200 at once: no errors, exact bytes, bounded memory', async () => {
    const latencies: number[] = [];
    const errors: string[] = [];
    let requests = 0;
    const call = async (s: SessionCase, path: string, init: RequestInit = {}): Promise<Response> => {
      const t0 = performance.now();
      const res = await fetch(`${cp.url}${path}`, { ...init, headers: { authorization: `Bearer ${s.token}`, ...(init.headers ?? {}) } });
      latencies.push(performance.now() - t0);
      requests++;
      return res;
    };
    const one = async (s: SessionCase, i: number): Promise<void> => {
      const ownTeams = teamsOf(USERS.indexOf(s.creator));
      const loadable = new Set(['account', `team_${s.team}`, ...(s.kind === 'personal' ? ownTeams.map((t) => `team_${t}`) : [])]);
      const planRes = await call(s, '/v1/plan');
      if (planRes.status !== 200) return void errors.push(`plan ${planRes.status}`);
      const plan = (await planRes.json()) as { scopes: { scope: string; files: { path: string; sha256: string }[] }[] };
      const scopes = plan.scopes.map((x) => x.scope);
      if (scopes.some((x) => !loadable.has(x))) errors.push(`plan of a ${s.kind} session shows ${scopes.join(',')}`);
      for (const scope of ['account', `team_${s.team}`]) {
        const g = await call(s, `/v1/grants/${scope}`);
        if (g.status !== 200) errors.push(`grant ${scope} ${g.status}`);
        await g.arrayBuffer();
      }
      for (let k = 0; k < 4; k++) {
        const scope = k % 2 === 0 ? 'account' : `team_${s.team}`;
        const rel = k < 2 ? 'DUTY.md' : `docs/d${(i + k) % 19 + 1}.md`;
        const r = await call(s, `/v1/files/${scope}/${rel}`);
        const body = Buffer.from(await r.arrayBuffer());
        const expected = files.get(`${scope}/${rel}`) as string;
        if (r.status !== 200 || body.toString() !== expected) errors.push(`file ${scope}/${rel}: ${r.status}`);
        if (r.headers.get('x-kfs-sha256') !== createHash('sha256').update(body).digest('hex')) errors.push(`sha ${scope}/${rel}`);
      }
      // A team the session may not load: exact denial shape.
      const other = TEAMS.find((t) => !loadable.has(`team_${t}`));
      if (other !== undefined) {
        const d = await call(s, `/v1/files/team_${other}/DUTY.md`);
        await d.arrayBuffer();
        if (d.status !== (s.kind === 'team' ? 403 : 404)) errors.push(`denial of team_${other} for a ${s.kind} session: ${d.status}`);
      }
      // The read tool's route; personal sessions mount one of the creator's other teams.
      const mountTeam = s.kind === 'personal' ? ownTeams.find((t) => t !== s.team) : undefined;
      const readPath = mountTeam !== undefined ? `team_${mountTeam}/DUTY.md` : 'account/DUTY.md';
      const rr = await call(s, '/v1/read', { method: 'POST', body: JSON.stringify({ path: readPath, mount: mountTeam !== undefined }), headers: { 'content-type': 'application/json' } });
      if (rr.status !== 200) return void errors.push(`read ${readPath} ${rr.status}`);
      const read = (await rr.json()) as { contentBase64: string };
      if (Buffer.from(read.contentBase64, 'base64').toString() !== files.get(readPath)) errors.push(`read ${readPath}: wrong bytes`);
    };
    const before = await rssOf(cp.pid as number);
    const t0 = performance.now();
    await Promise.all(sessions.map((s, i) => one(s, i).catch((err: unknown) => void errors.push(String(err)))));
    const wall = performance.now() - t0;
    const after = await rssOf(cp.pid as number);
    process.stderr.write(
      `load: ${SESSIONS} sessions, ${requests} requests in ${Math.round(wall)} ms; latency p50 ${percentile(latencies, 50).toFixed(1)} ms, ` +
        `p99 ${percentile(latencies, 99).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms; control plane RSS ${(before.rss / 2 ** 20).toFixed(0)} → ` +
        `${(after.rss / 2 ** 20).toFixed(0)} MiB (peak ${(after.hwm / 2 ** 20).toFixed(0)} MiB)\n`,
    );
    expect(errors.slice(0, 10)).toEqual([]);
    expect(requests).toBeGreaterThanOrEqual(SESSIONS * 8);
    expect(after.hwm).toBeLessThan(RSS_BOUND_BYTES);
  }, 180_000);

  it('200 plan long-polls at once all wake up with the new plan when a file changes', async () => {
    const versions = await Promise.all(
      sessions.map(async (s) => {
        const res = await fetch(`${cp.url}/v1/plan`, { headers: { authorization: `Bearer ${s.token}` } });
        return { s, etag: res.headers.get('etag') as string, body: await res.text() };
      }),
    );
    const polls = versions.map(({ s, etag }) =>
      fetch(`${cp.url}/v1/plan?wait=25`, { headers: { authorization: `Bearer ${s.token}`, 'if-none-match': etag } }).then(async (res) => ({
        status: res.status,
        etag: res.headers.get('etag'),
        plan: res.status === 200 ? ((await res.json()) as { scopes: { scope: string; files: { path: string; size: number }[] }[] }) : null,
      })),
    );
    await new Promise((r) => setTimeout(r, 500));
    const changed = 'account/DUTY.md';
    const content = `changed for the long-poll test ${Date.now()}\n`;
    await writeFile(join(dir, changed), content);
    const answers = await Promise.all(polls);
    const bad = answers.filter((a, i) => a.status !== 200 || a.etag === versions[i]?.etag);
    expect(bad.length, JSON.stringify(bad.slice(0, 3))).toBe(0);
    for (const a of answers) {
      const duty = a.plan?.scopes.find((x) => x.scope === 'account')?.files.find((f) => f.path === 'DUTY.md');
      expect(duty?.size).toBe(Buffer.byteLength(content));
    }
    const after = await rssOf(cp.pid as number);
    expect(after.hwm).toBeLessThan(RSS_BOUND_BYTES);
  }, 120_000);
});
