// Responses over WebSocket against Responses over HTTP SSE (issue 32): the same conversations of
// streamed turns, each turn after the first continuing the one before, through one `svc serve`
// in front of the same fake upstream (0 ms, so svc's own work shows), side by side:
// - HTTP SSE with `previous_response_id` (`store: true`: svc loads the stored conversation), the base;
// - the WebSocket mode with `previous_response_id` on the connection (`store: false`), as Codex
//   runs with `supports_websockets`;
// - HTTP SSE replaying the whole conversation as `input` (`store: false`), as Codex runs over HTTP.
// The load client (bench/lib/turns.ts) is a process of its own: `SESSIONS` conversations at once
// of `TURNS` turns each, closed loop; the variants take turns over `rounds` rounds (so a busy
// moment of the machine does not fall on one of them alone), merged per variant. Reported: turns/s, p50/p99 of a turn (sending
// it to response.completed) and of its first event (response.created), and for the WebSocket the
// handshake; the ratios against the base come from the report. svc's books are checked after it
// stops (every turn charged exactly once, at the model's price).
import { startSvcPeer, startUpstream, type SvcPeer } from '../lib/peers';
import { mergeTurns, runTurns, type TurnsMode, type TurnsResult } from '../lib/turns';
import type { BenchOptions, BenchRow } from '../types';

const SESSIONS = 8;
const TURNS = 8;
const CHUNKS = 16;

const VARIANTS: { mode: TurnsMode; name: string }[] = [
  { mode: 'http-previous', name: 'HTTP SSE, previous_response_id (store: true)' },
  { mode: 'ws', name: 'WebSocket, previous_response_id on the connection (store: false)' },
  { mode: 'http-replay', name: 'HTTP SSE, whole conversation replayed (store: false)' },
];

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 3;
  const rounds = opts.quick ? 2 : 3;
  const upstream = await startUpstream(CHUNKS);
  let svc: SvcPeer | undefined;
  const rows: BenchRow[] = [];
  const scenario = `Responses turns, ${SESSIONS} conversations × ${TURNS} streamed turns, upstream 0 ms`;
  try {
    svc = await startSvcPeer(upstream.baseUrl);
    const peer = svc;
    const runs = new Map<TurnsMode, TurnsResult[]>(VARIANTS.map((v) => [v.mode, []]));
    for (let round = 0; round < rounds; round++) {
      for (const variant of VARIANTS) {
        const result = await runTurns({
          baseUrl: `${peer.gatewayUrl}/v1/openai`,
          key: peer.key,
          model: peer.model(0),
          mode: variant.mode,
          sessions: SESSIONS,
          turns: TURNS,
          durationMs: seconds * 1000,
          // Each round warms up again: the variant before it left other connections and caches.
          warmupMs: warmup * 1000,
        });
        runs.get(variant.mode)?.push(result);
      }
    }
    const merged: { variant: (typeof VARIANTS)[number]; result: TurnsResult }[] = [];
    for (const variant of VARIANTS) {
      const result = mergeTurns(runs.get(variant.mode) ?? []);
      if (result.errors > 0 || result.ok === 0) {
        opts.fail(`responses-ws ${variant.name}`, new Error(`${result.errors} failed turns: ${result.firstError}`));
        continue;
      }
      if (result.continued === 0) throw new Error(`${variant.name}: no turn continued an earlier one`);
      merged.push({ variant, result });
      console.log(
        `  ${variant.name}: ${result.turnsPerSecond.toFixed(1)} turns/s (${result.continued} of ${result.ok} continued); ` +
          `turn p50 ${result.latency.p50.toFixed(2)} ms, p99 ${result.latency.p99.toFixed(2)} ms; ` +
          `first event p50 ${result.firstEvent.p50.toFixed(2)} ms, p99 ${result.firstEvent.p99.toFixed(2)} ms` +
          (result.connect === null
            ? ''
            : `; ${result.connect.count} handshakes, p50 ${result.connect.p50.toFixed(2)} ms, p99 ${result.connect.p99.toFixed(2)} ms`),
      );
      const row = (metric: string, value: number, unit: string): BenchRow => ({
        scenario,
        variant: variant.name,
        metric,
        value,
        unit,
      });
      rows.push(
        row('throughput', result.turnsPerSecond, 'turns/s'),
        row('turn p50', result.latency.p50, 'ms'),
        row('turn p99', result.latency.p99, 'ms'),
        row('first event p50', result.firstEvent.p50, 'ms'),
        row('first event p99', result.firstEvent.p99, 'ms'),
      );
      if (result.connect !== null) rows.push(row('WebSocket handshake p50', result.connect.p50, 'ms'));
    }
    const http = merged.find((m) => m.variant.mode === 'http-previous')?.result;
    const ws = merged.find((m) => m.variant.mode === 'ws')?.result;
    if (http !== undefined && ws !== undefined)
      console.log(
        `  WebSocket / HTTP SSE (both previous_response_id): ${(ws.turnsPerSecond / http.turnsPerSecond).toFixed(2)}× the turns/s, ` +
          `${(ws.latency.p50 / http.latency.p50).toFixed(2)}× the turn p50, ` +
          `${(ws.firstEvent.p50 / http.firstEvent.p50).toFixed(2)}× the first-event p50`,
      );
  } finally {
    try {
      if (svc !== undefined) {
        const calls = await svc.closeAndCheck();
        console.log(`  books checked: ${calls} turns, each charged once at the model's price, nothing held`);
      }
    } finally {
      await upstream.stop();
    }
  }
  return rows;
}
