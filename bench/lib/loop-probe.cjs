'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload (node -r) */
// Preloaded (`node -r`) into the svc processes the openai scenario measures: the event loop's own
// delay, recorded inside the process by perf_hooks.monitorEventLoopDelay at a 1 ms resolution (the
// default 10 ms hides the stalls that make a p99 of a few ms; each value is the time between two
// ticks, so an idle loop reads about 1 ms). Idle until asked, so that the throughput rounds run
// without its timer: each SIGWINCH (ignored by a process without the probe, and by Node when
// stdout is no terminal) toggles it. The first starts a fresh histogram; the next
// stops it and reports it. Each answer goes to $SVC_LOOP_PROBE_DIR/loop-PID.json (written whole,
// then renamed) as { seq, state: 'recording' | 'stopped', …the histogram in ms when stopped }, seq
// counting the signals, so the reader knows which signal it answers. Only the main thread answers:
// worker threads inherit the preload and ignore it (their loops are not the one that serves HTTP).
const fs = require('node:fs');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { isMainThread } = require('node:worker_threads');

if (isMainThread) {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let recording = false;
  let seq = 0;
  const ms = (ns) => ns / 1e6;
  process.on('SIGWINCH', () => {
    seq += 1;
    let report;
    if (!recording) {
      histogram.reset();
      histogram.enable();
      recording = true;
      report = { seq, state: 'recording' };
    } else {
      histogram.disable();
      recording = false;
      const empty = histogram.count === 0;
      report = {
        seq,
        state: 'stopped',
        resolutionMs: 1,
        count: histogram.count,
        minMs: empty ? 0 : ms(histogram.min),
        meanMs: empty ? 0 : ms(histogram.mean),
        p50Ms: ms(histogram.percentile(50)),
        p99Ms: ms(histogram.percentile(99)),
        maxMs: empty ? 0 : ms(histogram.max),
      };
    }
    const dir = process.env.SVC_LOOP_PROBE_DIR ?? process.cwd();
    const file = path.join(dir, `loop-${process.pid}.json`);
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(report));
    fs.renameSync(`${file}.tmp`, file);
  });
}
