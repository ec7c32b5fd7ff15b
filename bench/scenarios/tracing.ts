// The cost of tracing: the same chat completions (non-streaming and streaming) through `svc serve`
// with tracing off (no exporter configured: no instrumentation is installed at all) and on
// (every span exported over OTLP/HTTP protobuf to a local receiver), side by side. Each variant is
// a real `svc serve` process on its own SQLite file, in front of the fake upstream in its own
// process; load comes from autocannon in a child process: requests per second at fixed
// concurrency, then p50/p99 latency at a fixed rate. Both log as in production (info: one line
// per request), so only tracing differs.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { svcJson } from '../../test/cli/run-svc';
import { freePort, spawnSvc, type SvcProcess } from '../../test/helpers/processes';
import type { BenchOptions, BenchRow } from '../types';

const exec = promisify(execFile);
const ROOT = path.join(__dirname, '../..');
const AUTOCANNON = path.join(ROOT, 'node_modules/autocannon/autocannon.js');
const CONNECTIONS = 32;
const RATE = 500;

interface Load {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly total: number;
}

function body(stream: boolean): string {
  return JSON.stringify({
    model: 'svc-pro',
    messages: [{ role: 'user', content: 'Say hello to the benchmark, in a dozen words or so.' }],
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

async function autocannon(url: string, key: string, stream: boolean, seconds: number, rate?: number): Promise<Load> {
  const args = [AUTOCANNON, '--json', '-c', String(CONNECTIONS), '-d', String(seconds), '-m', 'POST'];
  args.push('-H', 'content-type=application/json', '-H', `authorization=Bearer ${key}`, '-b', body(stream));
  if (rate !== undefined) args.push('-R', String(rate));
  const { stdout } = await exec(process.execPath, [...args, url], {
    maxBuffer: 16 * 1024 * 1024,
    timeout: (seconds + 60) * 1000,
  });
  const r = JSON.parse(stdout) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  };
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
    throw new Error(`${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts under load`);
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, total: r.requests.total };
}

async function startUpstreamProcess(): Promise<{ baseUrl: string; child: ChildProcess }> {
  const script = `require(${JSON.stringify(path.join(ROOT, 'test/fakes/openai-upstream.ts'))}).startFakeUpstream().then((u) => console.log(u.baseUrl));`;
  const child = spawn(process.execPath, ['-r', require.resolve('tsx/cjs'), '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('http://'));
      if (line !== undefined) resolve(line.trim());
    });
    child.once('exit', (code) => reject(new Error(`fake upstream exited with ${code}`)));
  });
  return { baseUrl, child };
}

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

async function startServe(
  upstreamBaseUrl: string,
  otel: NodeJS.ProcessEnv,
): Promise<{ svc: SvcProcess; url: string; key: string; dir: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-tracing-'));
  const configPath = path.join(dir, 'svc.yaml');
  fs.writeFileSync(
    configPath,
    `models:
  svc-pro:
    provider: openai
    base_url: ${upstreamBaseUrl}
    api_key: bench
    upstream_model: fake-model-1
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 128000
    max_output_tokens: 4096
limits:
  requests_per_minute: 1000000000
`,
  );
  const env: NodeJS.ProcessEnv = { SVC_DATABASE_URL: `sqlite:${path.join(dir, 'bench.db')}`, SVC_CONFIG: configPath };
  const accountId = String((await svcJson(['account', 'create', '--name', 'bench'], env))['id']);
  const key = String((await svcJson(['key', 'create', '--account', accountId], env))['key']);
  await svcJson(['wallet', 'topup', '--account', accountId, '--amount', '1000000000000'], env);
  const port = await freePort();
  const svc = await spawnSvc(
    ['serve'],
    {
      ...env,
      ...otel,
      SVC_HTTP_ADDR: `127.0.0.1:${port}`,
      SVC_GRPC_ADDR: `127.0.0.1:${await freePort()}`,
      SVC_LOG_LEVEL: 'info',
    },
    'svc is ready',
  );
  return { svc, url: `http://127.0.0.1:${port}/v1/openai/chat/completions`, key, dir };
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 3;
  const out: BenchRow[] = [];
  const upstream = await startUpstreamProcess();
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
      const target = await startServe(upstream.baseUrl, variant.otel);
      const bytesBefore = sink.bytes();
      let requests = 0;
      try {
        for (const stream of [false, true]) {
          const mode = stream ? 'stream' : 'non-stream';
          await autocannon(target.url, target.key, stream, warmup);
          const load = await autocannon(target.url, target.key, stream, seconds);
          const paced = await autocannon(target.url, target.key, stream, seconds, RATE);
          requests += load.total + paced.total;
          console.log(
            `  ${variant.name} ${mode}: ${load.requestsPerSecond.toFixed(0)} req/s at c=${CONNECTIONS}; p50 ${paced.p50} ms, p99 ${paced.p99} ms at ${RATE} req/s`,
          );
          out.push(
            {
              scenario: `svc serve chat ${mode} c=${CONNECTIONS}`,
              variant: variant.name,
              metric: 'throughput',
              value: load.requestsPerSecond,
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
        // A graceful stop flushes the spans still queued, so the bytes below are complete.
        await target.svc.stop();
        fs.rmSync(target.dir, { recursive: true, force: true });
      }
      const exported = sink.bytes() - bytesBefore;
      if (variant.otel['OTEL_EXPORTER_OTLP_ENDPOINT'] !== undefined && exported === 0)
        throw new Error('tracing on, but no span reached the receiver');
      console.log(
        `  ${variant.name}: ${(exported / 1024 / 1024).toFixed(1)} MiB of OTLP exported for about ${requests} requests`,
      );
    }
  } finally {
    upstream.child.kill();
    await sink.close();
  }
  return out;
}
