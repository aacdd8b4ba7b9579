// Turns the results object into the printed tables and the target check.
// Pure: takes results, returns text and a list of target verdicts.

const fmtS = (ms) => (ms === null || ms === undefined ? '—' : (ms / 1000).toFixed(3));
const fmtMs = (ms) => (ms === null || ms === undefined ? '—' : ms.toFixed(2));
const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b);
const fmtX = (x) => (x === null ? '—' : `${x.toFixed(2)}×`);
const get = (obj, path) => path.split('.').reduce((o, k) => (o == null ? undefined : o[k]), obj);
const med = (obj, path) => get(obj, path)?.median ?? null;

function pad(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ')).join('\n');
}

/** [label, ours (native), ours (fuse-native), disk, C ceiling, fuse-native ceiling, rclone] as paths into results (median, ms). */
export const ROWS = [
  ['mount ready', 'ours.ready', 'oursFuseNative.ready', null, 'ceilingC.ready', 'ceiling.ready', 'rclone.ready'],
  ['first grep -r after ready, prefetch on', 'ours.coldOn.grep', 'oursFuseNative.coldOn.grep', 'disk.cold.grep', 'ceilingC.cold.grep', 'ceiling.cold.grep', 'rclone.cold.grep'],
  ['first grep -r after ready, prefetch off', 'ours.coldOff.grep', null, 'disk.cold.grep', 'ceilingC.cold.grep', 'ceiling.cold.grep', 'rclone.cold.grep'],
  ['grep -r (warm)', 'ours.warm.grep', 'oursFuseNative.warm.grep', 'disk.warm.grep', 'ceilingC.warm.grep', 'ceiling.warm.grep', 'rclone.warm.grep'],
  ['grep -r (warm, --grant-ttl 0)', 'ours.grantTtl0.grep', null, 'disk.warm.grep', 'ceilingC.warm.grep', 'ceiling.warm.grep', 'rclone.warm.grep'],
  ['find | wc -l', 'ours.warm.find', 'oursFuseNative.warm.find', 'disk.warm.find', 'ceilingC.warm.find', 'ceiling.warm.find', 'rclone.warm.find'],
  ['ls -lR', 'ours.warm.lsR', 'oursFuseNative.warm.lsR', 'disk.warm.lsR', 'ceilingC.warm.lsR', 'ceiling.warm.lsR', 'rclone.warm.lsR'],
  ['rg (warm)', 'ours.warm.rg', 'oursFuseNative.warm.rg', 'disk.warm.rg', 'ceilingC.warm.rg', 'ceiling.warm.rg', 'rclone.warm.rg'],
  ['tar cf - (warm)', 'ours.warm.tar', 'oursFuseNative.warm.tar', 'disk.warm.tar', 'ceilingC.warm.tar', 'ceiling.warm.tar', 'rclone.warm.tar'],
  ['cat 1 MB file', 'ours.warm.cat', 'oursFuseNative.warm.cat', 'disk.warm.cat', 'ceilingC.warm.cat', 'ceiling.warm.cat', 'rclone.warm.cat'],
];

export function mainTable(results) {
  const rows = [['median, seconds', 'native', 'fuse-native', 'disk', 'C ceiling', 'ceiling', 'rclone', 'native/disk', 'native/C ceiling', 'native/ceiling', 'fuse-native/ceiling', 'native/rclone']];
  for (const [label, o, f, d, cc, c, r] of ROWS) {
    const v = [o, f, d, cc, c, r].map((p) => (p ? med(results, p) : null));
    if (v.every((x) => x === null)) continue;
    rows.push([label, ...v.map(fmtS), fmtX(ratio(v[0], v[2])), fmtX(ratio(v[0], v[3])), fmtX(ratio(v[0], v[4])), fmtX(ratio(v[1], v[4])), fmtX(ratio(v[0], v[5]))]);
  }
  return rows.length > 1 ? pad(rows) : '';
}

