// The cost of tracing: the same chat completions (non-streaming and streaming) through `svc serve`
// with tracing off (no exporter configured: no instrumentation is installed at all) and on
// (every span exported over OTLP/HTTP protobuf to a local receiver), side by side. Each variant is
// a real `svc serve` process on its own SQLite file, in front of the fake upstream in its own
// process; load comes from autocannon in a child process: requests per second at fixed
// concurrency, then p50/p99 latency at a fixed rate. Both log as in production (info: one line
// per request), so only tracing differs.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { autocannon, type AutocannonLoad } from '../lib/autocannon';
import { chatBody, startSvcPeer, startUpstream } from '../lib/peers';
import type { BenchOptions, BenchRow } from '../types';

const CONNECTIONS = 32;
const RATE = 500;

/** A collector stand-in: accepts OTLP/HTTP exports and counts the bytes (what a backend would ingest). */
async function startSink(): Promise<{ url: string; bytes(): number; close(): Promise<void> }> {
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bytes: () => bytes,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 3;
  const out: BenchRow[] = [];
  const upstream = await startUpstream(16);
  const sink = await startSink();
  const variants: { name: string; otel: NodeJS.ProcessEnv }[] = [
    { name: 'tracing off', otel: {} },
    {
      name: 'tracing on (OTLP export)',
      otel: {
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_SERVICE_NAME: 'svc-bench',
        // A queue that holds a few seconds of spans at this rate, so none is dropped and every
        // span's cost is in the figures.
        OTEL_BSP_MAX_QUEUE_SIZE: '100000',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2048',
        OTEL_BSP_SCHEDULE_DELAY: '500',
      },
    },
  ];
  try {
    for (const variant of variants) {
      const svc = await startSvcPeer(upstream.baseUrl, variant.otel);
      const bytesBefore = sink.bytes();
      let requests = 0;
      try {
        for (const stream of [false, true]) {
          const mode = stream ? 'stream' : 'non-stream';
          const load = (seconds: number, rate?: number): Promise<AutocannonLoad> =>
            autocannon({
              url: svc.url,
              headers: svc.headers,
              body: chatBody(svc.model(0), stream),
              connections: CONNECTIONS,
              seconds,
              ...(rate === undefined ? {} : { rate }),
            });
          await load(warmup);
          const loaded = await load(seconds);
          const paced = await load(seconds, RATE);
          requests += loaded.total + paced.total;
          console.log(
            `  ${variant.name} ${mode}: ${loaded.requestsPerSecond.toFixed(0)} req/s at c=${CONNECTIONS}; p50 ${paced.p50} ms, p99 ${paced.p99} ms at ${RATE} req/s`,
          );
          out.push(
            {
              scenario: `svc serve chat ${mode} c=${CONNECTIONS}`,
              variant: variant.name,
              metric: 'throughput',
              value: loaded.requestsPerSecond,
              unit: 'req/s',
            },
            {
              scenario: `svc serve chat ${mode} @${RATE} req/s`,
              variant: variant.name,
              metric: 'latency p50',
              value: paced.p50,
              unit: 'ms',
            },
            {
              scenario: `svc serve chat ${mode} @${RATE} req/s`,
              variant: variant.name,
              metric: 'latency p99',
              value: paced.p99,
              unit: 'ms',
            },
          );
        }
      } finally {
        // A graceful stop flushes the spans still queued, so the bytes below are complete; the
        // books are checked as in the openai scenario.
        await svc.closeAndCheck();
      }
      const exported = sink.bytes() - bytesBefore;
      if (variant.otel['OTEL_EXPORTER_OTLP_ENDPOINT'] !== undefined && exported === 0)
        throw new Error('tracing on, but no span reached the receiver');
      console.log(
        `  ${variant.name}: ${(exported / 1024 / 1024).toFixed(1)} MiB of OTLP exported for about ${requests} requests`,
      );
    }
  } finally {
    await upstream.stop();
    await sink.close();
  }
  return out;
}
