// `svc serve --workers 2` beside one worker, and the bare passthrough proxy run the same two ways
// (node:cluster on one port), so that the ratio stays honest: chat non-stream and stream against a
// 0 ms upstream at 32 connections (autocannon; streams with ./loadgen). svc's books are checked
// after each run (wallet charged == usage records, nothing held), the workers' run included.
// Alone: `npm run bench -- --only workers [--quick]`.
import os from 'node:os';
import { autocannon } from '../lib/autocannon';
import { childPids, processCpuMicros, selfAndReapedMicros, treeCpuMicros } from '../lib/cpu';
import { runClient } from '../lib/loadgen';
import { chatBody, startProxyPeer, startSvcPeer, startUpstream, VARIANTS, type Peer, type SvcPeer } from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const CONNECTIONS = 32;
const CHUNKS = 16;
export const WORKERS_NON_STREAM = `workers: chat non-stream, upstream 0 ms, c=${CONNECTIONS}`;
export const WORKERS_STREAM = `workers: chat stream (${CHUNKS} chunks), upstream 0 ms, c=${CONNECTIONS}`;
export const ONE_WORKER = 'svc serve --workers 1';
export const WORKERS_CPU = `workers: CPU per answered request, chat non-stream, c=${CONNECTIONS}`;

/** CPU (µs) so far of a peer's processes, the fake upstream and the load generator. */
interface CpuReading {
  readonly server: number;
  readonly primary: number;
  readonly workers: ReadonlyMap<number, number>;
  readonly upstream: number;
  readonly load: number;
}

function readCpu(pid: number, upstreamPid: number): CpuReading | undefined {
  const server = treeCpuMicros([pid]);
  const primary = processCpuMicros(pid);
  const upstream = treeCpuMicros([upstreamPid]);
  const load = selfAndReapedMicros();
  if (server === null || primary === null || upstream === null || load === null) return undefined;
  const workers = new Map<number, number>();
  for (const child of childPids(pid)) workers.set(child, processCpuMicros(child) ?? 0);
  return { server, primary, workers, upstream, load };
}

/**
 * Where the CPU of one measurement went, per answered request: the server (its primary and each
 * worker), the fake upstream and the load generator (autocannon, a child of the bench), and the
 * throughput the machine's CPUs would allow if nothing else ran: CPUs × 1 s over the sum.
 */
function cpuBreakdown(variant: string, before: CpuReading, after: CpuReading, answered: number): number {
  const per = (a: number, b: number): number => (b - a) / answered;
  const server = per(before.server, after.server);
  const upstream = per(before.upstream, after.upstream);
  const load = per(before.load, after.load);
  const workers = [...after.workers].map(([pid, end]) => per(before.workers.get(pid) ?? 0, end));
  const cpus = os.availableParallelism();
  const ceiling = (cpus * 1e6) / (server + upstream + load);
  console.log(
    `  ${variant}: CPU µs per request: server ${server.toFixed(0)} (primary ${per(before.primary, after.primary).toFixed(0)}${
      workers.length > 0 ? `, workers ${workers.map((w) => w.toFixed(0)).join(' + ')}` : ''
    }), upstream ${upstream.toFixed(0)}, load generator ${load.toFixed(0)}; ${cpus} CPUs allow at most ${ceiling.toFixed(0)} req/s`,
  );
  return server;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 2;
  const upstream = await startUpstream(CHUNKS);
  const rows: BenchRow[] = [];
  const starters: [string, () => Promise<Peer>][] = [
    [ONE_WORKER, () => startSvcPeer(upstream.baseUrl, { SVC_WORKERS: '1' }, ONE_WORKER)],
    [VARIANTS.svcWorkers, () => startSvcPeer(upstream.baseUrl, { SVC_WORKERS: '2' }, VARIANTS.svcWorkers)],
    ['bare passthrough proxy, 1 worker', () => startProxyPeer(upstream.baseUrl, 1)],
    [VARIANTS.proxyWorkers, () => startProxyPeer(upstream.baseUrl, 2)],
  ];
  try {
    for (const [variant, start] of starters) {
      let peer: Peer | undefined;
      const measured: BenchRow[] = [];
      try {
        peer = await start();
        const fast = { url: peer.url, headers: peer.headers, connections: CONNECTIONS };
        await autocannon({ ...fast, body: chatBody(peer.model(0), false), seconds: warmup });
        const cpuBefore = peer.pid === null ? undefined : readCpu(peer.pid, upstream.pid);
        const load = await autocannon({ ...fast, body: chatBody(peer.model(0), false), seconds });
        const cpuAfter = peer.pid === null ? undefined : readCpu(peer.pid, upstream.pid);
        if (cpuBefore !== undefined && cpuAfter !== undefined && load.total > 0)
          measured.push({
            scenario: WORKERS_CPU,
            variant,
            metric: 'CPU per request',
            value: cpuBreakdown(variant, cpuBefore, cpuAfter, load.total),
            unit: 'µs',
          });
        measured.push({
          scenario: WORKERS_NON_STREAM,
          variant,
          metric: 'throughput',
          value: load.requestsPerSecond,
          unit: 'req/s',
        });
        const stream = await runClient({
          url: peer.url,
          headers: peer.headers,
          body: chatBody(peer.model(0), true),
          durationMs: seconds * 1000,
          warmupMs: warmup * 1000,
          concurrency: CONNECTIONS,
        });
        if (stream.errors > 0 || stream.ok === 0)
          opts.fail(
            `workers ${variant} stream`,
            new Error(`${stream.errors} failed: ${stream.firstError ?? 'no answer'}`),
          );
        else
          measured.push({
            scenario: WORKERS_STREAM,
            variant,
            metric: 'throughput',
            value: stream.requestsPerSecond,
            unit: 'req/s',
          });
        console.log(
          `  ${variant}: ${load.requestsPerSecond.toFixed(0)} req/s non-stream, ${stream.requestsPerSecond.toFixed(0)} streams/s`,
        );
      } catch (error) {
        opts.fail(`workers ${variant}`, error);
      } finally {
        try {
          if (peer !== undefined && peer.name === 'svc') {
            const calls = await (peer as SvcPeer).closeAndCheck();
            console.log(`  ${variant} billed ${calls} calls exactly (wallet charged == usage records, nothing held)`);
          } else await peer?.close();
          rows.push(...measured);
        } catch (error) {
          // A svc whose books do not balance has no numbers worth showing.
          opts.fail(`workers ${variant} books`, error);
        }
      }
    }
  } finally {
    await upstream.stop();
  }
  return rows;
}