/** FUSE requests per warm grep -r, by filesystem and kind. */
export function opsTable(results) {
  const ops = results.fuseOps;
  if (!ops || Object.keys(ops).length === 0) return '';
  const kinds = [...new Set(Object.values(ops).flatMap((o) => Object.keys(o.byOp)))].sort();
  const rows = [['FUSE requests per warm grep -r', 'total', ...kinds]];
  for (const [key, o] of Object.entries(ops)) rows.push([OPS_NAMES[key] ?? key, o.total, ...kinds.map((k) => o.byOp[k] ?? 0)]);
  const perCommand = commandOpsTable(results.fuseOpsByCommand);
  return perCommand ? `${pad(rows)}\n\n${perCommand}` : pad(rows);
}

const OPS_NAMES = { ours: 'ours (native)', oursFn: 'ours (fuse-native)', ceilingC: 'C ceiling', ceiling: 'ceiling (fuse-native)', ceilingOurPolicy: 'ceiling, our fuse-native policy' };

/** FUSE requests per warm command (totals): ours against both ceilings, ours/C ceiling beside each. */
function commandOpsTable(byCommand) {
  if (!byCommand || Object.keys(byCommand).length === 0) return '';
  const ids = [...new Set(Object.values(byCommand).flatMap((o) => Object.keys(o)))];
  const keys = Object.keys(byCommand);
  const rows = [['FUSE requests per warm command', ...keys.map((k) => OPS_NAMES[k] ?? k), 'ours/C ceiling']];
  for (const id of ids) {
    const v = keys.map((k) => byCommand[k][id]?.total ?? null);
    rows.push([id, ...v.map((x) => (x === null ? '—' : x)), fmtX(ratio(byCommand.ours?.[id]?.total, byCommand.ceilingC?.[id]?.total))]);
  }
  return pad(rows);
}

