// The shape of src/ (docs/ARCHITECTURE.md): dependencies point inward,
//
//   cli → mcp / daemon / server → store / client / metrics → disk → core
//
// a folder imports only folders of a lower layer (never one beside it or
// above it), core imports nothing of the project outside itself, and no two
// files import each other, directly or round a loop. Every import counts:
// static, `import type`, `export … from` and dynamic `import()`.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

/** Layer of each top-level folder of src/: a folder may import only folders of a lower layer. */
const LAYERS: Readonly<Record<string, number>> = {
  cli: 4,
  mcp: 3,
  daemon: 3,
  server: 3,
  store: 2,
  client: 2,
  metrics: 2,
  disk: 1,
  core: 0,
};

type Graph = ReadonlyMap<string, readonly string[]>;

/** Longest a source file may grow: past it, a file holds more than one thing. */
const MAX_LINES = 400;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** file → the project files it imports (paths relative to src/, posix). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const path of sourceFiles(SRC)) {
    const file = relative(SRC, path).split('\\').join('/');
    const info = ts.preProcessFile(readFileSync(path, 'utf8'), true, true);
    const targets = info.importedFiles
      .map((f) => f.fileName)
      // Relative module specifiers only (not package.json, read through createRequire for the version).
      .filter((spec) => (spec.startsWith('./') || spec.startsWith('../')) && /\.(js|ts)$/.test(spec))
      .map((spec) => posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, '.ts'));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

const folderOf = (file: string): string => file.split('/')[0] ?? file;

/** Imports against the layer order, as `from → to (why)`. */
function layerViolations(graph: Graph): string[] {
  const problems: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      if (to.startsWith('../')) {
        problems.push(`src/${from} → ${to} (outside src/)`);
        continue;
      }
      const a = folderOf(from);
      const b = folderOf(to);
      if (a === b) continue;
      const la = LAYERS[a];
      const lb = LAYERS[b];
      if (la === undefined || lb === undefined) problems.push(`src/${from} → src/${to} (src/${la === undefined ? a : b}/ has no layer in LAYERS)`);
      else if (lb >= la) problems.push(`src/${from} → src/${to} (${a} may not import ${b}: ${lb > la ? 'an arrow up' : 'a folder of the same layer'})`);
    }
  }
  return problems;
}

/** Every import cycle between files (one per strongly connected component), as `a → b → … → a`. */
function cycles(graph: Graph): string[] {
  // Tarjan's strongly connected components, iterative enough for ~150 files.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(component);
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  // For each component, one concrete loop through its first file (a shortest path back to it).
  return components.map((component) => {
    const members = new Set(component);
    const start = [...component].sort()[0]!;
    const previous = new Map<string, string>();
    const queue = [start];
    let last: string | undefined;
    while (queue.length > 0 && last === undefined) {
      const v = queue.shift()!;
      for (const w of graph.get(v) ?? []) {
        if (!members.has(w)) continue;
        if (w === start) {
          last = v;
          break;
        }
        if (!previous.has(w)) {
          previous.set(w, v);
          queue.push(w);
        }
      }
    }
    const loop = [start];
    for (let v = last; v !== undefined && v !== start; v = previous.get(v)) loop.splice(1, 0, v);
    const more = component.length > loop.length ? ` (and ${component.length - loop.length} more files in the same knot: ${component.filter((f) => !loop.includes(f)).sort().join(', ')})` : '';
    return `${[...loop, start].map((f) => `src/${f}`).join(' → ')}${more}`;
  });
}

describe('architecture: the dependency rule', () => {
  const graph = importGraph();

  it('reads every import of src/ (static, type-only, re-exports, dynamic)', () => {
    expect(graph.size).toBeGreaterThan(100);
    // One of each kind, so a parser that missed a kind would not pass silently.
    expect(graph.get('cli/commands/doctor-checks.ts')).toContain('daemon/fuse/native-addon.ts'); // await import()
    expect(graph.get('client/index.ts')).toContain('client/knowledge-client.ts'); // export … from
    for (const [file, targets] of graph) for (const t of targets) expect(graph.has(t), `src/${file} imports src/${t}, which does not exist`).toBe(true);
  });

  it('finds a cycle and an arrow up when there is one', () => {
    const bad: Graph = new Map([
      ['core/a.ts', ['cli/b.ts']],
      ['cli/b.ts', ['core/a.ts']],
      ['server/c.ts', ['daemon/d.ts', 'server/c.ts']],
      ['daemon/d.ts', []],
    ]);
    expect(layerViolations(bad)).toEqual([
      'src/core/a.ts → src/cli/b.ts (core may not import cli: an arrow up)',
      'src/server/c.ts → src/daemon/d.ts (server may not import daemon: a folder of the same layer)',
    ]);
    expect(cycles(bad).sort()).toEqual(['src/cli/b.ts → src/core/a.ts → src/cli/b.ts', 'src/server/c.ts → src/server/c.ts']);
  });

  it('every top-level folder of src/ has a layer', () => {
    const folders = readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(folders.filter((f) => LAYERS[f] === undefined)).toEqual([]);
  });

  it('imports follow cli → mcp / daemon / server → store / client / metrics → core', () => {
    const problems = layerViolations(graph);
    expect(problems, `imports against the layer order:\n  ${problems.join('\n  ')}`).toEqual([]);
  });

  it('no import cycle between files', () => {
    const found = cycles(graph);
    expect(found, `import cycles:\n  ${found.join('\n  ')}`).toEqual([]);
  });

  it(`no source file is over ${MAX_LINES} lines, TypeScript in src/ or the addon's C in native/ (a longer one is split along its own seams)`, () => {
    const native = join(ROOT, 'native');
    const cFiles = readdirSync(native).filter((f) => /\.[ch]$/.test(f)).map((f) => join(native, f));
    expect(cFiles.length, 'the addon has C sources in native/').toBeGreaterThan(1);
    const long = [...sourceFiles(SRC), ...cFiles]
      .map((path) => ({ file: relative(ROOT, path), lines: readFileSync(path, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });
});

describe('docs/ARCHITECTURE.md follows the tree', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'ARCHITECTURE.md'), 'utf8');
  const files = sourceFiles(SRC).map((p) => relative(SRC, p).split('\\').join('/'));

  it('its folder map has every folder of src/, with its number of files', () => {
    const rows = new Map([...doc.matchAll(/^\| `([a-z/-]+)\/` \| (\d+) \|/gm)].map((m) => [m[1] as string, Number(m[2])]));
    const actual = new Map<string, number>();
    for (const f of files) actual.set(posix.dirname(f), (actual.get(posix.dirname(f)) ?? 0) + 1);
    const wrong = [...actual].filter(([dir, n]) => rows.get(dir) !== n).map(([dir, n]) => `${dir}/: ${n} files, the map says ${rows.get(dir) ?? 'nothing'}`);
    const gone = [...rows.keys()].filter((dir) => !actual.has(dir)).map((dir) => `${dir}/: in the map, not in src/`);
    expect([...wrong, ...gone]).toEqual([]);
  });

  it('every file it names exists', () => {
    const names = new Set(files.map((f) => posix.basename(f)));
    const missing = [...doc.matchAll(/`([\w./-]+\.ts)`/g)]
      .map((m) => m[1] as string)
      .filter((name) => (name.includes('/') ? !files.includes(name) && !existsSync(join(ROOT, name)) : !names.has(name)));
    expect(missing).toEqual([]);
  });
});
