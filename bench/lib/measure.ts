import { performance } from 'node:perf_hooks';

export interface LoadOptions {
  /** Operations in flight at once. */
  readonly concurrency: number;
  /** Measured time; operations started before its end are counted. */
  readonly durationMs: number;
  /** Unmeasured run first (connection pools, JIT, caches). */
  readonly warmupMs: number;
  /** One operation; `worker` is 0..concurrency-1, `seq` counts that worker's operations. */
  readonly op: (worker: number, seq: number) => Promise<void>;
}

export interface LoadResult {
  readonly ops: number;
  readonly seconds: number;
  readonly opsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly max: number };
}

/** Closed-loop load: `concurrency` workers each run `op` back to back until the time is up. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const seq = new Array<number>(options.concurrency).fill(0);
  async function phase(durationMs: number, latencies: number[] | null): Promise<{ ops: number; seconds: number }> {
    const start = performance.now();
    const end = start + durationMs;
    let ops = 0;
    await Promise.all(
      Array.from({ length: options.concurrency }, async (_, worker) => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await options.op(worker, seq[worker]!++);
          if (latencies !== null) latencies.push(performance.now() - t0);
          ops++;
        }
      }),
    );
    return { ops, seconds: (performance.now() - start) / 1000 };
  }
  if (options.warmupMs > 0) await phase(options.warmupMs, null);
  const latencies: number[] = [];
  const { ops, seconds } = await phase(options.durationMs, latencies);
  latencies.sort((a, b) => a - b);
  return {
    ops,
    seconds,
    opsPerSecond: ops / seconds,
    latencyMs: { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: latencies.at(-1) ?? 0 },
  };
}

/** Nearest-rank percentile of ascending `sorted`; 0 when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[rank] ?? 0;
}
