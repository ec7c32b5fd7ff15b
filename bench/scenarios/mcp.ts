// MCP tools/call throughput: svc's /v1/mcp as `svc serve` runs it (auth, wallet hold, provider,
// settle, usage record, over the gRPC hop) next to the MCP SDK's stateless Streamable HTTP example
// (bench/lib/mcp-bare.ts: a server and a transport built per request, no auth, no billing) serving
// the same trivial tool: the offline sandbox maps search. Each server is a process of its own;
// load comes from autocannon in another.
import { autocannon, type AutocannonLoad } from '../lib/autocannon';
import { startTsServer } from '../lib/children';
import { startSvcPeer } from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const CONNECTIONS = 32;
const PRICE = 460n;
const CALL = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'maps_search_places', arguments: { query: 'داروخانه', limit: 3 } },
});
// tools/list needs the key (svc) but no wallet: it shows the adapter and the gRPC hop alone.
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });

function rows(method: string, variant: string, load: AutocannonLoad): BenchRow[] {
  const scenario = `mcp ${method} c=${CONNECTIONS}`;
  return [
    { scenario, variant, metric: 'throughput', value: load.requestsPerSecond, unit: 'calls/s' },
    { scenario, variant, metric: 'latency p50', value: load.p50, unit: 'ms' },
    { scenario, variant, metric: 'latency p99', value: load.p99, unit: 'ms' },
  ];
}

const BARE = 'bare SDK stateless server (no auth, no billing)';
const SVC = 'svc /v1/mcp (auth, hold, settle, usage)';

/** Runs both servers, one after the other, under the same load. */
export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 3;
  const calls: BenchRow[] = [];
  const lists: BenchRow[] = [];
  const load = (url: string, headers: Record<string, string>, s: number, body = CALL): Promise<AutocannonLoad> =>
    autocannon({
      url,
      headers: { accept: 'application/json, text/event-stream', ...headers },
      body,
      connections: CONNECTIONS,
      seconds: s,
    });

  try {
    const bare = await startTsServer('bench/lib/mcp-bare.ts', []);
    try {
      await load(bare.url, {}, warmup);
      const got = await load(bare.url, {}, seconds);
      console.log(`  bare SDK stateless server: ${got.requestsPerSecond.toFixed(0)} tools/call per s`);
      calls.push(...rows('tools/call', BARE, got));
      lists.push(...rows('tools/list', BARE, await load(bare.url, {}, seconds, LIST)));
    } finally {
      await bare.stop();
    }
  } catch (error) {
    opts.fail('mcp bare SDK server', error);
  }

  // svc needs no upstream for MCP: the sandbox tools answer in the core.
  const svc = await startSvcPeer('http://127.0.0.1:9/v1');
  let answered = 0;
  let okCalls = 0;
  try {
    const url = `${svc.gatewayUrl}/v1/mcp`;
    const headers = { authorization: `Bearer ${svc.key}` };
    answered += (await load(url, headers, warmup)).total;
    const got = await load(url, headers, seconds);
    answered += got.total;
    console.log(`  svc /v1/mcp: ${got.requestsPerSecond.toFixed(0)} tools/call per s`);
    calls.push(...rows('tools/call', SVC, got));
    lists.push(
      ...rows('tools/list', SVC.replace('hold, settle, usage', 'no billing'), await load(url, headers, seconds, LIST)),
    );
  } finally {
    // The number only counts if every call was really billed: one settled charge per call.
    okCalls = await svc.closeAndCheck(PRICE);
  }
  if (okCalls < answered) throw new Error(`svc: ${okCalls} ok calls recorded, ${answered} answered`);
  console.log(`  svc billed ${okCalls} tool calls exactly (${PRICE} each, wallet charged == usage records)`);
  return [...calls, ...lists];
}
