// What one call costs alone (`npx tsx bench/alone.ts [--calls N] [--rounds N] [--stream]`): the
// bench's fake upstream (0 ms) and `svc serve` (set up as the bench sets it up), then calls one
// after another (never two at once), straight to the upstream and through svc in turn, each round
// N of each: their latency (p50, p99) and svc's process CPU per call (/proc, every thread). Under
// load svc shares much of a call's work with the calls beside it (the wallet's batches, one
// commit for many); alone it does all of it, so this is the floor of the latency svc adds at a
// rate it serves easily (the bench's added p50 at 500 req/s). Books checked at the end.
import { request } from 'undici';
import { checkBooks, median, numberFlag } from './lib/ab';
import { killChildren } from './lib/children';
import { cpuMeter } from './lib/cpu';
import { chatBody, startSvcPeer, startUpstream } from './lib/peers';

/** Each call's milliseconds, sorted. */
async function oneByOne(url: string, headers: Record<string, string>, body: string, calls: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    const r = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    await r.body.text();
    if (r.statusCode !== 200) throw new Error(`${url} answered ${r.statusCode}`);
    out.push(performance.now() - t);
  }
  return out.sort((a, b) => a - b);
}

const at = (sorted: readonly number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN;

async function main(): Promise<void> {
  const calls = numberFlag('--calls', 1500);
  const rounds = numberFlag('--rounds', 3);
  const stream = process.argv.includes('--stream');
  process.env['SVC_BENCH_NO_BUILD'] = '1';
  const upstream = await startUpstream(16);
  const svc = await startSvcPeer(upstream.baseUrl, {});
  const added: number[] = [];
  const cpus: number[] = [];
  try {
    // Warm both (svc's code compiled, connections open) before anything is measured.
    await oneByOne(`${upstream.baseUrl}/chat/completions`, {}, chatBody('fake-0ms', stream), 300);
    await oneByOne(
      `${svc.gatewayUrl}/v1/openai/chat/completions`,
      { authorization: `Bearer ${svc.key}` },
      chatBody('svc-0ms', stream),
      300,
    );
    for (let round = 0; round < rounds; round++) {
      const direct = await oneByOne(`${upstream.baseUrl}/chat/completions`, {}, chatBody('fake-0ms', stream), calls);
      const meter = cpuMeter([svc.pid ?? 0]);
      const through = await oneByOne(
        `${svc.gatewayUrl}/v1/openai/chat/completions`,
        { authorization: `Bearer ${svc.key}` },
        chatBody('svc-0ms', stream),
        calls,
      );
      const cpu = meter.perRequest(calls) ?? NaN;
      added.push(at(through, 0.5) - at(direct, 0.5));
      cpus.push(cpu);
      console.log(
        `  round ${round + 1}: direct p50 ${at(direct, 0.5).toFixed(3)} p99 ${at(direct, 0.99).toFixed(3)} ms; ` +
          `svc p50 ${at(through, 0.5).toFixed(3)} p99 ${at(through, 0.99).toFixed(3)} ms, ${cpu.toFixed(0)} µs CPU per call`,
      );
    }
  } finally {
    await checkBooks([['serve', svc]]).finally(async () => {
      await upstream.stop();
      killChildren();
    });
  }
  console.log(
    `chat ${stream ? 'stream' : 'non-stream'}, one call at a time (median of ${rounds} rounds of ${calls}): ` +
      `svc adds ${median(added).toFixed(3)} ms at p50 and spends ${median(cpus).toFixed(0)} µs of CPU per call`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  killChildren();
  process.exitCode = 1;
});
