// CPU per answered request of two svc builds side by side (`npx tsx bench/ab-cpu.ts OTHER_CHECKOUT
// [--rounds N] [--seconds S] [--stream | --non-stream] [--grpc | --split]`): one fake upstream, `svc serve` from this checkout and from
// OTHER_CHECKOUT (e.g. a worktree of main, built), each loaded in turn (A B B A …) at 32
// connections, non-stream and stream; then the median µs of process CPU per answered request
// (/proc) and req/s of each (`--split`: of both processes, and of the gateway and the core apart).
// Both builds must be built (`npm run build` in each). Both svc's books are checked at the end.
import path from 'node:path';
import { autocannon } from './lib/autocannon';
import { killChildren } from './lib/children';
import { cpuMeter } from './lib/cpu';
import type * as ownPeers from './lib/peers';
import { chatBody, startSvcPeer, startUpstream, type SvcPeer } from './lib/peers';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

async function main(): Promise<void> {
  const other = process.argv[2];
  if (other === undefined || other.startsWith('--'))
    throw new Error('usage: bench/ab-cpu.ts OTHER_CHECKOUT [--rounds N] [--seconds S]');
  const rounds = arg('--rounds', 4);
  const seconds = arg('--seconds', 4);
  process.env['SVC_BENCH_NO_BUILD'] = '1';
  // The other checkout's bench library starts its own build of svc.
  const otherPeers = (await import(path.resolve(other, 'bench/lib/peers'))) as typeof ownPeers;
  const upstream = await startUpstream(16);
  // `--grpc` keeps the gRPC hop inside `svc serve`; `--split` runs `svc core` and `svc gateway`.
  const serveEnv: NodeJS.ProcessEnv = process.argv.includes('--grpc') ? { SVC_SERVE_TRANSPORT: 'grpc' } : {};
  const split = process.argv.includes('--split');
  const peers: [string, SvcPeer][] = [
    ['this', await startSvcPeer(upstream.baseUrl, serveEnv, undefined, '', [], split)],
    [
      path.basename(path.resolve(other)),
      await otherPeers.startSvcPeer(upstream.baseUrl, serveEnv, undefined, '', [], split),
    ],
  ];
  const cpu = new Map<string, number[]>();
  const rps = new Map<string, number[]>();
  try {
    const only = process.argv.includes('--stream')
      ? [true]
      : process.argv.includes('--non-stream')
        ? [false]
        : undefined;
    for (const stream of only ?? [false, true]) {
      const body = chatBody('svc-0ms', stream);
      for (const [, peer] of peers)
        await autocannon({
          url: `${peer.gatewayUrl}/v1/openai/chat/completions`,
          headers: { authorization: `Bearer ${peer.key}` },
          body,
          connections: 32,
          seconds: 2,
        });
      for (let round = 0; round < rounds; round++) {
        for (const [name, peer] of round % 2 === 0 ? peers : [...peers].reverse()) {
          const meter = cpuMeter([peer.pid ?? 0, ...(peer.corePid === null ? [] : [peer.corePid])]);
          const gateway = peer.corePid === null ? undefined : cpuMeter([peer.pid ?? 0]);
          const r = await autocannon({
            url: `${peer.gatewayUrl}/v1/openai/chat/completions`,
            headers: { authorization: `Bearer ${peer.key}` },
            body,
            connections: 32,
            seconds,
          });
          const key = `${name} ${stream ? 'stream' : 'non-stream'}`;
          cpu.set(key, [...(cpu.get(key) ?? []), meter.perRequest(r.total) ?? NaN]);
          if (gateway !== undefined) {
            const own = gateway.perRequest(r.total) ?? NaN;
            const both = cpu.get(key)?.at(-1) ?? NaN;
            cpu.set(`${key} gateway`, [...(cpu.get(`${key} gateway`) ?? []), own]);
            cpu.set(`${key} core`, [...(cpu.get(`${key} core`) ?? []), both - own]);
          }
          rps.set(key, [...(rps.get(key) ?? []), r.requestsPerSecond]);
        }
      }
    }
  } finally {
    for (const [name, peer] of peers)
      await peer.closeAndCheck().then(
        (ok) => console.log(`${name}: books balance over ${ok} calls`),
        (error: unknown) => console.log(`${name}: books: ${String(error)}`),
      );
    await upstream.stop();
    killChildren();
  }
  for (const [key, values] of cpu)
    console.log(
      `${key.padEnd(38)} median ${median(values).toFixed(0).padStart(5)} min ${Math.min(...values)
        .toFixed(0)
        .padStart(5)} µs CPU/request (${values.map((v) => v.toFixed(0)).join(' ')})  ${median(rps.get(key) ?? [])
        .toFixed(0)
        .padStart(6)} req/s`,
    );
}

main().catch((error: unknown) => {
  console.error(error);
  killChildren();
  process.exitCode = 1;
});
