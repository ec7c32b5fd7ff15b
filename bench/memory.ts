// Where `svc serve`'s memory goes (`npx tsx bench/memory.ts [--rate N] [--seconds N] [--stream] [--trace-gc]
// [--split] [--thread] [--saturate S] [--promoted] [--heap-sample] [--node-args '--flag …']`):
// the bench's fake upstream (60 ms) and svc, set up as the bench sets it up, with
// bench/lib/memory-probe.cjs preloaded. Prints the RSS of the idle server split by mapping (the
// node binary's pages, the malloc heap, anonymous memory: V8's heaps and thread stacks), V8's
// spaces, and the loaded modules by package (count, bytes of source); then the RSS over a paced
// load (default 500 req/s non-stream for 20 s) and the same split after it. `--trace-gc` runs svc
// with V8's `--trace-gc-verbose` (a diagnosis, never a setting: it costs time) and sums up, for the
// main thread's heap during the load, the collections and how V8 sized the old generation after each
// full GC: its growing factor (1.1 to 4.0) follows the ratio of the mark-compact speed to the
// old generation's allocation rate (what survives two scavenges, per ms), and the limit is that
// factor times what the GC found live. `--split` runs `svc core` + `svc gateway` instead and probes
// both; `--thread` runs `svc serve` with SVC_CORE_THREAD=1 (the probe sees its main thread's heap,
// the RSS is the process's). `--saturate S` first loads svc as the bench does before its paced
// ladder (c=32 against the 0 ms upstream, S seconds non-stream then S seconds of streams), so the
// paced load's RSS is read on a heap that has been through a burst; `--node-args '…'` passes V8
// flags to try. `--promoted` runs svc with V8's `--trace-gc-nvp` and prints, for each phase (the
// c=32 non-stream and stream phases, the paced load), what the main thread allocated and what its
// scavenges promoted to the old generation, in all, per second and per call (calls counted from
// the request log's lines in the same window). `--heap-sample` preloads bench/lib/heap-sample.cjs
// and prints, for each c=32 phase, where what outlived the young generation was allocated (V8's
// sampling heap profiler, the samples of what scavenges collected dropped), by function. Both
// need `--saturate S` for the c=32 phases. docs/performance.md (Memory, and Memory, rounds four and
// five) has what it showed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { autocannon } from './lib/autocannon';
import { killChildren, ROOT, rssMiB, sampleRss } from './lib/children';
import { runClient } from './lib/loadgen';
import { chatBody, startSvcPeer, startUpstream } from './lib/peers';

