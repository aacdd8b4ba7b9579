// Interleaved measurement rounds. On a shared, noisy machine the load drifts
// over minutes, so measuring one filesystem after another would skew their
// ratios; instead every round visits every filesystem once, in the same
// order, and the medians come from the same stretches of time.
//
// A target is { key, label, start(), stop(fs), onReady?(fs), runs? }; `start`
// resolves { mnt, readyMs } (readyMs null when there is nothing to mount).
// `runs` lets a slow target sit out the later rounds (it takes part in the
// first `runs` of them, so it still shares their stretch of time).

import { timed, grepCommand } from './commands.mjs';
import { summarize } from './stats.mjs';
import { log } from './proc.mjs';

/**
 * Cold rounds: each round, for each target, a fresh filesystem (or dropped
 * caches), its ready time, then the first `grep -r`. A target that fails is
 * recorded and left out of later rounds; the others go on.
 */
export async function coldRounds(targets, runs, errors) {
  const acc = new Map(targets.map((t) => [t.key, { ready: [], grep: [], output: null, extra: {} }]));
  let active = [...targets];
  for (let i = 0; i < runs; i++) {
    for (const t of active.filter((x) => i < (x.runs ?? runs))) {
      let fs = null;
      try {
        fs = await t.start();
        const a = acc.get(t.key);
        if (fs.readyMs !== null && fs.readyMs !== undefined) a.ready.push(fs.readyMs);
        if (t.onReady) await t.onReady(fs, a.extra);
        const r = await timed(grepCommand(fs.mnt));
        if (a.output !== null && r.output !== a.output) throw new Error(`cold grep output changed (${a.output} → ${r.output})`);
        a.output = r.output;
        a.grep.push(r.ms);
        log(`cold ${i + 1}/${t.runs ?? runs} ${t.label}: ${fs.readyMs != null ? `ready ${(fs.readyMs / 1000).toFixed(3)} s, ` : ''}first grep -r ${(r.ms / 1000).toFixed(3)} s`);
      } catch (err) {
        errors.push(`${t.label} (cold): ${err instanceof Error ? err.message : String(err)}`);
        log(`ERROR ${t.label} (cold): ${err instanceof Error ? err.message : String(err)}`);
        active = active.filter((x) => x !== t);
      } finally {
        if (fs) await t.stop(fs);
      }
    }
  }
  const out = {};
  for (const [key, a] of acc) {
    out[key] = { ready: a.ready.length ? summarize(a.ready) : null, grep: a.grep.length ? { output: a.output, ...summarize(a.grep) } : null, ...a.extra };
  }
  return out;
}

/**
 * Warm rounds over already-mounted filesystems: for each command, one
 * untimed warm-up per target, then `runs` rounds visiting every target.
 * `mounted` is [{ key, label, mnt, commands: [ids], runs? }]; `battery(mnt)` gives
 * the command list. Returns { key: { id: {label, output, ...summary} } }.
 */
export async function warmRounds(mounted, battery, runs, errors) {
  const out = Object.fromEntries(mounted.map((m) => [m.key, {}]));
  const ids = battery('/').map((c) => c.id);
  for (const id of ids) {
    const users = mounted.filter((m) => m.commands.includes(id));
    const cmds = new Map(users.map((m) => [m.key, battery(m.mnt).find((c) => c.id === id)]));
    const samples = new Map();
    const outputs = new Map();
    let active = [];
    for (const m of users) {
      try {
        outputs.set(m.key, (await timed(cmds.get(m.key).cmd)).output);
        samples.set(m.key, []);
        active.push(m);
      } catch (err) {
        errors.push(`${m.label} ${id} (warm-up): ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    for (let i = 0; i < runs; i++) {
      for (const m of active.filter((x) => i < (x.runs ?? runs))) {
        try {
          const r = await timed(cmds.get(m.key).cmd);
          if (r.output !== outputs.get(m.key)) throw new Error(`output changed between runs (${outputs.get(m.key)} → ${r.output})`);
          samples.get(m.key).push(r.ms);
        } catch (err) {
          errors.push(`${m.label} ${id}: ${err instanceof Error ? err.message : String(err)}`);
          active = active.filter((x) => x !== m);
        }
      }
    }
    for (const m of active) {
      const c = cmds.get(m.key);
      out[m.key][id] = { label: c.label, output: outputs.get(m.key), ...summarize(samples.get(m.key)) };
    }
    log(`warm ${id}: ${active.map((m) => `${m.label} ${(out[m.key][id].median / 1000).toFixed(3)} s`).join(', ')}`);
  }
  return out;
}
