// Gateway overhead of the OpenAI-compatible API: the same chat completions, non-streaming and
// streaming, sent four ways to the same fake upstream (bench/lib/upstream.ts): directly; through a
// bare Node passthrough proxy; through Portkey's gateway 1.15.2; and through svc as `svc serve`
// runs it (auth, rate limit, wallet hold, upstream, settle, usage record), and split as `svc core`
// + `svc gateway` run it. Each is a server process of its own, all running at once, measured by
// load clients in other processes:
// - throughput at 32 connections against a 0 ms upstream (autocannon; streams with ./loadgen for
//   chunks per second and time to first token), in rounds (3; 1 with --quick), every peer in turn,
//   the order reversed every other round, each figure the median of its rounds;
// - latency against a 60 ms upstream at paced rates (./loadgen, open loop), which makes the
//   latency-vs-load chart and the added latency at 500 req/s (p50, p99; TTFT for streams);
// - each server's RSS while it serves 500 req/s (its highest sample, and the last, right after the
//   load), and inside each svc process the event loop's delay over the same phase
//   (./loop-probe.cjs, preloaded into svc's processes only, recording only during that phase);
// these last two peer by peer, one after the other. CPU per answered request is read for every
// peer with a server process (./cpu.ts). The split's figures are its two processes' together (RSS:
// their sum at each sample; CPU: both) and each process's apart, under a variant of its own.
// svc's books are checked after it stops: wallet charged == usage records, nothing held.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { autocannon } from '../lib/autocannon';
import { cpuMeter } from '../lib/cpu';
import { sampleRssOf } from '../lib/children';
import { loopProbe, startLoopDelay, type LoopDelay } from '../lib/loop-delay';
import { runClient, type ClientResult, type ClientSpec } from '../lib/loadgen';
import {
  chatBody,
  directPeer,
  startPortkeyPeer,
  startProxyPeer,
  startSvcPeer,
  startUpstream,
  VARIANTS,
  type Peer,
  type SvcPeer,
} from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const CONNECTIONS = 32;
const CHUNKS = 16;
const SLOW_MS = 60;
const RATES = [250, 500, 1000, 2000, 4000] as const;
const KEY_RATE = 500;

/** µs of process CPU (children included) per answered request at c=32, non-stream and stream. */
export interface Cpu {
  nonStream?: number;
  stream?: number;
}

/** What was measured of one peer (exported for test/bench). */
export interface PeerResult {
  readonly peer: Peer;
  nonStream?: number;
  /** CPU per request by variant: the peer's (all its processes) first, then each process's. */
  readonly cpu: Map<string, Cpu>;
  stream?: ClientResult;
  readonly paced: Map<number, ClientResult>;
  streamPaced?: ClientResult;
  /** RSS (MiB) at 500 req/s by variant, as `cpu`: the highest sample and the last, right after the load. */
  readonly rss: Map<string, { readonly max: number; readonly after: number }>;
  /** The event loop's delay inside each svc process over the 500 req/s phase, by variant. */
  readonly loop: Map<string, LoopDelay>;
}

/** The processes of a peer each reported apart (the split's two), or none. */
const processesOf = (peer: Peer): readonly { variant: string; pid: number }[] => peer.processes ?? [];

/** What CPU is read over, by variant: the peer's server processes together, then each apart. */
function meters(peer: Peer): [string, readonly number[]][] {
  const all = peer.pids ?? (peer.pid === null ? [] : [peer.pid]);
  if (all.length === 0) return [];
  return [[peer.variant, all], ...processesOf(peer).map((p): [string, number[]] => [p.variant, [p.pid]])];
}

function spec(peer: Peer, stream: boolean, ms: number, run: Partial<ClientSpec>, opts: Durations): ClientSpec {
  return {
    url: peer.url,
    headers: peer.headers,
    body: chatBody(peer.model(ms), stream),
    durationMs: opts.ms,
    warmupMs: opts.warmupMs,
    ...run,
  };
}

interface Durations {
  readonly ms: number;
  readonly warmupMs: number;
}

