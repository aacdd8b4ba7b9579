// The daemon at scale: ready time and memory with no content fetched
// (`--prefetch-content off`), each size with its own control plane.
//
// VmRSS is read right when the daemon prints `mounted` (start-up garbage
// such as the plan's JSON text may still be on the heap), again 3 s later,
// and VmHWM gives the peak. Corpora other than the main one use small files
// (200–1000 B): only metadata matters here, and it keeps generation and the
// control plane's start-up scan short.

import { join } from 'node:path';
import { generateCorpus } from '../corpus.mjs';
import { startServer, createSession, writeToken, startMount, stopMount, rssMiB, idleCpuMsPerS } from './knowledgefs.mjs';
import { run, stop, log } from './proc.mjs';
import { summarize, round3 } from './stats.mjs';

/** Medians of the daemon's own start-up phases (null when it does not log them). */
export function breakdownSummary(parts) {
  if (parts.inProcessMs.length === 0) return null;
  return Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, summarize(v).median]));
}

export async function measureScale(files, { runs, work, runDir, main }) {
  const sameAsMain = main && files === main.options.files;
  const dir = sameAsMain ? main.dir : join(work, `data-scale-${files}`);
  const corpus = sameAsMain ? main : generateCorpus(dir, { files, extraTeams: 0, minSize: 200, maxSize: 1000 });
  const server = await startServer(dir, join(runDir, `cp-scale-${files}`), { timeoutMs: 600_000 });
  try {
    const session = await createSession(server, { kind: 'personal', creator: 'bench' });
    const tokenFile = writeToken(runDir, `scale-${files}`, session.token);
    const serverIdleCpuMsPerS = round3(await idleCpuMsPerS(server.handle.pid));
    const ready = [];
    const rss = [];
    const settled = [];
    const peak = [];
    const listed = [];
    const parts = { inProcessMs: [], sessionPlanMs: [], treeMs: [], mountMs: [] };
    for (let i = 0; i < runs; i++) {
      const m = await startMount(server, tokenFile, runDir, { prefetch: 'off', timeoutMs: 600_000 });
      try {
        if (m.files !== corpus.materialisedFiles) throw new Error(`mount shows ${m.files} files, corpus has ${corpus.materialisedFiles}`);
        ready.push(m.readyMs);
        if (m.breakdown) for (const k of Object.keys(parts)) parts[k].push(m.breakdown[k]);
        rss.push(rssMiB(m.handle.pid).rss);
        await new Promise((r) => setTimeout(r, 3000));
        const after = rssMiB(m.handle.pid);
        settled.push(after.rss);
        peak.push(after.hwm);
        // Every entry looked up once: the kernel then holds a node id per file (the native binding keeps one record each).
        const ls = await run(`ls -lR '${m.mnt}' > /dev/null`, { timeoutMs: 600_000 });
        if (ls.code !== 0) throw new Error(`ls -lR failed: ${ls.stderr.slice(0, 200)}`);
        listed.push(rssMiB(m.handle.pid).rss);
      } finally {
        await stopMount(m);
      }
    }
    const entry = {
      files: corpus.materialisedFiles, bytes: corpus.bytes,
      ready: summarize(ready), readyBreakdown: breakdownSummary(parts), rss: summarize(rss), rssSettled: summarize(settled), rssPeak: summarize(peak), rssAfterLsR: summarize(listed), serverIdleCpuMsPerS,
    };
    log(`scale ${entry.files}: ready ${(entry.ready.median / 1000).toFixed(3)} s; VmRSS ${entry.rss.median.toFixed(1)} MiB at ready, ${entry.rssSettled.median.toFixed(1)} MiB 3 s later, peak ${entry.rssPeak.median.toFixed(1)} MiB, after ls -lR ${entry.rssAfterLsR.median.toFixed(1)} MiB; control plane idle CPU ${serverIdleCpuMsPerS.toFixed(0)} ms/s`);
    return entry;
  } finally {
    await stop(server.handle);
  }
}
