'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS preload (node -r) */
// What the event loop stalls on (issue 46, point 3), preloaded (`node -r`) into a svc process by
// bench/tail.ts. Like ./loop-probe.cjs it is idle until SIGWINCH, records until the next one and
// then writes $SVC_TAIL_PROBE_DIR/tail-PID.json. While recording it keeps:
// - the loop delay (monitorEventLoopDelay at 1 ms, as the bench reads it);
// - every GC pause of the main isolate (a PerformanceObserver of 'gc' entries: kind, start, length);
// - the time of every better-sqlite3 call of the process (Statement run/get/all/iterate and
//   Database pragma/exec, wrapped on their prototypes), by SQL text;
// - the stalls: a 1 ms interval timer whose gaps over STALL_MS are each a stall, [last tick, this
//   tick], and what overlapped it: GC pauses, SQLite calls, and (SVC_TAIL_PROFILE=1, V8's sampling
//   profiler through the inspector at 250 µs) the functions the samples inside it were in.
// A diagnosis, never part of a measured throughput: the wrapping and the timer cost a little.
const fs = require('node:fs');
const { setInterval, clearInterval } = require('node:timers');
const { Buffer } = require('node:buffer');
const path = require('node:path');
const { monitorEventLoopDelay, PerformanceObserver, performance, constants } = require('node:perf_hooks');
const { isMainThread, threadId } = require('node:worker_threads');

const STALL_MS = Number(process.env.SVC_TAIL_STALL_MS ?? 3);
const GC_KINDS = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};

