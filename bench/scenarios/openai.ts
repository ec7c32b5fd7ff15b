// Gateway overhead of the OpenAI-compatible API: chat completions, non-streaming and streaming,
// sent three ways to the same fake upstream (test/fakes/openai-upstream.ts, in a child process
// so it never shares an event loop with what is measured): directly; through a bare Node
// passthrough proxy (undici pool, no auth, no billing); and through svc as `svc serve` runs it
// (gateway → gRPC → core: auth, rate limit, wallet hold, upstream, settle, usage record). Load
// comes from autocannon in a child process: requests per second at fixed concurrency, then
// p50/p99 latency at a fixed request rate, from which the added latency is computed.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { Pool } from 'undici';
import { connectCore } from '../../adapters/http/core-client';
import { startGateway } from '../../adapters/http/server';
import { parseConfig } from '../../core/config/load';
import { createCore } from '../../core/create-core';
import { startCoreServer } from '../../core/server/start';
import { migrate, openStore } from '../../core/store/db';
import type { BenchOptions, BenchRow } from '../types';

const exec = promisify(execFile);
const ROOT = path.join(__dirname, '../..');
const AUTOCANNON = path.join(ROOT, 'node_modules/autocannon/autocannon.js');
const CONNECTIONS = 32;
const RATE = 500;
// The fake's default usage (100 prompt, 50 completion tokens) at this tariff costs 45 credits.
const PRICE = { input: 150_000n, output: 600_000n };
const COST_PER_CALL = 45n;

interface Target {
  readonly name: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly model: string;
  close(): Promise<void>;
}

interface Load {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly total: number;
}