/** A paced or closed run whose failures are reported (and whose numbers are then not kept). */
async function client(peer: Peer, label: string, s: ClientSpec, opts: BenchOptions): Promise<ClientResult | undefined> {
  const r = await runClient(s);
  if (r.errors > 0 || r.ok === 0) {
    opts.fail(
      `openai ${nameOf(peer)} ${label}`,
      new Error(`${r.errors} failed of ${r.ok + r.errors}: ${r.firstError ?? 'no answer'}`),
    );
    return undefined;
  }
  return r;
}

/** One round of throughput at 32 connections (0 ms upstream): non-stream, then stream, with the CPU of each. */
export interface Throughput {
  readonly nonStream: number;
  readonly stream?: ClientResult;
  readonly cpu: ReadonlyMap<string, Cpu>;
}

async function throughput(peer: Peer, opts: BenchOptions, d: Durations, warm: boolean): Promise<Throughput> {
  const seconds = d.ms / 1000;
  const fast = { url: peer.url, headers: peer.headers, connections: CONNECTIONS };
  if (warm)
    await autocannon({ ...fast, body: chatBody(peer.model(0), false), seconds: Math.max(1, d.warmupMs / 1000) });
  const cpu = new Map<string, Cpu>(meters(peer).map(([variant]) => [variant, {}]));
  const nonStreamCpu = meters(peer).map(([variant, pids]) => [variant, cpuMeter(pids)] as const);
  const load = await autocannon({ ...fast, body: chatBody(peer.model(0), false), seconds });
  for (const [variant, meter] of nonStreamCpu) {
    const v = meter.perRequest(load.requestsPerSecond * seconds);
    if (v !== undefined) (cpu.get(variant) ?? {}).nonStream = v;
  }
  const streamCpu = meters(peer).map(([variant, pids]) => [variant, cpuMeter(pids)] as const);
  const stream = await client(peer, 'stream c=32', spec(peer, true, 0, { concurrency: CONNECTIONS }, d), opts);
  for (const [variant, meter] of streamCpu) {
    const v = stream === undefined ? undefined : meter.perRequest(stream.requestsPerSecond * seconds);
    if (v !== undefined) (cpu.get(variant) ?? {}).stream = v;
  }
  console.log(
    `  ${nameOf(peer)}: ${load.requestsPerSecond.toFixed(0)} req/s non-stream, ${stream?.requestsPerSecond.toFixed(0) ?? '—'} streams/s (${stream?.chunksPerSecond?.toFixed(0) ?? '—'} chunks/s) at c=${CONNECTIONS}`,
  );
  return { nonStream: load.requestsPerSecond, cpu, ...(stream === undefined ? {} : { stream }) };
}

