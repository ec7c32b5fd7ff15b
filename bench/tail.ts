// What `svc serve`'s event loop stalls on at a paced rate (issue 46, point 3): `npx tsx
// bench/tail.ts [--rate 500] [--seconds 30] [--rounds 3] [--base DIR] [--profile] [--alloc] [--stalls N] [--wall]
// [--node-args '…']`. The bench's fake upstream (60 ms) and `svc serve` set up as the bench sets
// it up, with bench/lib/tail-probe.cjs preloaded; each round loads the upstream directly (the
// base latency), then svc, open loop at the rate, and prints the added p50/p99 (svc's minus the
// direct one's), the loop delay inside svc (p99, p99.9, max), its GC pauses by kind, the SQLite
// calls that took the most time, and the stalls over 3 ms with what overlapped each (GC, SQLite,
// and with --profile the functions V8's sampling profiler found in them; with --alloc the bytes allocated per request
// by site, V8's sampling heap profiler counting what the GCs collected too). `--base DIR` runs a
// second `svc serve` from another checkout (built), loaded in turn with this one (A B, B A, …),
// both with this checkout's probe. CPU per answered request (/proc) and the load average too.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { flag, median, numberFlag } from './lib/ab';
import { killChildren, ROOT } from './lib/children';
import { cpuMeter } from './lib/cpu';
import { runClient, type ClientResult } from './lib/loadgen';
import type * as Peers from './lib/peers';

interface Stall {
  readonly start: number;
  readonly ms: number;
  readonly cpuMs: number;
  readonly threadCpuMs: number | null;
  readonly runqMs: number | null;
  readonly involuntary: number;
  readonly voluntary: number;
  readonly gcMs: number;
  readonly gc: string[];
  readonly sqlMs: number;
  readonly sql: string[];
  readonly sqlCalls: number;
  readonly samples?: number;
  readonly self?: string[];
  readonly svc?: string[];
}
interface Report {
  readonly seq: number;
  readonly state: string;
  readonly seconds: number;
  readonly ticks: number;
  readonly loop: { count: number; p50Ms: number; p99Ms: number; p999Ms: number; maxMs: number };
  readonly gc: Record<string, { count: number; ms: number; maxMs: number; over2: number }>;
  readonly sql: { sql: string; count: number; ms: number; maxMs: number; over1: number }[];
  readonly stalls: Stall[];
  readonly alloc: {
    readonly total: number;
    readonly self: { k: string; bytes: number }[];
    readonly svc: { k: string; bytes: number }[];
    readonly packages: { k: string; bytes: number }[];
  } | null;
}

const PROBE = path.join(ROOT, 'bench/lib/tail-probe.cjs');