if (isMainThread) {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let recording = false;
  let seq = 0;
  let gcs = [];
  let calls = [];
  const bySql = new Map();
  let stalls = [];
  let timer;
  let profiler;
  let t0 = 0;
  let ticks = 0;

  const observer = new PerformanceObserver((list) => {
    if (!recording) return;
    for (const e of list.getEntries())
      gcs.push({ kind: GC_KINDS[e.detail?.kind ?? e.kind] ?? String(e.detail?.kind), start: e.startTime, ms: e.duration });
  });
  observer.observe({ entryTypes: ['gc'] });

  // better-sqlite3 as svc loads it (the same module: node resolves both to one real path).
  try {
    const Database = require(require.resolve('better-sqlite3', { paths: [process.cwd(), __dirname] }));
    const probeDb = new Database(':memory:');
    const Statement = Object.getPrototypeOf(probeDb.prepare('select 1'));
    probeDb.close();
    const time = (proto, name, label) => {
      const original = proto[name];
      proto[name] = function timed(...args) {
        if (!recording) return original.apply(this, args);
        const start = performance.now();
        try {
          return original.apply(this, args);
        } finally {
          const ms = performance.now() - start;
          const sql = label(this, args);
          let row = bySql.get(sql);
          if (row === undefined) bySql.set(sql, (row = { count: 0, ms: 0, maxMs: 0, over1: 0 }));
          row.count++;
          row.ms += ms;
          if (ms > row.maxMs) row.maxMs = ms;
          if (ms > 1) row.over1++;
          if (ms > 0.2) calls.push({ sql, start, ms });
        }
      };
    };
    const text = (s) => s.slice(0, 120);
    for (const name of ['run', 'get', 'all', 'iterate']) time(Statement, name, (st) => text(st.source));
    time(Database.prototype, 'pragma', (_db, args) => `pragma ${String(args[0])}`);
    time(Database.prototype, 'exec', (_db, args) => text(String(args[0])));
  } catch (error) {
    process.stderr.write(`tail-probe: better-sqlite3 not wrapped: ${String(error)}\n`);
  }

  // The main thread's /proc schedstat (Linux): ns on the CPU, ns runnable on a run queue, slices.
  let schedFd;
  const schedBuf = Buffer.alloc(128);
  const schedstat = () => {
    try {
      schedFd ??= fs.openSync('/proc/thread-self/schedstat', 'r');
      const n = fs.readSync(schedFd, schedBuf, 0, 128, 0);
      const [cpu, runq] = schedBuf.toString('latin1', 0, n).split(' ');
      return [Number(cpu), Number(runq)];
    } catch {
      return null;
    }
  };

  const startProfile = () => {
    if (process.env.SVC_TAIL_PROFILE !== '1') return;
    const inspector = require('node:inspector');
    profiler = new inspector.Session();
    profiler.connect();
    profiler.post('Profiler.enable');
    profiler.post('Profiler.setSamplingInterval', { interval: 250 });
    profiler.post('Profiler.start');
  };
  const stopProfile = () =>
    new Promise((resolve) => {
      if (profiler === undefined) return resolve(null);
      profiler.post('Profiler.stop', (error, result) => {
        profiler.disconnect();
        profiler = undefined;
        resolve(error ? null : result.profile);
      });
    });

  // SVC_TAIL_ALLOC=1: V8's sampling heap profiler, every allocation site including what the
  // scavenges and mark-compacts collected (what fills the young generation, not what is left).
  let allocator;
  const startAlloc = () => {
    if (process.env.SVC_TAIL_ALLOC !== '1') return;
    const inspector = require('node:inspector');
    allocator = new inspector.Session();
    allocator.connect();
    allocator.post('HeapProfiler.enable');
    allocator.post('HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  };
  const stopAlloc = () =>
    new Promise((resolve) => {
      if (allocator === undefined) return resolve(null);
      allocator.post('HeapProfiler.stopSampling', (error, result) => {
        allocator.disconnect();
        allocator = undefined;
        if (error) return resolve(null);
        // Bytes by allocating function, and by the deepest frame of svc's own code above it.
        const self = new Map();
        const svc = new Map();
        const packages = new Map();
        let total = 0;
        const short = (f) =>
          `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules\/(@[^/]+\/)?[^/]+|dist|core|adapters|cli)\//, '$1/')}:${f.lineNumber + 1}`;
        const walk = (node, svcFrame, pkg) => {
          const url = node.callFrame.url;
          if (/\/(dist|core|adapters|cli)\//.test(url) && !url.includes('node_modules')) svcFrame = short(node.callFrame);
          const m = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url);
          if (m) pkg = m[1];
          else if (url.startsWith('node:')) pkg = pkg ?? url;
          if (node.selfSize > 0) {
            total += node.selfSize;
            const k = short(node.callFrame);
            self.set(k, (self.get(k) ?? 0) + node.selfSize);
            const sk = svcFrame ?? '(no svc frame)';
            svc.set(sk, (svc.get(sk) ?? 0) + node.selfSize);
            const pk = pkg ?? (url === '' ? '(native/vm)' : 'svc');
            packages.set(pk, (packages.get(pk) ?? 0) + node.selfSize);
          }
          for (const c of node.children) walk(c, svcFrame, m || url.startsWith('node:') ? pkg : undefined);
        };
        walk(result.profile.head, undefined, undefined);
        const top = (m, n) =>
          [...m]
            .sort((a, b) => b[1] - a[1])
            .slice(0, n)
            .map(([k, b]) => ({ k, bytes: b }));
        resolve({ total, self: top(self, 30), svc: top(svc, 30), packages: top(packages, 20) });
      });
    });

  // The V8 profile's clock (µs, monotonic) against performance.now() (ms since timeOrigin).
  const hrOffsetMs = () => Number(process.hrtime.bigint()) / 1e6 - performance.now();

  function overlap(list, from, to) {
    let ms = 0;
    const hit = [];
    for (const x of list) {
      const a = Math.max(from, x.start);
      const b = Math.min(to, x.start + x.ms);
      if (b > a) {
        ms += b - a;
        hit.push(x);
      }
    }
    return { ms, hit };
  }

  function profileIn(profile, offset, windows) {
    // Each window's samples by the function on top of the stack (self) and by svc's frames on it.
    if (profile === null) return;
    const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map();
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const name = (n) => {
      const f = n.callFrame;
      const file = f.url.replace(/^.*\/(node_modules\/(@[^/]+\/)?[^/]+|dist|core|adapters|cli|node:[^/]+)\//, '$1/');
      return `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}`;
    };
    let t = profile.startTime / 1000 - offset;
    const samples = profile.samples.map((id, i) => {
      t += profile.timeDeltas[i] / 1000;
      return { id, t };
    });
    // Samples and windows both in time order: one pass over each.
    let first = 0;
    for (const w of [...windows].sort((a, b) => a.start - b.start)) {
      const self = new Map();
      const svcFrames = new Map();
      let n = 0;
      while (first < samples.length && samples[first].t < w.absStart) first++;
      for (let i = first; i < samples.length && samples[i].t <= w.end; i++) {
        const s = samples[i];
        n++;
        const node = nodes.get(s.id);
        const top = name(node);
        self.set(top, (self.get(top) ?? 0) + 1);
        // The deepest frame of svc's own code (dist/ or the sources) on the stack.
        for (let id = s.id; id !== undefined; id = parent.get(id)) {
          const url = nodes.get(id).callFrame.url;
          if (/\/(dist|core|adapters|cli)\//.test(url) && !url.includes('node_modules')) {
            const k = name(nodes.get(id));
            svcFrames.set(k, (svcFrames.get(k) ?? 0) + 1);
            break;
          }
        }
      }
      const top = (m) =>
        [...m]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 6)
          .map(([k, c]) => `${c} ${k}`);
      w.samples = n;
      w.self = top(self);
      w.svc = top(svcFrames);
    }
  }

  async function stop() {
    histogram.disable();
    clearInterval(timer);
    recording = false;
    const seconds = (performance.now() - t0) / 1000;
    const profile = await stopProfile();
    const alloc = await stopAlloc();
    const offset = hrOffsetMs();
    const windows = stalls.map((s) => {
      const gc = overlap(gcs, s.start, s.end);
      const sql = overlap(calls, s.start, s.end);
      return {
        start: +(s.start - t0).toFixed(2),
        absStart: s.start,
        end: s.end,
        ms: +(s.end - s.start).toFixed(2),
        cpuMs: +s.cpuMs.toFixed(2),
        threadCpuMs: s.threadCpuMs === null ? null : +s.threadCpuMs.toFixed(2),
        runqMs: s.runqMs === null ? null : +s.runqMs.toFixed(2),
        involuntary: s.involuntary,
        voluntary: s.voluntary,
        gcMs: +gc.ms.toFixed(2),
        gc: gc.hit.map((g) => `${g.kind} ${g.ms.toFixed(2)}`),
        sqlMs: +sql.ms.toFixed(2),
        sql: sql.hit.filter((c) => c.ms > 0.5).map((c) => `${c.ms.toFixed(2)} ${c.sql}`),
        sqlCalls: sql.hit.length,
      };
    });
    profileIn(profile, offset, windows);
    for (const w of windows) {
      delete w.absStart;
      delete w.end;
    }
    const gcByKind = {};
    for (const g of gcs) {
      const k = (gcByKind[g.kind] ??= { count: 0, ms: 0, maxMs: 0, over2: 0 });
      k.count++;
      k.ms += g.ms;
      k.maxMs = Math.max(k.maxMs, g.ms);
      if (g.ms > 2) k.over2++;
    }
    const ms = (ns) => ns / 1e6;
    return {
      seconds,
      ticks,
      loop: {
        count: histogram.count,
        p50Ms: ms(histogram.percentile(50)),
        p99Ms: ms(histogram.percentile(99)),
        p999Ms: ms(histogram.percentile(99.9)),
        maxMs: histogram.count === 0 ? 0 : ms(histogram.max),
      },
      gc: gcByKind,
      sql: [...bySql]
        .map(([sql, r]) => ({ sql, ...r }))
        .sort((a, b) => b.ms - a.ms)
        .slice(0, 25),
      stalls: windows,
      alloc,
    };
  }

  process.on('SIGWINCH', () => {
    seq += 1;
    const dir = process.env.SVC_TAIL_PROBE_DIR ?? process.cwd();
    const file = path.join(dir, `tail-${process.pid}.json`);
    const write = (report) => {
      fs.writeFileSync(`${file}.tmp`, JSON.stringify({ seq, ...report }));
      fs.renameSync(`${file}.tmp`, file);
    };
    if (!recording) {
      gcs = [];
      calls = [];
      bySql.clear();
      stalls = [];
      ticks = 0;
      histogram.reset();
      histogram.enable();
      recording = true;
      startProfile();
      startAlloc();
      t0 = performance.now();
      let last = t0;
      let lastUsage = process.resourceUsage();
      let lastSched = schedstat();
      timer = setInterval(() => {
        const now = performance.now();
        const usage = process.resourceUsage();
        const sched = schedstat();
        ticks++;
        if (now - last > STALL_MS)
          stalls.push({
            start: last,
            end: now,
            // The whole process's CPU over the gap (all threads: GC helpers, the checkpointer),
            // and its context switches: involuntary ones (preempted: the machine's other load)
            // against voluntary ones (waited: I/O, a lock, a futex).
            cpuMs: (usage.userCPUTime + usage.systemCPUTime - lastUsage.userCPUTime - lastUsage.systemCPUTime) / 1000,
            involuntary: usage.involuntaryContextSwitches - lastUsage.involuntaryContextSwitches,
            voluntary: usage.voluntaryContextSwitches - lastUsage.voluntaryContextSwitches,
            // The main thread's own: on the CPU, and runnable but waiting for one (the machine's load).
            threadCpuMs: sched === null || lastSched === null ? null : (sched[0] - lastSched[0]) / 1e6,
            runqMs: sched === null || lastSched === null ? null : (sched[1] - lastSched[1]) / 1e6,
          });
        last = now;
        lastUsage = usage;
        lastSched = sched;
      }, 1);
      write({ state: 'recording' });
    } else
      void stop().then((report) => write({ state: 'stopped', ...report }));
  });
}

// In a worker thread (SQLite's checkpointer): the time of each checkpoint it makes, by kind,
// written to $SVC_TAIL_PROBE_DIR/tail-PID-worker-THREAD.json after each one that is not PASSIVE
// or that took over 1 ms, for the reader to set beside the main thread's stalls.
if (!isMainThread && process.env.SVC_TAIL_PROBE_DIR !== undefined) {
  try {
    const Database = require(require.resolve('better-sqlite3', { paths: [process.cwd(), __dirname] }));
    const pragma = Database.prototype.pragma;
    const kinds = {};
    let written = 0;
    const file = path.join(process.env.SVC_TAIL_PROBE_DIR, `tail-${process.pid}-worker-${threadId}.json`);
    Database.prototype.pragma = function timed(source, options) {
      const start = performance.now();
      try {
        return pragma.call(this, source, options);
      } finally {
        const ms = performance.now() - start;
        const k = (kinds[source] ??= { count: 0, ms: 0, maxMs: 0, over1: 0, last: [] });
        k.count++;
        k.ms += ms;
        k.maxMs = Math.max(k.maxMs, ms);
        if (ms > 1) k.over1++;
        if (!source.includes('PASSIVE') || ms > 1 || start - written > 1000) {
          written = start;
          k.last.push(+ms.toFixed(2));
          if (k.last.length > 200) k.last.shift();
          fs.writeFileSync(file, JSON.stringify({ at: performance.timeOrigin + performance.now(), kinds }));
        }
      }
    };
  } catch {
    // No SQLite in this thread.
  }
}