/** The middle value (the lower middle of an even count). */
function middle<T>(values: readonly T[], by: (v: T) => number): T | undefined {
  const sorted = [...values].sort((x, y) => by(x) - by(y));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** A peer's throughput over the rounds: each figure the median of its rounds. */
export function medianOf(result: PeerResult, rounds: readonly Throughput[]): void {
  const nonStream = middle(rounds, (r) => r.nonStream);
  if (nonStream !== undefined) result.nonStream = nonStream.nonStream;
  const stream = middle(
    rounds.filter((r) => r.stream !== undefined),
    (r) => r.stream?.requestsPerSecond ?? 0,
  )?.stream;
  if (stream !== undefined) result.stream = stream;
  // Each CPU figure is the median of its own rounds.
  for (const [variant] of rounds[0]?.cpu ?? []) {
    const of = (pick: (c: Cpu) => number | undefined): number | undefined =>
      middle(
        rounds.map((r) => pick(r.cpu.get(variant) ?? {})).filter((v): v is number => v !== undefined),
        (v) => v,
      );
    const cpu: Cpu = {};
    const nonStreamCpu = of((c) => c.nonStream);
    if (nonStreamCpu !== undefined) cpu.nonStream = nonStreamCpu;
    const streamCpu = of((c) => c.stream);
    if (streamCpu !== undefined) cpu.stream = streamCpu;
    result.cpu.set(variant, cpu);
  }
}

/** How the log names a peer: svc's variants apart. */
const nameOf = (peer: Peer): string => (peer.name === 'svc' ? peer.variant : peer.name);

/**
 * The latency ladder against the 60 ms upstream, the paced stream, and at 500 req/s the RSS and
 * (svc's processes, whose probe answers into `loopDir`) the event loop's delay.
 */
async function latencies(result: PeerResult, opts: BenchOptions, d: Durations, loopDir: string): Promise<void> {
  const { peer } = result;
  // Each process apart (the split's two) or the peer's one process.
  const processes =
    processesOf(peer).length > 0
      ? processesOf(peer)
      : peer.pid === null
        ? []
        : [{ variant: peer.variant, pid: peer.pid }];
  for (const rate of RATES) {
    const key = rate === KEY_RATE && processes.length > 0;
    const loops =
      key && peer.name === 'svc'
        ? await Promise.all(processes.map(async (p) => [p.variant, await startLoopDelay(p.pid, loopDir)] as const))
        : [];
    const rss = key
      ? sampleRssOf(
          processes.map((p) => p.pid),
          250,
        )
      : null;
    const r = await client(peer, `non-stream @${rate} req/s`, spec(peer, false, SLOW_MS, { rate }, d), opts);
    const samples = rss?.stop() ?? [];
    if (samples.length > 0) {
      const sum = (s: readonly number[]): number => s.reduce((a, b) => a + b, 0);
      // The peer's: both processes at each moment; then each process apart.
      result.rss.set(peer.variant, { max: Math.max(...samples.map(sum)), after: sum(samples.at(-1) ?? []) });
      if (processes.length > 1)
        processes.forEach((p, i) =>
          result.rss.set(p.variant, {
            max: Math.max(...samples.map((s) => s[i] ?? 0)),
            after: samples.at(-1)?.[i] ?? 0,
          }),
        );
    }
    for (const [variant, loop] of loops) {
      const delay = await loop.stop();
      if (delay === null) {
        opts.fail(`openai ${variant} event-loop delay`, new Error('the loop probe did not answer'));
        continue;
      }
      result.loop.set(variant, delay);
      console.log(
        `  ${variant} @${rate} req/s: event-loop delay p99 ${delay.p99Ms.toFixed(2)} ms, max ${delay.maxMs.toFixed(1)} ms (${delay.count} ticks of 1 ms)`,
      );
    }
    if (r === undefined) break;
    result.paced.set(rate, r);
    console.log(
      `  ${nameOf(peer)} @${rate} req/s: p50 ${r.latency.p50.toFixed(2)} ms, p99 ${r.latency.p99.toFixed(2)} ms, ${r.requestsPerSecond.toFixed(0)} req/s answered${r.dropped > 0 ? `, ${r.dropped} not sent (1024 in flight)` : ''}`,
    );
    // Past saturation, a higher rate only queues longer: the chart stops at the knee.
    if (r.dropped > 0 || r.requestsPerSecond < 0.8 * rate) {
      console.log(`  ${nameOf(peer)} saturated at ${rate} req/s; higher rates skipped`);
      break;
    }
  }
  const sp = await client(peer, `stream @${KEY_RATE} req/s`, spec(peer, true, SLOW_MS, { rate: KEY_RATE }, d), opts);
  if (sp !== undefined) {
    result.streamPaced = sp;
    console.log(
      `  ${nameOf(peer)} stream @${KEY_RATE} req/s: TTFT p50 ${sp.ttft?.p50.toFixed(2) ?? '—'} ms, p99 ${sp.ttft?.p99.toFixed(2) ?? '—'} ms`,
    );
  }
}

/** The rows of the report, scenario by scenario (exported for test/bench). */
export function rowsOf(results: readonly PeerResult[]): BenchRow[] {
  const out: BenchRow[] = [];
  const fast = `chat non-stream, upstream 0 ms, c=${CONNECTIONS}`;
  const streamed = `chat stream (${CHUNKS} chunks), upstream 0 ms, c=${CONNECTIONS}`;
  for (const { peer, nonStream } of results)
    if (nonStream !== undefined)
      out.push({ scenario: fast, variant: peer.variant, metric: 'throughput', value: nonStream, unit: 'req/s' });
  for (const { peer, stream } of results) {
    if (stream === undefined) continue;
    const variant = peer.variant;
    out.push({ scenario: streamed, variant, metric: 'throughput', value: stream.requestsPerSecond, unit: 'req/s' });
    out.push({ scenario: streamed, variant, metric: 'chunks', value: stream.chunksPerSecond ?? 0, unit: 'chunks/s' });
    if (stream.ttft !== null)
      out.push({ scenario: streamed, variant, metric: 'TTFT p50', value: stream.ttft.p50, unit: 'ms' });
  }
  for (const rate of RATES) {
    const scenario = `chat non-stream, upstream ${SLOW_MS} ms, @${rate} req/s`;
    for (const { peer, paced } of results) {
      const r = paced.get(rate);
      if (r === undefined) continue;
      const variant = peer.variant;
      out.push(
        { scenario, variant, metric: 'latency p50', value: r.latency.p50, unit: 'ms', load: rate },
        { scenario, variant, metric: 'latency p99', value: r.latency.p99, unit: 'ms', load: rate },
        { scenario, variant, metric: 'answered', value: r.requestsPerSecond, unit: 'req/s' },
      );
    }
  }
  const direct = results.find((r) => r.peer.name === 'direct');
  const base = direct?.paced.get(KEY_RATE);
  const baseStream = direct?.streamPaced;
  for (const { peer, paced, streamPaced } of results) {
    if (peer.name === 'direct') continue;
    const r = paced.get(KEY_RATE);
    const scenario = `chat added latency vs direct @${KEY_RATE} req/s`;
    if (r !== undefined && base !== undefined)
      out.push(
        { scenario, variant: peer.variant, metric: 'added p50', value: r.latency.p50 - base.latency.p50, unit: 'ms' },
        { scenario, variant: peer.variant, metric: 'added p99', value: r.latency.p99 - base.latency.p99, unit: 'ms' },
      );
    if (streamPaced?.ttft && baseStream?.ttft)
      out.push(
        {
          scenario,
          variant: peer.variant,
          metric: 'added TTFT p50',
          value: streamPaced.ttft.p50 - baseStream.ttft.p50,
          unit: 'ms',
        },
        {
          scenario,
          variant: peer.variant,
          metric: 'added TTFT p99',
          value: streamPaced.ttft.p99 - baseStream.ttft.p99,
          unit: 'ms',
        },
      );
  }
  for (const { loop } of results) {
    const scenario = `event-loop delay inside svc @${KEY_RATE} req/s non-stream (1 ms resolution)`;
    for (const [variant, delay] of loop)
      out.push(
        { scenario, variant, metric: 'loop delay p99', value: delay.p99Ms, unit: 'ms' },
        { scenario, variant, metric: 'loop delay max', value: delay.maxMs, unit: 'ms' },
      );
  }
  for (const { cpu } of results) {
    const scenario = `CPU per answered request, upstream 0 ms, c=${CONNECTIONS}`;
    for (const [variant, { nonStream, stream }] of cpu) {
      if (nonStream !== undefined)
        out.push({ scenario, variant, metric: 'non-stream', value: nonStream, unit: 'µs CPU/req' });
      if (stream !== undefined) out.push({ scenario, variant, metric: 'stream', value: stream, unit: 'µs CPU/req' });
    }
  }
  for (const { rss } of results) {
    const scenario = `memory at ${KEY_RATE} req/s non-stream`;
    for (const [variant, { max, after }] of rss)
      out.push(
        { scenario, variant, metric: 'RSS (max)', value: max, unit: 'MiB' },
        { scenario, variant, metric: 'RSS after the load', value: after, unit: 'MiB' },
      );
  }
  return out;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const d: Durations = opts.quick ? { ms: 3_000, warmupMs: 1_000 } : { ms: 10_000, warmupMs: 2_000 };
  const upstream = await startUpstream(CHUNKS);
  // svc's processes preload the loop probe (idle but during the 500 req/s phase), answering here.
  const loopDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-loop-'));
  const probe = loopProbe(loopDir);
  // Every load client connects from 127.0.0.1, and ./loadgen holds up to 1,024 calls in flight:
  // svc's default cap of 256 connections per address (what the tenants scenario measures) would
  // answer 503 once a stall piles calls up, where Portkey and the proxy, which have no such cap,
  // queue them; the latency ladder then ends in failures instead of at its saturation.
  const limits = '  max_connections_per_address: 4096\n';
  const svcPeer = (env: NodeJS.ProcessEnv, variant: string, split = false): Promise<Peer> =>
    startSvcPeer(upstream.baseUrl, { ...probe.env, ...env }, variant, '', probe.nodeArgs, split, limits);
  const results: PeerResult[] = [];
  const starters: [string, () => Promise<Peer>][] = [
    ['direct', () => Promise.resolve(directPeer(upstream.baseUrl))],
    ['proxy', () => startProxyPeer(upstream.baseUrl)],
    ['portkey', () => startPortkeyPeer(upstream.baseUrl)],
    ['svc', () => svcPeer({}, VARIANTS.svc)],
    // The same svc with the fast path off (core/chat/fast-path.ts): every chunk translated, as
    // before issue 35; what the pass-through buys.
    ['svc translated', () => svcPeer({ SVC_FAST_PATH: '0' }, VARIANTS.svcTranslated)],
    // The same svc with its adapters reaching the core over a real gRPC hop on loopback (as split
    // deployments do), instead of the in-process channel: what the hop costs.
    ['svc grpc', () => svcPeer({ SVC_SERVE_TRANSPORT: 'grpc' }, VARIANTS.svcGrpc)],
    // The topology a scaled-out deployment runs (the Helm chart, Compose): `svc core` and `svc
    // gateway` as two processes, the gateway calling the core over loopback gRPC. Its books are
    // checked like the others' (gateway stopped first, then the core).
    ['svc split', () => svcPeer({ SVC_CORE_TUNNELS: '4' }, VARIANTS.svcSplit, true)],
    // The same split with the gateway making a gRPC call per call instead of sending them as
    // frames on its tunnels (issue 46 point 1): what the tunnel buys, in the same run.
    ['svc split direct', () => svcPeer({ SVC_CORE_TUNNELS: '0' }, VARIANTS.svcSplitDirect, true)],
    // The same svc with the core in a worker thread: what a second CPU core buys.
    // (The loop probe reads its main thread, the gateway's; the core thread's loop is not read.)
    ['svc core thread', () => svcPeer({ SVC_CORE_THREAD: '1' }, VARIANTS.svcThread)],
  ];
  // Every peer runs at once, idle but for the one measured, so that throughput is measured in
  // rounds, each peer in turn (the order reversed every other round), and each figure is the
  // median of its rounds: a peer measured right after another, or while the machine drifts, is
  // not judged on that one window (measured one after the other, the first svc after Portkey
  // read 25–30 % below the same build in the run's other scenarios and in every paired run).
  // SVC_BENCH_ROUNDS sets another count (a quick check of the rounds themselves, say).
  const rounds = Number(process.env['SVC_BENCH_ROUNDS'] ?? (opts.quick ? 1 : 3));
  const started: { name: string; peer: Peer; throughputs: Throughput[] }[] = [];
  try {
    for (const [name, start] of starters) {
      try {
        started.push({ name, peer: await start(), throughputs: [] });
      } catch (error) {
        opts.fail(`openai ${name}`, error);
      }
    }
    for (let round = 0; round < rounds; round++) {
      if (rounds > 1) console.log(`  throughput round ${round + 1} of ${rounds}`);
      for (const entry of round % 2 === 0 ? started : [...started].reverse()) {
        try {
          entry.throughputs.push(await throughput(entry.peer, opts, d, round === 0));
        } catch (error) {
          opts.fail(`openai ${entry.name} throughput`, error);
        }
      }
    }
    for (const { name, peer, throughputs } of started) {
      const result: PeerResult = { peer, paced: new Map(), cpu: new Map(), rss: new Map(), loop: new Map() };
      medianOf(result, throughputs);
      try {
        await latencies(result, opts, d, loopDir);
        results.push(result);
      } catch (error) {
        opts.fail(`openai ${name}`, error);
      }
    }
  } finally {
    // Each peer stops after the rest of its measurements (svc's books checked as it stops).
    for (const { name, peer } of started) {
      try {
        if (peer.name === 'svc') {
          const calls = await (peer as SvcPeer).closeAndCheck();
          console.log(
            `  ${peer.variant}: billed ${calls} calls exactly (wallet charged == usage records, nothing held)`,
          );
        } else await peer.close();
      } catch (error) {
        // A svc whose books do not balance has no numbers worth showing.
        opts.fail(`openai ${name} books`, error);
        const at = results.findIndex((r) => r.peer === peer);
        if (at !== -1) results.splice(at, 1);
      }
    }
    await upstream.stop();
    fs.rmSync(loopDir, { recursive: true, force: true });
  }
  return rowsOf(results);
}
