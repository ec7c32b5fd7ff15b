// The fast path against the translated path, interleaved (`npx tsx bench/fast-path-ab.ts
// [--rounds N] [--seconds S]`): one fake upstream, two `svc serve` (SVC_FAST_PATH=1 and 0), and
// autocannon at 32 connections on each in turn (A B A B …, streams and non-streams), so that a
// machine whose load drifts (a shared one) weighs on both alike; then the median of each and
// their ratio. Both svc's books are checked at the end. `npm run bench` stays the judge of goals;
// this only isolates what the pass-through changes.
import fs from 'node:fs';
import { autocannon } from './lib/autocannon';
import { killChildren } from './lib/children';
import { chatBody, startSvcPeer, startUpstream, type SvcPeer } from './lib/peers';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

/** CPU time (user + system) the process has used so far, in µs, from /proc/PID/stat. */
function cpuMicros(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1e6) / 100;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

async function main(): Promise<void> {
  const rounds = arg('--rounds', 4);
  const seconds = arg('--seconds', 3);
  const upstream = await startUpstream(16);
  const peers: [string, SvcPeer][] = [
    ['fast', await startSvcPeer(upstream.baseUrl, { SVC_FAST_PATH: '1' })],
    ['translated', await startSvcPeer(upstream.baseUrl, { SVC_FAST_PATH: '0' })],
  ];
  const results = new Map<string, number[]>();
  // svc's own CPU time per answered request (user + system, /proc), less sensitive to a busy machine.
  const cpus = new Map<string, number[]>();
  try {
    for (const stream of [true, false]) {
      for (const [, peer] of peers) {
        const load = {
          url: `${peer.gatewayUrl}/v1/openai/chat/completions`,
          headers: { authorization: `Bearer ${peer.key}` },
        };
        await autocannon({ ...load, body: chatBody('svc-0ms', stream), connections: 32, seconds: 1 });
      }
      for (let round = 0; round < rounds; round++) {
        for (const [name, peer] of round % 2 === 0 ? peers : [...peers].reverse()) {
          const cpuBefore = cpuMicros(peer.pid ?? 0);
          const r = await autocannon({
            url: `${peer.gatewayUrl}/v1/openai/chat/completions`,
            headers: { authorization: `Bearer ${peer.key}` },
            body: chatBody('svc-0ms', stream),
            connections: 32,
            seconds,
          });
          const cpu = (cpuMicros(peer.pid ?? 0) - cpuBefore) / Math.max(1, r.total);
          const key = `${stream ? 'stream' : 'non-stream'} ${name}`;
          results.set(key, [...(results.get(key) ?? []), r.requestsPerSecond]);
          cpus.set(key, [...(cpus.get(key) ?? []), cpu]);
          console.log(
            `  round ${round + 1} ${key}: ${Math.round(r.requestsPerSecond)} req/s, p99 ${r.p99} ms, ${Math.round(cpu)} µs CPU/request`,
          );
        }
      }
    }
  } finally {
    for (const [name, peer] of peers) {
      const calls = await peer.closeAndCheck();
      console.log(`  svc ${name}: billed ${calls} calls exactly`);
    }
    await upstream.stop();
    killChildren();
  }
  for (const kind of ['stream', 'non-stream']) {
    const fast = median(results.get(`${kind} fast`) ?? []);
    const translated = median(results.get(`${kind} translated`) ?? []);
    const fastCpu = median(cpus.get(`${kind} fast`) ?? []);
    const translatedCpu = median(cpus.get(`${kind} translated`) ?? []);
    console.log(
      `${kind}: fast ${Math.round(fast)} req/s, translated ${Math.round(translated)} req/s (median of ${rounds}): ${(fast / translated).toFixed(2)}×; ` +
        `CPU/request fast ${Math.round(fastCpu)} µs, translated ${Math.round(translatedCpu)} µs: ${(fastCpu / translatedCpu).toFixed(2)}×`,
    );
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