interface Space {
  readonly used: number;
  readonly physical: number;
}
interface Report {
  readonly before: { readonly rss: number; readonly spaces: Record<string, Space> };
  readonly rss: number;
  readonly mappings: Record<string, number>;
  readonly spaces: Record<string, Space>;
  readonly heapUsed: number;
  readonly modules: number;
  readonly packages: Record<string, { modules: number; bytes: number }>;
  readonly threads: number;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

const mib = (bytes: number): string => (bytes / 1048576).toFixed(1);

async function probe(pid: number, dir: string): Promise<Report> {
  const file = path.join(dir, `memory-${pid}.json`);
  fs.rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 100 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  return JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
}

function print(label: string, r: Report, packages: boolean): void {
  const heap = (s: Record<string, Space>): number => Object.values(s).reduce((n, x) => n + x.physical, 0);
  console.log(`\n${label}: RSS ${mib(r.before.rss)} MiB (${mib(r.rss)} after a full GC), ${r.threads} threads`);
  console.log(
    `  V8 heap (main thread), physical: ${mib(heap(r.before.spaces))} MiB → ${mib(heap(r.spaces))} after GC, ${mib(r.heapUsed)} used: ` +
      Object.entries(r.spaces)
        .map(([name, s]) => `${name.replace('_space', '')} ${mib(s.used)}/${mib(s.physical)}`)
        .join(', '),
  );
  console.log(
    `  mappings (after GC): ${Object.entries(r.mappings)
      .filter(([, bytes]) => bytes >= 512 * 1024)
      .sort((a, b) => b[1] - a[1])
      .map(([name, bytes]) => `${name} ${mib(bytes)}`)
      .join(', ')} MiB`,
  );
  if (!packages) return;
  const rows = Object.entries(r.packages).sort((a, b) => b[1].bytes - a[1].bytes);
  console.log(`  ${r.modules} modules; by package (modules, KiB of source):`);
  for (const [name, p] of rows.slice(0, 25))
    console.log(`    ${name.padEnd(36)} ${String(p.modules).padStart(5)} ${(p.bytes / 1024).toFixed(0).padStart(7)}`);
}

/** The main isolate's `--trace-gc-verbose` lines during the load, summed up. */
function gcSummary(trace: string): void {
  const lines = trace.split('\n');
  const from = lines.indexOf('=== load');
  const during = lines.slice(from + 1, lines.indexOf('=== end', from));
  // Worker threads (the SQLite checkpointer) print too: the main isolate scavenges the most.
  const isolates = new Map<string, number>();
  for (const line of during) {
    const m = /^\[\d+:(0x[0-9a-f]+)\].*Scavenge/.exec(line);
    if (m?.[1] !== undefined) isolates.set(m[1], (isolates.get(m[1]) ?? 0) + 1);
  }
  const main = [...isolates].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (main === undefined) return console.log('  no GC trace during the load');
  const mine = during.filter((l) => l.includes(main));
  const count = (re: RegExp): number => mine.filter((l) => re.test(l)).length;
  console.log(
    `  GC during the load (main thread): ${count(/ms: Scavenge/)} scavenges, ${count(/ms: (Mark-Compact|Mark-sweep)/)} full GCs`,
  );
  let factor: string | undefined;
  for (const line of mine) {
    const f = /\[HeapController\] factor ([\d.]+) based on .*speed_ratio=(\d+) \(gc=(\d+), mutator=(\d+)\)/.exec(line);
    if (f !== null)
      factor = `factor ${f[1]} (mark-compact ${((Number(f[3]) * 1000) / 1048576).toFixed(0)} MiB/s, old-generation allocation ${((Number(f[4]) * 1000) / 1048576).toFixed(1)} MiB/s, ratio ${f[2]})`;
    const l = /\[HeapController\] Limit: old size: (\d+) KB, new limit: (\d+) KB/.exec(line);
    if (l !== null && factor !== undefined) {
      console.log(
        `    after a full GC: ${mib(Number(l[1]) * 1024)} MiB old generation, limit ${mib(Number(l[2]) * 1024)} MiB: ${factor}`,
      );
      factor = undefined;
    }
  }
}

/** The main isolate's `--trace-gc-nvp` lines in `trace`, summed up per answered call. */
function promotedSummary(label: string, trace: string, seconds: number): void {
  const isolates = new Map<string, number>();
  const lines = trace.split('\n');
  for (const line of lines) {
    const m = /^\[\d+:(0x[0-9a-f]+)\].* gc=s /.exec(line);
    if (m?.[1] !== undefined) isolates.set(m[1], (isolates.get(m[1]) ?? 0) + 1);
  }
  const main = [...isolates].sort((a, b) => b[1] - a[1])[0]?.[0];
  const calls = lines.filter((l) => l.includes('"msg":"request"')).length;
  if (main === undefined) return console.log(`  ${label}: no GC trace`);
  let allocated = 0;
  let promoted = 0;
  let scavenges = 0;
  let full = 0;
  // With --trace-gc-verbose too, each GC's line is followed by the spaces after it: the old
  // space's growth from one GC to the next scavenge is what filled it, promoted or allocated
  // there directly (hidden classes, pretenured objects).
  let lastKind = '';
  let oldAfter: number | undefined;
  let filled = 0;
  for (const line of lines) {
    if (!line.includes(main)) continue;
    const old = /Old space, +used: +(\d+) KB/.exec(line);
    if (old?.[1] !== undefined) {
      const used = Number(old[1]) * 1024;
      if (lastKind === 's' && oldAfter !== undefined) filled += used - oldAfter;
      oldAfter = used;
      continue;
    }
    const a = / allocated=(\d+)/.exec(line);
    const p = / promoted=(\d+)/.exec(line);
    if (a?.[1] !== undefined) allocated += Number(a[1]);
    if (/ gc=s /.test(line)) {
      scavenges += 1;
      lastKind = 's';
      if (p?.[1] !== undefined) promoted += Number(p[1]);
    } else if (/ gc=(ms|mc|mmc) /.test(line)) {
      full += 1;
      lastKind = 'full';
    }
  }
  const kib = (n: number): string => (calls === 0 ? '—' : (n / calls / 1024).toFixed(1));
  console.log(
    `  ${label}: ${calls} calls logged, ${scavenges} scavenges, ${full} full GCs; allocated ${mib(allocated)} MiB ` +
      `(${kib(allocated)} KiB per call), promoted ${mib(promoted)} MiB (${kib(promoted)} KiB per call, ` +
      `${(promoted / 1048576 / seconds).toFixed(2)} MiB/s)` +
      (oldAfter === undefined
        ? ''
        : `; old space grew ${mib(filled)} MiB at scavenges (${kib(filled)} KiB per call, intervals ending in a full GC not counted)`),
  );
}

interface HeapSite {
  readonly fn: string;
  readonly url: string;
  readonly line: number;
  readonly bytes: number;
}

interface HeapSample {
  readonly total: number;
  readonly sites: HeapSite[];
  /** The heaviest sites with their four callers. */
  readonly stacks: { stack: string; bytes: number }[];
}

/** Toggles bench/lib/heap-sample.cjs in `pid` and waits for its answer. */
async function heapSample(pid: number, dir: string): Promise<HeapSample | null> {
  const file = path.join(dir, `heap-${pid}.json`);
  fs.rmSync(file, { force: true });
  process.kill(pid, 'SIGURG');
  for (let i = 0; i < 300 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  const r = JSON.parse(fs.readFileSync(file, 'utf8')) as { state: string } & HeapSample;
  return r.state === 'stopped' ? r : null;
}

function printSites(label: string, sample: HeapSample | null, calls: number): void {
  if (sample === null) return;
  // The whole profile (every site, and the sites with their callers), to read further.
  const file = path.join(os.tmpdir(), `svc-heap-${label.replace(/\W+/g, '-')}-${process.pid}.json`);
  fs.writeFileSync(file, JSON.stringify(sample, null, 1));
  const per = (n: number): string => (calls === 0 ? '—' : (n / calls / 1024).toFixed(2));
  console.log(
    `  ${label}: sampled ${mib(sample.total)} MiB outlived the young generation (${per(sample.total)} KiB per call); by site (KiB per call, share):`,
  );
  for (const s of sample.sites.slice(0, 30))
    console.log(
      `    ${per(s.bytes).padStart(6)} ${((100 * s.bytes) / sample.total).toFixed(1).padStart(5)}%  ${s.fn} ${s.url.replace(/^file:\/\//, '').replace(ROOT + '/', '')}:${s.line}`,
    );
  console.log(`    (every site, and the sites with their callers: ${file})`);
}

async function main(): Promise<void> {
  const rate = Number(arg('--rate') ?? 500);
  const traceGc = process.argv.includes('--trace-gc');
  const seconds = Number(arg('--seconds') ?? 20);
  const stream = process.argv.includes('--stream');
  const split = process.argv.includes('--split');
  const saturate = Number(arg('--saturate') ?? 0);
  const promoted = process.argv.includes('--promoted');
  const sampleHeap = process.argv.includes('--heap-sample');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-memory-'));
  const upstream = await startUpstream(16);
  try {
    const svc = await startSvcPeer(
      upstream.baseUrl,
      {
        SVC_MEMORY_PROBE_DIR: dir,
        SVC_HEAP_SAMPLE_DIR: dir,
        ...(process.argv.includes('--thread') ? { SVC_CORE_THREAD: '1' } : {}),
      },
      undefined,
      '',
      [
        '--expose-gc',
        ...(traceGc ? ['--trace-gc-verbose'] : []),
        ...(promoted ? ['--trace-gc-nvp'] : []),
        ...(sampleHeap ? ['-r', path.join(ROOT, 'bench/lib/heap-sample.cjs')] : []),
        ...(arg('--node-args')
          ?.split(' ')
          .filter((a) => a !== '') ?? []),
        '-r',
        path.join(ROOT, 'bench/lib/memory-probe.cjs'),
      ],
      split,
    );
    const pid = svc.pid ?? 0;
    // The split topology: the gateway (svc.pid) and the core, each probed.
    const pids: [string, number][] =
      svc.corePid === null
        ? [['svc', pid]]
        : [
            ['gateway', pid],
            ['core', svc.corePid],
          ];
    const probeAll = async (label: string, packages: boolean): Promise<void> => {
      for (const [name, p] of pids) print(pids.length > 1 ? `${name}, ${label}` : label, await probe(p, dir), packages);
    };
    let trace = '';
    let all = '';
    if (traceGc || promoted || sampleHeap)
      svc.process.child.stdout?.on('data', (d: Buffer) => {
        trace += d.toString('utf8');
        all += d.toString('utf8');
      });
    try {
      await new Promise((r) => setTimeout(r, 3000));
      await probeAll('idle', true);
      trace = '';
      if (saturate > 0) {
        // As the bench runs before its paced ladder: c=32 against the 0 ms upstream, non-stream then stream.
        const fast = { url: svc.url, headers: svc.headers, connections: 32, seconds: saturate };
        if (sampleHeap) await heapSample(pid, dir);
        const a = await autocannon({ ...fast, body: chatBody(svc.model(0), false) });
        // Let the request log's last lines of the phase out (it flushes every 200 ms).
        await new Promise((r) => setTimeout(r, 400));
        const sampleA = sampleHeap ? await heapSample(pid, dir) : null;
        const traceA = trace;
        trace = '';
        if (sampleHeap) await heapSample(pid, dir);
        const b = await runClient({
          url: svc.url,
          headers: svc.headers,
          body: chatBody(svc.model(0), true),
          concurrency: 32,
          durationMs: saturate * 1000,
          warmupMs: 1000,
        });
        await new Promise((r) => setTimeout(r, 400));
        const sampleB = sampleHeap ? await heapSample(pid, dir) : null;
        const traceB = trace;
        console.log(
          `\nc=32 for ${saturate} s each: ${a.requestsPerSecond.toFixed(0)} req/s non-stream, ${b.requestsPerSecond.toFixed(0)} streams/s; ` +
            pids.map(([name, p]) => `${name} RSS ${rssMiB(p)?.toFixed(1) ?? '—'} MiB`).join(', '),
        );
        if (traceGc) {
          console.log('  during the c=32 phases:');
          gcSummary(`=== load\n${traceA}\n${traceB}\n=== end`);
        }
        const calls = (t: string): number => t.split('\n').filter((l) => l.includes('"msg":"request"')).length;
        if (promoted) {
          promotedSummary('c=32 non-stream', traceA, saturate);
          promotedSummary('c=32 stream', traceB, saturate);
        }
        printSites('c=32 non-stream', sampleA, calls(traceA));
        printSites('c=32 stream', sampleB, calls(traceB));
      }
      trace = '';
      const rss = pids.map(([, p]) => sampleRss(p, 250));
      const r = await runClient({
        url: svc.url,
        headers: svc.headers,
        body: chatBody(svc.model(60), stream),
        rate,
        durationMs: seconds * 1000,
        warmupMs: 2000,
      });
      const samples = rss.map((s) => s.stop());
      const traced = trace;
      console.log(
        `\n${rate} req/s ${stream ? 'stream' : 'non-stream'} for ${seconds} s: ${r.requestsPerSecond.toFixed(0)} answered, ` +
          `p50 ${r.latency.p50.toFixed(1)} ms, p99 ${r.latency.p99.toFixed(1)} ms, ${r.errors} failed; ` +
          pids
            .map(
              ([name], i) =>
                `${name} RSS max ${Math.max(...(samples[i] ?? [])).toFixed(1)} MiB, last ${samples[i]?.at(-1)?.toFixed(1) ?? '—'} MiB`,
            )
            .join('; '),
      );
      if (promoted) promotedSummary(`${rate} req/s`, traced, seconds + 2);
      await probeAll('after the load', false);
      if (traceGc) {
        gcSummary(`=== load\n${traced}\n=== end`);
        // The whole trace (and the lines of any other --node-args tracing flag), to read further.
        const file = path.join(os.tmpdir(), `svc-memory-trace-${pid}.txt`);
        fs.writeFileSync(file, all);
        console.log(`  the whole trace: ${file}`);
      }
    } finally {
      const calls = await svc.closeAndCheck();
      console.log(`\nsvc billed ${calls} calls exactly (wallet charged == usage records, nothing held)`);
    }
  } finally {
    await upstream.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    killChildren();
    process.exit(1);
  },
);
