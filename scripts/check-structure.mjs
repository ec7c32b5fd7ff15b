#!/usr/bin/env node
// The folder-level structure, drawn from the imports (issue 17): file-level `import-x/no-cycle`
// cannot see two folders that depend on each other through different files, so this draws the
// graph of core/'s folders and fails on any cycle in it, and on cli/ or adapters/ reaching past
// core/index.ts into the core's internals; on any cycle of files in core/, adapters/ or cli/,
// type-only imports included; and on a function of adapters/console/ longer than 150 lines.
// `--graph` prints the folder graph.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const IMPORT_RE =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm;

function sources(dir) {
  const out = [];
  const walk = (d) => {
    for (const entry of fs.readdirSync(path.join(root, d), { withFileTypes: true })) {
      const rel = path.posix.join(d, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (/\.(ts|mts|cts)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(rel);
    }
  };
  if (fs.existsSync(path.join(root, dir))) walk(dir);
  return out;
}

/** Relative imports of a file, resolved to repository paths without extension. */
function importsOf(file) {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const out = [];
  for (const match of text.matchAll(IMPORT_RE)) {
    const spec = match[1] ?? match[2] ?? match[3];
    if (spec === undefined || !spec.startsWith('.')) continue;
    out.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)));
  }
  return out;
}

/** core/<folder> for a path inside core/ (a file directly in core/ is its own node). */
function folderOf(target) {
  const parts = target.split('/');
  return parts.length > 2 ? `core/${parts[1]}` : target.replace(/\.(ts|js)$/, '');
}

const problems = [];
const edges = new Map(); // folder -> Map(folder -> example "file -> import")
for (const file of sources('core')) {
  const from = folderOf(file);
  for (const target of importsOf(file)) {
    if (!target.startsWith('core/')) continue;
    const to = folderOf(target);
    if (to === from) continue;
    if (!edges.has(from)) edges.set(from, new Map());
    if (!edges.get(from).has(to)) edges.get(from).set(to, `${file} -> ${target}`);
  }
}

// Tarjan's strongly connected components: every component of more than one folder is a cycle.
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
let counter = 0;
const components = [];
function connect(v) {
  index.set(v, counter);
  low.set(v, counter);
  counter++;
  stack.push(v);
  onStack.add(v);
  for (const w of edges.get(v)?.keys() ?? []) {
    if (!index.has(w)) {
      connect(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
  }
  if (low.get(v) === index.get(v)) {
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) components.push(component.sort());
  }
}
const nodes = new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])]);
for (const v of [...nodes].sort()) if (!index.has(v)) connect(v);
for (const component of components) {
  const inside = new Set(component);
  const why = component.flatMap((a) =>
    [...(edges.get(a) ?? new Map())]
      .filter(([b]) => inside.has(b))
      .map(([b, example]) => `    ${a} -> ${b}  (${example})`),
  );
  problems.push(`folder cycle inside core/: ${component.join(', ')}\n${why.join('\n')}`);
}

// File-level cycles, type-only imports included: eslint's `import-x/no-cycle` skips `import type`,
// and two modules that need each other's types still cannot be read (or moved) one at a time.
const FILE_ROOTS = ['core', 'adapters', 'cli'];
const known = new Set(FILE_ROOTS.flatMap(sources));
const resolveFile = (target) =>
  [`${target}.ts`, `${target}.mts`, `${target}.cts`, `${target}/index.ts`, target.replace(/\.js$/, '.ts')].find(
    (candidate) => known.has(candidate),
  );
const fileEdges = new Map();
for (const file of known) fileEdges.set(file, [...new Set(importsOf(file).map(resolveFile).filter(Boolean))]);
const fileIndex = new Map();
const fileLow = new Map();
const fileStack = [];
const fileOnStack = new Set();
let fileCounter = 0;
function connectFile(v) {
  fileIndex.set(v, fileCounter);
  fileLow.set(v, fileCounter);
  fileCounter++;
  fileStack.push(v);
  fileOnStack.add(v);
  for (const w of fileEdges.get(v) ?? []) {
    if (!fileIndex.has(w)) {
      connectFile(w);
      fileLow.set(v, Math.min(fileLow.get(v), fileLow.get(w)));
    } else if (fileOnStack.has(w)) fileLow.set(v, Math.min(fileLow.get(v), fileIndex.get(w)));
  }
  if (fileLow.get(v) === fileIndex.get(v)) {
    const component = [];
    let w;
    do {
      w = fileStack.pop();
      fileOnStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) problems.push(`file import cycle: ${component.sort().join(', ')}`);
  }
}
for (const v of [...known].sort()) if (!fileIndex.has(v)) connectFile(v);

// The console stays a set of page modules (issue 43): no function in adapters/console/ longer than
// MAX_CONSOLE_FUNCTION_LINES, so no page grows back into one closure.
const MAX_CONSOLE_FUNCTION_LINES = 150;
{
  const ts = createRequire(import.meta.url)('typescript');
  for (const file of sources('adapters/console')) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const visit = (node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        if (last - first + 1 > MAX_CONSOLE_FUNCTION_LINES) {
          const name = node.name?.getText(source) ?? '(anonymous)';
          problems.push(
            `${file}:${first + 1}: function ${name} is ${last - first + 1} lines (at most ${MAX_CONSOLE_FUNCTION_LINES} in adapters/console/): split it`,
          );
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
}

// cli/ and adapters/ see the core only through core/index.ts (the generated wire types in gen/
// are the contract between them and may be imported directly). core/telemetry is the one other
// entry: the CLI requires it before anything else, so the instrumentations see every module load.
// core/primary is a subset of core/index for the primary of `svc serve --workers N`, which would
// otherwise load (and hold in memory) the whole core it never runs; core/edge is the subset the
// adapters and `svc gateway` use (the wire, config, metrics), so a gateway holds no core either.
const ENTRIES = new Set(['core', 'core/index', 'core/primary', 'core/edge', 'core/telemetry', 'core/telemetry/index']);
for (const file of [...sources('cli'), ...sources('adapters')]) {
  for (const target of importsOf(file)) {
    if ((target === 'core' || target.startsWith('core/')) && !ENTRIES.has(target))
      problems.push(`${file} imports ${target}: outside core/, import from core/index`);
  }
}

if (process.argv.includes('--graph')) {
  for (const from of [...edges.keys()].sort())
    console.log(`${from} -> ${[...edges.get(from).keys()].sort().join(', ')}`);
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  console.error(`\n${problems.length} structure problem(s)`);
  process.exit(1);
}
console.log(
  `structure ok: ${nodes.size} folders in core/, no folder cycle; ${known.size} files in core/, adapters/ and cli/, no file cycle; cli/ and adapters/ import core/index (or core/primary, core/edge) only`,
);