function body(model: string, stream: boolean): string {
  return JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello to the benchmark, in a dozen words or so.' }],
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

async function autocannon(target: Target, stream: boolean, seconds: number, rate?: number): Promise<Load> {
  const headers = Object.entries({ 'content-type': 'application/json', ...target.headers }).flatMap(([k, v]) => [
    '-H',
    `${k}=${v}`,
  ]);
  const args = [
    AUTOCANNON,
    '--json',
    '-c',
    String(CONNECTIONS),
    '-d',
    String(seconds),
    '-m',
    'POST',
    ...headers,
    '-b',
    body(target.model, stream),
  ];
  if (rate !== undefined) args.push('-R', String(rate));
  const { stdout } = await exec(process.execPath, [...args, target.url], {
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
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) {
    throw new Error(`${target.name}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts under load`);
  }
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, total: r.requests.total };
}

/** The fake upstream in its own process; resolves with its base URL. */
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

/** A bare Node passthrough proxy: the least any gateway must do (one extra HTTP hop). */
async function startProxy(upstreamBaseUrl: string): Promise<Target> {
  const upstream = new URL(upstreamBaseUrl);
  const pool = new Pool(upstream.origin, { connections: 128, pipelining: 1 });
  const server = http.createServer((req, res) => {
    pool
      .request({
        path: `${upstream.pathname}/chat/completions`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: req,
      })
      .then(async ({ statusCode, headers, body: upstreamBody }) => {
        res.writeHead(statusCode, { 'content-type': String(headers['content-type'] ?? 'application/json') });
        for await (const chunk of upstreamBody) res.write(chunk);
        res.end();
      })
      .catch(() => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    name: 'passthrough proxy',
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: {},
    model: 'fake-model-1',
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.close();
    },
  };
}

/** svc as `svc serve` runs it, on a temp SQLite file, with model svc-pro on the fake upstream. */
async function startSvcTarget(upstreamBaseUrl: string): Promise<Target & { check(): Promise<number> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-openai-'));
  const logger = pino({ level: 'silent' });
  const yaml = `models:
  svc-pro:
    provider: openai
    base_url: ${upstreamBaseUrl}
    api_key: bench
    upstream_model: fake-model-1
    price: { input_per_1m: ${PRICE.input}, output_per_1m: ${PRICE.output} }
    context_window: 128000
    max_output_tokens: 4096
limits:
  requests_per_minute: 1000000000
`;
  const config = parseConfig(yaml, {}, 'bench');
  const store = openStore(`sqlite:${path.join(dir, 'bench.db')}`);
  await migrate(store);
  const core = createCore({ config, store, logger, adminToken: undefined });
  const coreServer = await startCoreServer(core, '127.0.0.1:0');
  const connection = connectCore(coreServer.address);
  const gateway = await startGateway({
    connection,
    logger,
    host: '127.0.0.1',
    port: 0,
    maxBodyBytes: config.limits.maxBodyBytes,
  });
  const account = await core.accounts.create('bench');
  const { secret } = await core.keys.create({ accountId: account.id, name: 'bench' });
  const start = 1_000_000_000_000n;
  await core.deps.wallet.topUp({ accountId: account.id, amount: start, reference: 'bench' });
  return {
    name: 'svc',
    url: `${gateway.url}/v1/openai/chat/completions`,
    headers: { authorization: `Bearer ${secret}` },
    model: 'svc-pro',
    // Every answered call must have been billed exactly once at the exact price; calls cut off
    // when a run ends are settled as cancelled (charged what they produced), so holds are awaited.
    async check() {
      let wallet = await core.deps.wallet.get(account.id);
      for (let i = 0; i < 200 && wallet.held !== 0n; i += 1) {
        await new Promise((r) => setTimeout(r, 25));
        wallet = await core.deps.wallet.get(account.id);
      }
      if (wallet.held !== 0n) throw new Error(`svc: ${wallet.held} credits still held after the run`);
      const rows = await store.db.selectFrom('usage_records').select(['status', 'cost']).execute();
      const recorded = rows.reduce((sum, r) => sum + r.cost, 0n);
      const ok = rows.filter((r) => r.status === 'ok');
      if (start - wallet.balance !== recorded)
        throw new Error(`svc: wallet charged ${start - wallet.balance}, usage records say ${recorded}`);
      if (ok.some((r) => r.cost !== COST_PER_CALL))
        throw new Error(`svc: an ok call was not charged exactly ${COST_PER_CALL}`);
      return ok.length;
    },
    async close() {
      await gateway.close(1000);
      connection.close();
      await coreServer.close(1000);
      core.stop();
      await store.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 3;
  const out: BenchRow[] = [];
  const { baseUrl, child } = await startUpstreamProcess();
  const direct: Target = {
    name: 'direct',
    url: `${baseUrl}/chat/completions`,
    headers: {},
    model: 'fake-model-1',
    close: () => Promise.resolve(),
  };
  const p50s = new Map<string, number>();
  const p99s = new Map<string, number>();
  try {
    for (const start of [() => Promise.resolve(direct), () => startProxy(baseUrl), () => startSvcTarget(baseUrl)]) {
      const target = await start();
      try {
        for (const stream of [false, true]) {
          const mode = stream ? 'stream' : 'non-stream';
          const variant =
            target.name === 'svc'
              ? 'svc (auth, hold, settle, usage)'
              : target.name === 'direct'
                ? 'direct to upstream'
                : 'bare passthrough proxy';
          await autocannon(target, stream, warmup);
          const load = await autocannon(target, stream, seconds);
          const paced = await autocannon(target, stream, seconds, RATE);
          console.log(
            `  ${target.name} ${mode}: ${load.requestsPerSecond.toFixed(0)} req/s at c=${CONNECTIONS}; p50 ${paced.p50} ms, p99 ${paced.p99} ms at ${RATE} req/s`,
          );
          out.push(
            {
              scenario: `openai chat ${mode} c=${CONNECTIONS}`,
              variant,
              metric: 'throughput',
              value: load.requestsPerSecond,
              unit: 'req/s',
            },
            {
              scenario: `openai chat ${mode} @${RATE} req/s`,
              variant,
              metric: 'latency p50',
              value: paced.p50,
              unit: 'ms',
            },
            {
              scenario: `openai chat ${mode} @${RATE} req/s`,
              variant,
              metric: 'latency p99',
              value: paced.p99,
              unit: 'ms',
            },
          );
          p50s.set(`${target.name} ${mode}`, paced.p50);
          p99s.set(`${target.name} ${mode}`, paced.p99);
        }
        if ('check' in target && typeof target.check === 'function') {
          const calls = await (target.check as () => Promise<number>)();
          console.log(`  svc billed ${calls} calls exactly`);
        }
      } finally {
        await target.close();
      }
    }
  } finally {
    child.kill();
  }
  for (const mode of ['non-stream', 'stream']) {
    for (const via of ['passthrough proxy', 'svc']) {
      const variant = via === 'svc' ? 'svc (auth, hold, settle, usage)' : 'bare passthrough proxy';
      const scenario = `openai chat ${mode} added latency @${RATE} req/s`;
      out.push(
        {
          scenario,
          variant,
          metric: 'added p50 vs direct',
          value: (p50s.get(`${via} ${mode}`) ?? 0) - (p50s.get(`direct ${mode}`) ?? 0),
          unit: 'ms',
        },
        {
          scenario,
          variant,
          metric: 'added p99 vs direct',
          value: (p99s.get(`${via} ${mode}`) ?? 0) - (p99s.get(`direct ${mode}`) ?? 0),
          unit: 'ms',
        },
      );
    }
  }
  return out;
}