async function ask(pid: number, dir: string): Promise<Report> {
  const file = path.join(dir, `tail-${pid}.json`);
  const read = (): Report | null => {
    try {
      return JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
    } catch {
      return null;
    }
  };
  const last = read()?.seq ?? 0;
  process.kill(pid, 'SIGWINCH');
  for (let i = 0; i < 2400; i++) {
    const r = read();
    if (r !== null && r.seq > last) return r;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the tail probe of ${pid} did not answer`);
}

const f = (n: number, d = 1): string => n.toFixed(d);

type WorkerKinds = Record<string, { count: number; ms: number; maxMs: number; over1: number; last: number[] }>;

/** The checkpoints of svc's SQLite thread so far (the probe's worker side), by pragma. */
function workerCheckpoints(pid: number, dir: string): WorkerKinds {
  const all: WorkerKinds = {};
  for (const file of fs.readdirSync(dir).filter((name) => name.startsWith(`tail-${pid}-worker-`))) {
    try {
      Object.assign(all, (JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as { kinds: WorkerKinds }).kinds);
    } catch {
      // Being rewritten: read at the next round.
    }
  }
  return all;
}

async function main(): Promise<void> {
  const rate = numberFlag('--rate', 500);
  const seconds = numberFlag('--seconds', 30);
  const rounds = numberFlag('--rounds', 3);
  const showStalls = numberFlag('--stalls', 12);
  const baseDir = flag('--base');
  const nodeArgs = (flag('--node-args') ?? '').split(' ').filter((a) => a !== '');
  process.env['SVC_BENCH_NO_BUILD'] = '1';
  /* eslint-disable @typescript-eslint/no-require-imports */
  const here = require('./lib/peers') as typeof Peers;
  const there = baseDir === undefined ? undefined : (require(path.resolve(baseDir, 'bench/lib/peers')) as typeof Peers);
  /* eslint-enable @typescript-eslint/no-require-imports */
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-tail-'));
  const env = {
    SVC_TAIL_PROBE_DIR: dir,
    ...(process.argv.includes('--profile') ? { SVC_TAIL_PROFILE: '1' } : {}),
    ...(process.argv.includes('--alloc') ? { SVC_TAIL_ALLOC: '1' } : {}),
  };
  const upstream = await here.startUpstream(16);
  const sides: [string, Peers.SvcPeer][] = [];
  try {
    sides.push(['this', await here.startSvcPeer(upstream.baseUrl, env, undefined, '', [...nodeArgs, '-r', PROBE])]);
    if (there !== undefined)
      sides.push(['base', await there.startSvcPeer(upstream.baseUrl, env, undefined, '', [...nodeArgs, '-r', PROBE])]);
    const direct = here.directPeer(upstream.baseUrl);
    const load = (url: string, headers: Record<string, string>, body: string, ms: number): Promise<ClientResult> =>
      runClient({ url, headers, body, rate, durationMs: ms, warmupMs: 500 });
    // Warm-up: each svc compiles its hot code before anything is measured.
    for (const [, peer] of sides) await load(peer.url, peer.headers, here.chatBody(peer.model(60), false), 8000);
    const ownRows: { name: string; round: number; count: number; kinds: Map<string, { n: number; ms: number }> }[] = [];
    const results = new Map<string, { added99: number[]; added50: number[]; loop99: number[]; loopMax: number[]; cpu: number[] }>();
    for (let round = 1; round <= rounds; round++) {
      const order = round % 2 === 1 ? sides : [...sides].reverse();
      for (const [name, peer] of order) {
        const base = await load(direct.url, direct.headers, here.chatBody(direct.model(60), false), seconds * 1000);
        const pid = peer.pid ?? 0;
        await ask(pid, dir);
        const before = workerCheckpoints(pid, dir);
        const cpu = cpuMeter([pid]);
        const r = await load(peer.url, peer.headers, here.chatBody(peer.model(60), false), seconds * 1000);
        const perRequest = cpu.perRequest(r.ok + r.errors) ?? NaN;
        const report = await ask(pid, dir);
        const [l1, l5] = os.loadavg();
        const added99 = r.latency.p99 - base.latency.p99;
        const added50 = r.latency.p50 - base.latency.p50;
        const row = results.get(name) ?? { added99: [], added50: [], loop99: [], loopMax: [], cpu: [] };
        row.added99.push(added99);
        row.added50.push(added50);
        row.loop99.push(report.loop.p99Ms);
        row.loopMax.push(report.loop.maxMs);
        row.cpu.push(perRequest);
        results.set(name, row);
        console.log(
          `\nround ${round}, ${name}: ${r.ok} ok, ${r.errors} failed, ${r.dropped} dropped; p50 ${f(r.latency.p50)} / p99 ${f(r.latency.p99)} / max ${f(r.latency.max)} ms ` +
            `(direct ${f(base.latency.p50)} / ${f(base.latency.p99)} / ${f(base.latency.max)}); added p50 ${f(added50, 2)}, p99 ${f(added99, 2)} ms; ` +
            `CPU ${f(perRequest, 0)} µs/request; load average ${f(l1 ?? 0, 2)} ${f(l5 ?? 0, 2)}` +
            (r.firstError === null ? '' : `; first error: ${r.firstError.slice(0, 160)}`),
        );
        console.log(
          `  loop delay: p50 ${f(report.loop.p50Ms, 2)}, p99 ${f(report.loop.p99Ms, 2)}, p99.9 ${f(report.loop.p999Ms, 2)}, max ${f(report.loop.maxMs, 2)} ms; ` +
            `stalls > 3 ms: ${report.stalls.length} (${f(report.stalls.reduce((n, s) => n + s.ms, 0), 0)} ms)`,
        );
        console.log(
          `  GC: ${Object.entries(report.gc)
            .map(([k, g]) => `${k} ${g.count}× ${f(g.ms, 0)} ms (max ${f(g.maxMs, 2)}, ${g.over2} over 2 ms)`)
            .join('; ')}`,
        );
        console.log(
          `  SQLite, most time: ${report.sql
            .slice(0, 6)
            .map((s) => `${s.count}× ${f(s.ms, 0)} ms max ${f(s.maxMs, 2)} (${s.over1} > 1 ms) «${s.sql.slice(0, 60)}»`)
            .join('\n    ')}`,
        );
        const after = workerCheckpoints(pid, dir);
        console.log(
          `  the checkpointing thread: ${
            Object.entries(after)
              .map(([k, a]) => {
                const b = before[k] ?? { count: 0, ms: 0, last: [] };
                const n = a.count - b.count;
                return `${k} ${n}× ${f(a.ms - b.ms, 0)} ms${k.includes('PASSIVE') ? '' : ` [${a.last.slice(-Math.min(n, 12)).join(' ')}]`}`;
              })
              .join('; ') || 'nothing seen'
          }`,
        );
        const gcBound = report.stalls.filter((s) => s.gcMs >= s.ms / 2);
        const sqlBound = report.stalls.filter((s) => s.gcMs < s.ms / 2 && s.sqlMs >= s.ms / 2);
        console.log(
          `  stalls: ${gcBound.length} mostly GC (${f(gcBound.reduce((n, s) => n + s.ms, 0), 0)} ms), ${sqlBound.length} mostly SQLite (${f(sqlBound.reduce((n, s) => n + s.ms, 0), 0)} ms), ` +
            `${report.stalls.length - gcBound.length - sqlBound.length} other; ` +
            `${report.stalls.filter((s) => s.cpuMs < s.ms / 2).length} of all with less CPU than half their length (${f(report.stalls.filter((s) => s.cpuMs < s.ms / 2).reduce((n, s) => n + s.ms, 0), 0)} ms: off the CPU), ` +
            `CPU in all ${f(report.stalls.reduce((n, s) => n + s.cpuMs, 0), 0)} ms`,
        );
        // Net of the time the main thread waited, runnable, for a CPU (the machine's other load):
        // what the loop itself spent, on the CPU or blocked (I/O, a lock).
        const own = (s: Stall): number => s.ms - (s.runqMs ?? 0);
        const mine = report.stalls.filter((s) => own(s) > 3);
        const kind = (s: Stall): string =>
          s.gcMs >= own(s) / 2
            ? `GC (${s.gc.map((g) => g.split(' ')[0]).join('+')})`
            : s.sql.some((q) => q.includes('wal_checkpoint'))
              ? 'WAL checkpoint'
              : s.sqlMs >= own(s) / 2
                ? 'SQLite'
                : 'other';
        const kinds = new Map<string, { n: number; ms: number }>();
        for (const s of mine) {
          const k = kinds.get(kind(s)) ?? { n: 0, ms: 0 };
          k.n++;
          k.ms += own(s);
          kinds.set(kind(s), k);
        }
        ownRows.push({ name, round, count: mine.length, kinds });
        console.log(
          `  stalls over 3 ms net of run-queue waits: ${mine.length} (${f(mine.reduce((n, x) => n + own(x), 0), 0)} ms): ` +
            [...kinds].map(([k, v]) => `${k} ${v.n}× ${f(v.ms, 0)} ms`).join(', ') +
            `; run-queue waits in all stalls ${f(report.stalls.reduce((n, x) => n + (x.runqMs ?? 0), 0), 0)} ms`,
        );
        for (const s of [...mine].sort((a, b) => own(b) - own(a)).slice(0, showStalls))
          console.log(
            `    own ${f(own(s), 2)} of ${f(s.ms, 2)} ms (thread CPU ${f(s.threadCpuMs ?? NaN, 2)}): ${kind(s)}; GC [${s.gc.join(', ')}], SQLite ${f(s.sqlMs, 2)} [${s.sql.slice(0, 2).join(' | ')}]`,
          );
        for (const s of [...report.stalls].sort((a, b) => b.ms - a.ms).slice(0, process.argv.includes('--wall') ? showStalls : 0))
          console.log(
            `    ${f(s.ms, 2)} ms at ${f(s.start / 1000, 2)} s, CPU ${f(s.cpuMs, 1)} ms, switches ${s.involuntary} inv ${s.voluntary} vol: GC ${f(s.gcMs, 2)} [${s.gc.join(', ')}], SQLite ${f(s.sqlMs, 2)} in ${s.sqlCalls} [${s.sql.slice(0, 3).join(' | ')}]` +
              (s.samples === undefined ? '' : `; ${s.samples} samples: ${(s.self ?? []).slice(0, 4).join(', ')}; svc: ${(s.svc ?? []).slice(0, 3).join(', ')}`),
          );
        if (report.alloc !== null) {
          const a = report.alloc;
          const per = (bytes: number): string => `${f(bytes / (r.ok + r.errors) / 1024, 1)} KiB`;
          console.log(`  allocated (sampled): ${per(a.total)} per request; by package: ${a.packages.map((p) => `${p.k} ${per(p.bytes)}`).join(', ')}`);
          console.log(`  by allocating function:\n${a.self.slice(0, 20).map((x) => `    ${per(x.bytes)} ${x.k}`).join('\n')}`);
          console.log(`  by svc's deepest frame:\n${a.svc.slice(0, 20).map((x) => `    ${per(x.bytes)} ${x.k}`).join('\n')}`);
        }
        fs.writeFileSync(path.join(os.tmpdir(), `svc-tail-${name}-${round}.json`), JSON.stringify(report, null, 1));
      }
    }
    console.log('\nstalls over 3 ms net of run-queue waits, per round:');
    for (const r of ownRows)
      console.log(`  ${r.name} ${r.round}: ${r.count}: ${[...r.kinds].map(([k, v]) => `${k} ${v.n}× ${f(v.ms, 0)} ms`).join(', ')}`);
    console.log('\nmedians over the rounds:');
    for (const [name, r] of results)
      console.log(
        `  ${name}: added p50 ${f(median(r.added50), 2)} ms, added p99 ${f(median(r.added99), 2)} ms [${r.added99.map((x) => f(x, 1)).join(' ')}], ` +
          `loop p99 ${f(median(r.loop99), 2)} ms, loop max ${f(median(r.loopMax), 1)} ms [${r.loopMax.map((x) => f(x, 1)).join(' ')}], CPU ${f(median(r.cpu), 0)} µs/request`,
      );
  } finally {
    for (const [name, peer] of sides) {
      const calls = await peer.closeAndCheck();
      console.log(`${name}: svc billed ${calls} calls exactly`);
    }
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
