'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload (node -r) */
// Preloaded into `svc serve` by bench/memory.ts (`node -r`): on SIGUSR2, writes what the process
// holds to $SVC_MEMORY_PROBE_DIR/memory-PID.json: VmRSS split by mapping (the node binary, the
// malloc heap, anonymous memory: V8's heaps and thread stacks), V8's spaces (physical size, before
// and after a full GC when --expose-gc is given), and the loaded modules by package (count, bytes
// of source). Only the main thread answers; worker threads inherit the preload and ignore it.
const fs = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');
const { isMainThread } = require('node:worker_threads');

function mappings() {
  const by = {};
  let name = '';
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const m = /^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (m !== null) {
      const file = m[2].trim();
      name = file === '' ? 'anonymous' : file.startsWith('[') ? file : path.basename(file);
      if (name === process.execPath || name === path.basename(process.execPath)) name = 'node binary';
      continue;
    }
    if (line.startsWith('Rss:')) by[name] = (by[name] ?? 0) + Number(line.split(/\s+/)[1]) * 1024;
  }
  return by;
}

function spaces() {
  const out = {};
  for (const s of v8.getHeapSpaceStatistics())
    if (s.physical_space_size > 0) out[s.space_name] = { used: s.space_used_size, physical: s.physical_space_size };
  return out;
}

function packageOf(file) {
  const i = file.lastIndexOf('node_modules/');
  if (i >= 0) {
    const parts = file.slice(i + 13).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  const rel = path.relative(process.cwd(), file).split(path.sep);
  return rel[0] === 'dist' ? `svc ${rel[1]}/` : `svc ${rel[0]}/`;
}

if (isMainThread)
  process.on('SIGUSR2', () => {
    const before = { rss: process.memoryUsage().rss, spaces: spaces() };
    if (typeof global.gc === 'function') global.gc();
    const packages = {};
    for (const file of Object.keys(require.cache)) {
      const p = (packages[packageOf(file)] ??= { modules: 0, bytes: 0 });
      p.modules += 1;
      try {
        p.bytes += fs.statSync(file).size;
      } catch {
        // a module without a file (a JSON loaded from elsewhere): counted, not sized
      }
    }
    const report = {
      before,
      rss: process.memoryUsage().rss,
      mappings: mappings(),
      spaces: spaces(),
      heapUsed: process.memoryUsage().heapUsed,
      modules: Object.keys(require.cache).length,
      packages,
      threads: Number(/Threads:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]),
    };
    const dir = process.env.SVC_MEMORY_PROBE_DIR ?? process.cwd();
    fs.writeFileSync(path.join(dir, `memory-${process.pid}.json.tmp`), JSON.stringify(report));
    fs.renameSync(path.join(dir, `memory-${process.pid}.json.tmp`), path.join(dir, `memory-${process.pid}.json`));
  });