export function sideTable(results) {
  const rows = [['measure', 'value']];
  const cp = results.ceilingOurPolicy?.warm?.grep?.median;
  if (cp !== undefined) rows.push(['grep -r (warm) on the ceiling with our cache policy (auto_cache, 1 s TTLs) (s)', fmtS(cp)]);
  const b = results.baseline;
  if (b) rows.push(['Node start-up: `node -e 0` / `knowledgefs --version`, median (s)', `${fmtS(b.nodeStartMs.median)} / ${fmtS(b.cliStartMs.median)}`]);
  const rb = results.ours?.readyBreakdown;
  if (rb && results.ours?.ready) {
    rows.push(['mount ready, split (ms): Node + modules / session + plan / tree / mount', `${(results.ours.ready.median - rb.inProcessMs).toFixed(0)} / ${rb.sessionPlanMs} / ${rb.treeMs} / ${rb.mountMs}`]);
  }
  const rt = results.readTool;
  if (rt) {
    const ratio = (a, b) => (a && b ? ` (${(a / b).toFixed(2)}× the bare socket)` : '');
    rows.push(['read tool via the library, mounted file, first read: p50 / p99 (ms)', `${fmtMs(rt.mountedFirstRead.p50)} / ${fmtMs(rt.mountedFirstRead.p99)}${ratio(rt.mountedFirstRead.p50, rt.socketFirstRead?.p50)}`]);
    rows.push(['read tool via the library, mounted file, re-read: p50 / p99 (ms)', `${fmtMs(rt.mountedReread.p50)} / ${fmtMs(rt.mountedReread.p99)}${ratio(rt.mountedReread.p50, rt.socketReread?.p50)}`]);
    if (rt.socketFirstRead) rows.push(['read tool, bare POST /read on the socket, first read / re-read: p50 (ms)', `${fmtMs(rt.socketFirstRead.p50)} / ${fmtMs(rt.socketReread.p50)}`]);
    rows.push(['read tool via the library, unmounted team: p50 / p99 (ms)', `${fmtMs(rt.unmounted.p50)} / ${fmtMs(rt.unmounted.p99)}`]);
    if (rt.mcpReread) rows.push(['read_knowledge over `knowledgefs mcp` (stdio), mounted file, re-read: p50 / p99 (ms)', `${fmtMs(rt.mcpReread.p50)} / ${fmtMs(rt.mcpReread.p99)}`]);
    if (rt.mcpRereadNoReminder) rows.push(['  the same with --reminder off: p50 / p99 (ms)', `${fmtMs(rt.mcpRereadNoReminder.p50)} / ${fmtMs(rt.mcpRereadNoReminder.p99)}`]);
    rows.push(['`knowledgefs read` CLI end to end, median (ms)', fmtMs(rt.cliEndToEndMs.median)]);
    if (rt.canLoad) rows.push(['can-load via the library, 3 scopes --for skill: p50 / p99 (ms)', `${fmtMs(rt.canLoad.p50)} / ${fmtMs(rt.canLoad.p99)}`]);
    if (rt.canLoadCliMs) rows.push(['`knowledgefs can-load` CLI end to end, 3 scopes, median (ms)', fmtMs(rt.canLoadCliMs.median)]);
  }
  const load = results.load;
  if (load) {
    for (const [name, p] of [['plan (full)', load.plan], ['plan (304)', load.revalidate], ['grant', load.grant]]) {
      rows.push([`control plane, ${load.runners} runners, ${name}: req/s, p50 / p99 (ms)`, `${p.throughputPerS.toFixed(0)}, ${fmtMs(p.latencyMs.p50)} / ${fmtMs(p.latencyMs.p99)}${p.errors ? ` (${p.errors} errors)` : ''}`]);
    }
    if (load.serverIdleCpuMsPerS !== undefined) rows.push(['control plane CPU while idle (ms per s)', load.serverIdleCpuMsPerS.toFixed(0)]);
  }
  for (const s of results.scale ?? []) {
    if (s.error) { rows.push([`daemon at ${s.files} files`, `error: ${s.error}`]); continue; }
    rows.push([`daemon at ${s.files} files, no content: ready (s), VmRSS at ready / 3 s later / after ls -lR (MiB)`, `${fmtS(s.ready.median)}, ${s.rss.median?.toFixed(1)} / ${s.rssSettled?.median?.toFixed(1)} / ${s.rssAfterLsR?.median?.toFixed(1)}`]);
    const b = s.readyBreakdown;
    if (b) rows.push([`  ready at ${s.files} files, split (ms): Node + modules / session + plan / tree / mount`, `${(s.ready.median - b.inProcessMs).toFixed(0)} / ${b.sessionPlanMs} / ${b.treeMs} / ${b.mountMs}`]);
  }
  return pad(rows);
}

function scaleAt(results, files) {
  return (results.scale ?? []).find((s) => !s.error && Math.abs(s.files - files) / files < 0.05) ?? null;
}

