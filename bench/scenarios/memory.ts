// svc's memory over a soak: `svc serve` in its own process in front of the bench's fake upstream
// (60 ms), under a steady mix of non-streaming and streaming chat (two load clients in processes
// of their own, paced), its RSS read from /proc every few seconds. Growth is the median of the
// last fifth of the samples less the median of the first fifth after a warm-up (medians, so one
// GC swing does not decide it). 10 minutes; 45 s with --quick. The books are checked at the end.
import { sampleRss } from '../lib/children';
import { runClient, type ClientResult } from '../lib/loadgen';
import { chatBody, startSvcPeer, startUpstream, VARIANTS } from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const NON_STREAM_RATE = 150;
const STREAM_RATE = 50;
const LATENCY_MS = 60;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const durationMs = opts.quick ? 45_000 : 600_000;
  const warmupMs = opts.quick ? 5_000 : 30_000;
  const everyMs = opts.quick ? 1_000 : 5_000;
  const upstream = await startUpstream(16);
  try {
    const svc = await startSvcPeer(upstream.baseUrl);
    let results: ClientResult[];
    let samples: number[];
    try {
      const load = (stream: boolean, rate: number): Promise<ClientResult> =>
        runClient({
          url: svc.url,
          headers: svc.headers,
          body: chatBody(svc.model(LATENCY_MS), stream),
          rate,
          durationMs,
          warmupMs,
        });
      const both = Promise.all([load(false, NON_STREAM_RATE), load(true, STREAM_RATE)]);
      // Sampling starts with the measured part, after the clients' warm-up.
      await new Promise((resolve) => setTimeout(resolve, warmupMs));
      const rss = sampleRss(svc.pid ?? 0, everyMs);
      results = await both;
      samples = rss.stop();
    } finally {
      // Samples stop when the process is gone: this fails the soak when svc exited before its end.
      const calls = await svc.closeAndCheck();
      console.log(`  svc billed ${calls} calls exactly (wallet charged == usage records, nothing held)`);
    }
    // A few failed calls are reported, but do not void ten minutes of memory samples; a load that
    // mostly failed does: its memory is not that of a serving svc.
    const failed = results.reduce((n, r) => n + r.errors, 0);
    const calls = results.reduce((n, r) => n + r.ok + r.errors, 0);
    if (failed * 100 > calls)
      throw new Error(
        `${failed} of ${calls} calls failed: ${results.find((r) => r.firstError !== null)?.firstError ?? ''}`,
      );
    if (failed > 0)
      opts.fail(
        'memory soak calls',
        new Error(
          `${failed} of ${calls} calls failed: ${results.find((r) => r.firstError !== null)?.firstError ?? ''}`,
        ),
      );
    const fifth = Math.max(1, Math.floor(samples.length / 5));
    const first = median(samples.slice(0, fifth));
    const last = median(samples.slice(-fifth));
    const scenario = `memory soak ${durationMs / 1000} s at ${NON_STREAM_RATE}+${STREAM_RATE} stream req/s`;
    const variant = VARIANTS.svc;
    console.log(
      `  svc RSS over ${durationMs / 1000} s: ${first.toFixed(1)} → ${last.toFixed(1)} MiB (max ${Math.max(...samples).toFixed(1)}), ${samples.length} samples`,
    );
    return [
      { scenario, variant, metric: 'RSS at start', value: first, unit: 'MiB' },
      { scenario, variant, metric: 'RSS at end', value: last, unit: 'MiB' },
      { scenario, variant, metric: 'RSS growth', value: last - first, unit: 'MiB' },
      { scenario, variant, metric: 'RSS (max)', value: Math.max(...samples), unit: 'MiB' },
      {
        scenario,
        variant,
        metric: 'answered',
        value: results.reduce((n, r) => n + r.requestsPerSecond, 0),
        unit: 'req/s',
      },
      { scenario, variant, metric: 'failed calls', value: failed, unit: 'calls' },
    ];
  } finally {
    await upstream.stop();
  }
}
