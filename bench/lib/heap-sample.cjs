'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload (node -r) */
// Preloaded (`node -r`) by bench/memory.ts `--heap-sample`: V8's sampling heap profiler, through
// the inspector session of the process itself, counting what outlives the young generation. Each
// SIGURG (ignored by a process without the preload) toggles it: the first starts sampling (one
// sample every 8 KiB allocated on average), keeping the samples of what a major GC collected or
// left alive and dropping those a scavenge collected (includeObjectsCollectedByMinorGC: false), so
// what is left is what was promoted to the old generation, plus what the young generation holds
// at the stop (at most one semi-space of what was allocated: under 1% of a 10 s burst's). The
// next stops it and writes the profile's sites to $SVC_HEAP_SAMPLE_DIR/heap-PID.json
// as { seq, state, total, sites: [{ fn, url, line, bytes }] } (bytes by allocating frame, self
// only). Only the main thread answers.
const fs = require('node:fs');
const path = require('node:path');
const inspector = require('node:inspector');
const { isMainThread } = require('node:worker_threads');

if (isMainThread) {
  const session = new inspector.Session();
  session.connect();
  const post = (method, params) =>
    new Promise((resolve, reject) =>
      session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result))),
    );
  let sampling = false;
  let seq = 0;
  const write = (report) => {
    const dir = process.env.SVC_HEAP_SAMPLE_DIR ?? process.cwd();
    const file = path.join(dir, `heap-${process.pid}.json`);
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(report));
    fs.renameSync(`${file}.tmp`, file);
  };
  process.on('SIGURG', () => {
    seq += 1;
    const mine = seq;
    if (!sampling) {
      sampling = true;
      post('HeapProfiler.startSampling', {
        samplingInterval: 8192,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: false,
      }).then(
        () => write({ seq: mine, state: 'sampling' }),
        (error) => write({ seq: mine, state: 'failed', error: String(error) }),
      );
      return;
    }
    sampling = false;
    post('HeapProfiler.stopSampling')
      .then(({ profile }) => {
        const sites = new Map();
        const stacks = new Map();
        let total = 0;
        const name = (f) => `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '')}:${f.lineNumber + 1}`;
        const walk = (node, path) => {
          const self = node.selfSize;
          if (self > 0) {
            const f = node.callFrame;
            const key = name(f);
            const s = sites.get(key) ?? { fn: f.functionName || '(anonymous)', url: f.url, line: f.lineNumber + 1, bytes: 0 };
            s.bytes += self;
            sites.set(key, s);
            // The site with its four callers: who allocates through a shared function.
            const stack = path.slice(-5).join(' < ');
            stacks.set(stack, (stacks.get(stack) ?? 0) + self);
            total += self;
          }
          for (const child of node.children) walk(child, [...path, name(child.callFrame)]);
        };
        walk(profile.head, []);
        write({
          seq: mine,
          state: 'stopped',
          total,
          sites: [...sites.values()].sort((a, b) => b.bytes - a.bytes),
          stacks: [...stacks].sort((a, b) => b[1] - a[1]).slice(0, 200).map(([stack, bytes]) => ({ stack: stack.split(' < ').reverse().join(' < '), bytes })),
        });
      })
      .catch((error) => write({ seq: mine, state: 'failed', error: String(error) }));
  });
}