/** Each performance target: measured value, limit, verdict (null when not measured). */
export function checkTargets(results) {
  const t = [];
  const add = (name, value, limit, ok, unit) => t.push({ name, value, limit, unit, ok: value === null || value === undefined ? null : ok });
  // Against FUSE's own limit (the C ceiling): what a mount whose every open reaches the daemon can be.
  const vsC = [['grep -r', 'grep', 1.1], ['rg', 'rg', 1.1], ['tar cf -', 'tar', 1.1], ['find', 'find', 1.2], ['ls -lR', 'lsR', 1.2]];
  for (const [name, id, limit] of vsC) {
    const v = ratio(med(results, `ours.warm.${id}`), med(results, `ceilingC.warm.${id}`));
    add(`warm ${name} ≤ ${limit}× C ceiling (native binding)`, v, limit, v <= limit, '×');
  }
  const ow = med(results, 'ours.warm.grep');
  const oc = med(results, 'ours.coldOn.grep');
  const cw = med(results, 'ceiling.warm.grep');
  const cc = med(results, 'ceiling.cold.grep');
  const rw = med(results, 'rclone.warm.grep');
  const rc = med(results, 'rclone.cold.grep');
  const x = (a, b) => ratio(a, b);
  add('warm grep -r ≤ 1.1× fuse-native ceiling (native binding)', x(ow, cw), 1.1, x(ow, cw) <= 1.1, '×');
  const orw = med(results, 'ours.warm.rg');
  const crw = med(results, 'ceiling.warm.rg');
  add('warm rg ≤ 1.1× fuse-native ceiling (native binding)', x(orw, crw), 1.1, x(orw, crw) <= 1.1, '×');
  add('first grep -r after ready ≤ 1.5× ceiling cold', x(oc, cc), 1.5, x(oc, cc) <= 1.5, '×');
  add('≥ 5× faster than rclone, warm', x(rw, ow), 5, x(rw, ow) >= 5, '×');
  add('≥ 10× faster than rclone, cold', x(rc, oc), 10, x(rc, oc) >= 10, '×');
  const s6 = scaleAt(results, 6003);
  const s100 = scaleAt(results, 100_000);
  add('mount ready ≤ 0.5 s at 6 000 files', s6 ? s6.ready.median / 1000 : null, 0.5, s6 && s6.ready.median <= 500, 's');
  add('mount ready ≤ 5 s at 100 000 files', s100 ? s100.ready.median / 1000 : null, 5, s100 && s100.ready.median <= 5000, 's');
  add('daemon RSS ≤ 150 MB at 100 000 files, no content', s100 ? (s100.rss.median * 1048576) / 1e6 : null, 150, s100 && s100.rss.median * 1048576 <= 150e6, 'MB');
  const rt = results.readTool;
  // The slower of first read and re-read: the target holds for both.
  const mountedP50 = rt ? Math.max(rt.mountedFirstRead.p50, rt.mountedReread.p50) : null;
  add('read tool p50 ≤ 5 ms, mounted', mountedP50, 5, rt && mountedP50 <= 5, 'ms');
  add('library read p50 ≤ 2 ms, mounted', mountedP50, 2, rt && mountedP50 <= 2, 'ms');
  add('read tool p50 ≤ 20 ms, unmounted team', rt?.unmounted.p50 ?? null, 20, rt && rt.unmounted.p50 <= 20, 'ms');
  return t;
}

export function targetsText(targets) {
  const rows = [['target', 'measured', 'verdict']];
  for (const t of targets) {
    const v = t.value === null || t.value === undefined ? '—' : `${t.value.toFixed(t.unit === '×' ? 2 : t.unit === 's' ? 3 : 1)}${t.unit === '×' ? '×' : ` ${t.unit}`}`;
    rows.push([t.name, v, t.ok === null ? 'not measured' : t.ok ? 'holds' : 'MISSES']);
  }
  return pad(rows);
}

/** Outputs of each warm command must agree with local disk's. */
export function consistencyErrors(results) {
  const errs = [];
  const disk = results.disk?.warm;
  if (!disk) return errs;
  for (const fs of ['ceilingC', 'ceiling', 'rclone', 'ours', 'oursFuseNative']) {
    const warm = results[fs]?.warm;
    if (!warm) continue;
    for (const [id, m] of Object.entries(warm)) {
      const want = disk[id]?.output;
      // ls -lR prints directory sizes and link counts that differ by filesystem; its line count must still match.
      if (want !== undefined && m.output !== want) errs.push(`${fs} ${id}: output ${m.output}, disk ${want}`);
    }
  }
  const grep = disk.grep?.output;
  for (const path of ['disk.cold.grep', 'ceilingC.cold.grep', 'ceiling.cold.grep', 'rclone.cold.grep', 'ours.coldOn.grep', 'ours.coldOff.grep', 'ours.grantTtl0.grep', 'oursFuseNative.coldOn.grep']) {
    const out = get(results, path)?.output;
    if (grep !== undefined && out !== undefined && out !== grep) errs.push(`${path}: output ${out}, disk ${grep}`);
  }
  return errs;
}
