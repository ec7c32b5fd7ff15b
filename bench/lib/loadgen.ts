// The bench's own load client, for what autocannon cannot measure: sub-millisecond latency
// (autocannon reports whole milliseconds), time to first token and chunks per second of streams,
// and open-loop pacing that keeps sending at the offered rate however slow the server gets.
// `runClient(spec)` runs it in a child process (`node -r tsx/cjs bench/lib/loadgen.ts SPEC_JSON`,
// which prints one JSON result), never in the process of a server it measures.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { track, TSX } from './children';
import { percentile } from './measure';

export interface ClientSpec {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Closed loop: this many requests in flight, back to back. */
  readonly concurrency?: number;
  /** Open loop: requests started per second, whatever the answers do. */
  readonly rate?: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** Open loop: at most this many in flight; a request due while full is counted as dropped. */
  readonly maxInFlight?: number;
}

export interface ClientResult {
  /** Requests started in the measured window and answered 200 in full. */
  readonly ok: number;
  readonly errors: number;
  readonly firstError: string | null;
  readonly dropped: number;
  readonly seconds: number;
  readonly requestsPerSecond: number;
  /** Whole-answer latency, ms (fractional). */
  readonly latency: { readonly p50: number; readonly p99: number; readonly max: number };
  /** Streams: from sending to the first `data:` frame that carries content text, ms. */
  readonly ttft: { readonly p50: number; readonly p99: number } | null;
  /** Streams: `data:` frames (not [DONE]) received per second, all streams together. */
  readonly chunksPerSecond: number | null;
}

const CONTENT = /"content":"[^"]/;

interface One {
  readonly ok: boolean;
  readonly error?: string;
  readonly latency: number;
  readonly ttft: number | null;
  readonly frames: number;
}

async function once(pool: Pool, url: URL, spec: ClientSpec): Promise<One> {
  const t0 = performance.now();
  try {
    const { statusCode, headers, body } = await pool.request({
      path: url.pathname + url.search,
      method: 'POST',
      headers: spec.headers,
      body: spec.body,
    });
    const sse = String(headers['content-type'] ?? '').startsWith('text/event-stream');
    let ttft: number | null = null;
    let frames = 0;
    let frameTail = '';
    let contentTail = '';
    let text = '';
    for await (const chunk of body as AsyncIterable<Buffer>) {
      const s = chunk.toString('utf8');
      if (statusCode !== 200) {
        text += s;
        continue;
      }
      if (!sse) continue;
      // Frames and content markers may be split across reads: keep a tail too short to hold one.
      const framed = frameTail + s;
      frames += framed.split('data:').length - 1 - (framed.split('data: [DONE]').length - 1);
      frameTail = framed.slice(-4);
      if (ttft === null) {
        const look = contentTail + s;
        if (CONTENT.test(look)) ttft = performance.now() - t0;
        contentTail = look.slice(-12);
      }
    }
    const latency = performance.now() - t0;
    if (statusCode !== 200)
      return { ok: false, error: `HTTP ${statusCode}: ${text.slice(0, 300)}`, latency, ttft, frames };
    return { ok: true, latency, ttft, frames };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, error: message, latency: performance.now() - t0, ttft: null, frames: 0 };
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function phase(
  pool: Pool,
  url: URL,
  spec: ClientSpec,
  durationMs: number,
): Promise<{ all: One[]; dropped: number; seconds: number }> {
  const all: One[] = [];
  let dropped = 0;
  const start = performance.now();
  const end = start + durationMs;
  if (spec.rate !== undefined) {
    const max = spec.maxInFlight ?? 1024;
    const inFlight = new Set<Promise<void>>();
    let due = 0;
    while (performance.now() < end) {
      const target = Math.floor(((performance.now() - start) / 1000) * spec.rate);
      for (; due < target; due++) {
        if (inFlight.size >= max) {
          dropped++;
          continue;
        }
        const p: Promise<void> = once(pool, url, spec).then((r) => {
          all.push(r);
          inFlight.delete(p);
        });
        inFlight.add(p);
      }
      await sleep(1);
    }
    await Promise.all(inFlight);
  } else {
    await Promise.all(
      Array.from({ length: spec.concurrency ?? 1 }, async () => {
        while (performance.now() < end) all.push(await once(pool, url, spec));
      }),
    );
  }
  return { all, dropped, seconds: (performance.now() - start) / 1000 };
}

/** Runs the load described by `spec` in this process (the child's side). */
export async function drive(spec: ClientSpec): Promise<ClientResult> {
  const url = new URL(spec.url);
  const connections = spec.rate !== undefined ? (spec.maxInFlight ?? 1024) : (spec.concurrency ?? 1);
  const pool = new Pool(url.origin, { connections, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
  try {
    if (spec.warmupMs > 0) await phase(pool, url, spec, spec.warmupMs);
    const { all, dropped, seconds } = await phase(pool, url, spec, spec.durationMs);
    const good = all.filter((r) => r.ok);
    const latencies = good.map((r) => r.latency).sort((a, b) => a - b);
    const ttfts = good.flatMap((r) => (r.ttft === null ? [] : [r.ttft])).sort((a, b) => a - b);
    const frames = good.reduce((n, r) => n + r.frames, 0);
    return {
      ok: good.length,
      errors: all.length - good.length,
      firstError: all.find((r) => !r.ok)?.error ?? null,
      dropped,
      seconds,
      requestsPerSecond: good.length / seconds,
      latency: { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: latencies.at(-1) ?? 0 },
      ttft: ttfts.length === 0 ? null : { p50: percentile(ttfts, 0.5), p99: percentile(ttfts, 0.99) },
      chunksPerSecond: frames === 0 ? null : frames / seconds,
    };
  } finally {
    await pool.close();
  }
}

/** Runs `spec` in a child process and resolves with its result. */
export async function runClient(spec: ClientSpec): Promise<ClientResult> {
  const timeout = spec.warmupMs + spec.durationMs + 120_000;
  const stdout = await new Promise<string>((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['-r', TSX, path.join(__dirname, 'loadgen.ts'), JSON.stringify(spec)],
      { maxBuffer: 16 * 1024 * 1024, timeout },
      (error, out, err) => (error === null ? resolve(out) : reject(new Error(`load client: ${error.message}\n${err}`))),
    );
    track(child);
  });
  return JSON.parse(stdout) as ClientResult;
}

if (require.main === module) {
  drive(JSON.parse(process.argv[2] ?? '{}') as ClientSpec).then(
    (result) => {
      // Exit once the result is written: a large one (every turn's samples) leaves the pipe in
      // several writes, and an exit right after the call cut it (seen: at 219,264 bytes).
      process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
