// Tokenizing as a denial of service (issue 31, finding 5): a zero-credit key posts 900 kB bodies
// of long words to /v1/openai/embeddings, four at a time, back to back; meanwhile another account
// makes small chat calls at a steady 20 per second. Reported: the victim's p50 and p99 latency
// without the flood and under it. Before issue 31 every flood request cost the core about a second
// of event-loop CPU before its 429 (the victim's p50 went from 11 ms to 4.5 s); now a caller that
// cannot pay for the least such a call costs is refused before the tokenizer runs, and large
// counts run on the token worker, so the two numbers should stay close.
// The flood is sent from this process (a 900 kB body does not fit a child's argv); the victim's
// load client runs in a child process of its own, as everywhere in the bench.
import { Pool } from 'undici';
import { runClient, type ClientResult } from '../lib/loadgen';
import { chatBody, startSvcPeer, startUpstream, type SvcPeer } from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const VICTIM_RATE = 20;
const FLOOD_CONNECTIONS = 4;

const EMBED_MODEL = `  flood-embed:
    provider: sandbox
    kind: embedding
    dimensions: [16]
    context_window: 8191
    price: { input_per_1m: 20000 }
`;

/** 900 kB of long "words" (runs of letters: the tokenizer's worst case) in 22 inputs. */
function floodBody(): string {
  const word = 'abcdefghijklmnopqrstuvwxyz'.repeat(40);
  let text = '';
  while (text.length < 40_900) text += `${word} `;
  return JSON.stringify({ model: 'flood-embed', input: Array.from({ length: 22 }, () => text.slice(0, 40_900)) });
}

/** Posts the flood until `stop` fires; resolves with how many were answered, by status. */
async function flood(url: string, key: string, stop: AbortSignal): Promise<Map<number, number>> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections: FLOOD_CONNECTIONS });
  const body = floodBody();
  const statuses = new Map<number, number>();
  try {
    await Promise.all(
      Array.from({ length: FLOOD_CONNECTIONS }, async () => {
        while (!stop.aborted) {
          try {
            const res = await pool.request({
              path: target.pathname,
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
              body,
              signal: stop,
            });
            await res.body.dump();
            statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          } catch {
            if (!stop.aborted) statuses.set(0, (statuses.get(0) ?? 0) + 1);
          }
        }
      }),
    );
  } finally {
    await pool.close();
  }
  return statuses;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const ms = (opts.quick ? 4 : 10) * 1000;
  const upstream = await startUpstream(1);
  let svc: SvcPeer | undefined;
  const rows: BenchRow[] = [];
  try {
    svc = await startSvcPeer(upstream.baseUrl, {}, 'svc', EMBED_MODEL);
    const peer = svc;
    const account = String((await peer.cli(['account', 'create', '--name', 'flooder']))['id']);
    const zeroKey = String((await peer.cli(['key', 'create', '--account', account]))['key']);
    const victim = (): Promise<ClientResult> =>
      runClient({
        url: peer.url,
        headers: peer.headers,
        body: chatBody(peer.model(0), false),
        rate: VICTIM_RATE,
        durationMs: ms,
        warmupMs: 1000,
        maxInFlight: 1000,
      });
    const quiet = await victim();
    const stop = new AbortController();
    const flooding = flood(`${peer.gatewayUrl}/v1/openai/embeddings`, zeroKey, stop.signal);
    let loud: ClientResult;
    try {
      loud = await victim();
    } finally {
      stop.abort();
    }
    const statuses = await flooding;
    const answered = [...statuses.entries()].map(([status, n]) => `${n}×${status}`).join(', ');
    console.log(
      `  victim p50/p99 ${quiet.latency.p50.toFixed(1)}/${quiet.latency.p99.toFixed(1)} ms quiet, ` +
        `${loud.latency.p50.toFixed(1)}/${loud.latency.p99.toFixed(1)} ms under the flood (${answered})`,
    );
    for (const [label, r] of [
      ['victim quiet', quiet],
      ['victim under flood', loud],
    ] as const) {
      if (r.errors > 0) opts.fail(`tokenize-flood ${label}`, new Error(`${r.errors} failed: ${r.firstError ?? ''}`));
    }
    if ([...statuses.keys()].some((s) => s === 200))
      opts.fail('tokenize-flood', new Error('a zero-credit key was served embeddings'));
    const scenario = `small chat of another account at ${VICTIM_RATE}/s while a zero-credit key floods embeddings (900 kB, ${FLOOD_CONNECTIONS} at a time)`;
    rows.push(
      { scenario, variant: 'no flood', metric: 'p50 latency', value: quiet.latency.p50, unit: 'ms' },
      { scenario, variant: 'under flood', metric: 'p50 latency', value: loud.latency.p50, unit: 'ms' },
      { scenario, variant: 'no flood', metric: 'p99 latency', value: quiet.latency.p99, unit: 'ms' },
      { scenario, variant: 'under flood', metric: 'p99 latency', value: loud.latency.p99, unit: 'ms' },
    );
  } catch (error) {
    opts.fail('tokenize-flood', error);
  } finally {
    try {
      await svc?.closeAndCheck();
    } catch (error) {
      opts.fail('tokenize-flood books', error);
      rows.length = 0;
    }
    await upstream.stop();
  }
  return rows;
}
