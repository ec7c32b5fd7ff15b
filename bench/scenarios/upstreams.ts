// The cost of upstream routing (issue 15): one svc serves the same chat through a model with one
// upstream and through a model with three (same priority, equal weights, three upstream
// processes), measured in the same run, alternating, at 32 connections against 0 ms upstreams.
// The goal: three upstreams cost no more than 5% throughput against one. svc's books are checked
// after it stops (every call charged exactly once, at the model's price).
import { autocannon } from '../lib/autocannon';
import { chatBody, startSvcPeer, startUpstream, type SvcPeer } from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const CONNECTIONS = 32;
const CHUNKS = 16;
const ROUNDS = 3;

function models(one: string, three: readonly string[]): string {
  const price = '    price: { input_per_1m: 150000, output_per_1m: 600000 }\n    max_output_tokens: 4096\n';
  const entry = (url: string): string =>
    `      - provider: openai\n        base_url: ${url}\n        api_key: bench\n        upstream_model: fake-0ms\n`;
  return (
    `  route-one:\n${price}    upstreams:\n${entry(one)}` +
    `  route-three:\n${price}    upstreams:\n${three.map(entry).join('')}` +
    '    breaker: { failures: 5, open_s: 30 }\n'
  );
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 2 : 8;
  const upstreams = await Promise.all([startUpstream(CHUNKS), startUpstream(CHUNKS), startUpstream(CHUNKS)]);
  const [first] = upstreams;
  let svc: SvcPeer | undefined;
  const rows: BenchRow[] = [];
  try {
    if (first === undefined) throw new Error('no upstream');
    svc = await startSvcPeer(
      first.baseUrl,
      {},
      'svc',
      models(
        first.baseUrl,
        upstreams.map((u) => u.baseUrl),
      ),
    );
    const peer = svc;
    const load = (model: string, secs: number) =>
      autocannon({
        url: peer.url,
        headers: peer.headers,
        body: chatBody(model, false),
        connections: CONNECTIONS,
        seconds: secs,
      });
    await load('route-one', 1);
    await load('route-three', 1);
    const totals = { one: 0, three: 0 };
    // Alternating rounds, so that drift (a neighbour's load, the JIT) falls on both alike.
    for (let round = 0; round < ROUNDS; round += 1) {
      totals.one += (await load('route-one', seconds)).requestsPerSecond;
      totals.three += (await load('route-three', seconds)).requestsPerSecond;
    }
    const one = totals.one / ROUNDS;
    const three = totals.three / ROUNDS;
    console.log(
      `  one upstream ${one.toFixed(0)} req/s, three upstreams ${three.toFixed(0)} req/s (${((three / one - 1) * 100).toFixed(1)}%)`,
    );
    const scenario = `chat non-stream through routing, upstream 0 ms, c=${CONNECTIONS}`;
    rows.push(
      { scenario, variant: 'svc, model with 1 upstream', metric: 'throughput', value: one, unit: 'req/s' },
      { scenario, variant: 'svc, model with 3 upstreams', metric: 'throughput', value: three, unit: 'req/s' },
    );
  } catch (error) {
    opts.fail('upstreams', error);
  } finally {
    try {
      const calls = await svc?.closeAndCheck();
      if (calls !== undefined) console.log(`  svc billed ${calls} calls exactly`);
    } catch (error) {
      opts.fail('upstreams books', error);
      rows.length = 0;
    }
    await Promise.all(upstreams.map((u) => u.stop()));
  }
  return rows;
}
