// MCP tools/call throughput: svc's /v1/mcp (auth, wallet hold, provider, settle, usage record,
// over the gRPC hop) next to the MCP SDK's stateless Streamable HTTP example (a server and a
// transport built per request, no auth, no billing) serving the same trivial tool: the offline
// sandbox maps search. Load comes from autocannon in a child process, so the load generator does
// not share the event loop with the servers it measures.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { connectCore } from '../../adapters/http/core-client';
import { startGateway } from '../../adapters/http/server';
import { parseConfig } from '../../core/config/load';
import { createCore } from '../../core/create-core';
import { createSandboxMaps } from '../../core/providers/sandbox-tools';
import { startCoreServer } from '../../core/server/start';
import { migrate, openStore } from '../../core/store/db';
import { MAPS_SEARCH_PLACES } from '../../core/tools/definitions';
import { TEHRAN } from '../../core/tools/geo';
import type { BenchOptions, BenchRow } from '../types';

const exec = promisify(execFile);
const AUTOCANNON = path.join(__dirname, '../../node_modules/autocannon/autocannon.js');
const CONNECTIONS = 32;
const PRICE = 460n;
const CALL = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'maps_search_places', arguments: { query: 'داروخانه', limit: 3 } },
});

interface Target {
  readonly url: string;
  readonly headers: Record<string, string>;
  close(): Promise<void>;
}

interface Load {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly total: number;
}

// tools/list needs the key (svc) but no wallet: it shows the adapter and the gRPC hop alone.
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });

async function autocannon(target: Target, seconds: number, body: string = CALL): Promise<Load> {
  const headers = Object.entries({
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...target.headers,
  }).flatMap(([k, v]) => ['-H', `${k}=${v}`]);
  const { stdout } = await exec(
    process.execPath,
    [
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
      body,
      target.url,
    ],
    {
      maxBuffer: 16 * 1024 * 1024,
      timeout: (seconds + 60) * 1000,
    },
  );
  const r = JSON.parse(stdout) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
    timeouts: number;
  };
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) {
    throw new Error(`${target.url}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts under load`);
  }
  return { requestsPerSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, total: r.requests.total };
}

/** svc as `svc serve` runs it (core over gRPC on loopback, gateway), on a temp SQLite file. */
async function startSvcTarget(): Promise<Target & { charged(): Promise<{ charged: bigint; okCalls: number }> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-mcp-'));
  const logger = pino({ level: 'silent' });
  // The built-in sandbox tools, with the per-key rate limit out of the way of the measurement.
  const config = parseConfig('limits:\n  requests_per_minute: 1000000000\n', {}, 'bench');
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
    url: `${gateway.url}/v1/mcp`,
    headers: { authorization: `Bearer ${secret}` },
    async charged() {
      const wallet = await core.deps.wallet.get(account.id);
      if (wallet.held !== 0n) throw new Error(`svc: ${wallet.held} credits still held after the run`);
      const ok = await store.db
        .selectFrom('usage_records')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', '=', 'ok')
        .executeTakeFirstOrThrow();
      return { charged: start - wallet.balance, okCalls: Number(ok.n) };
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

/** The SDK's stateless example, as written: a new McpServer and transport for every POST. */
async function startBareSdkTarget(): Promise<Target> {
  const maps = createSandboxMaps();
  const inputSchema = {
    query: z.string().min(1).max(200),
    latitude: z.number().optional(),
    longitude: z.number().optional(),
    limit: z.number().int().min(1).max(30).optional(),
  };
  const server = http.createServer((req, res) => {
    const mcp = new McpServer({ name: 'bare', version: '1.0.0' });
    mcp.registerTool(
      'maps_search_places',
      { title: MAPS_SEARCH_PLACES.title, description: MAPS_SEARCH_PLACES.description, inputSchema },
      async (args) => {
        const { items } = await maps.run(
          {
            query: args.query,
            latitude: args.latitude ?? TEHRAN.latitude,
            longitude: args.longitude ?? TEHRAN.longitude,
            limit: args.limit ?? 10,
          },
          new AbortController().signal,
        );
        const structuredContent = { query: args.query, results: items };
        return { content: [{ type: 'text', text: JSON.stringify(structuredContent) }], structuredContent };
      },
    );
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    mcp
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    headers: {},
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function rows(method: string, variant: string, load: Load): BenchRow[] {
  const scenario = `mcp ${method} c=${CONNECTIONS}`;
  return [
    { scenario, variant, metric: 'throughput', value: load.requestsPerSecond, unit: 'calls/s' },
    { scenario, variant, metric: 'latency p50', value: load.p50, unit: 'ms' },
    { scenario, variant, metric: 'latency p99', value: load.p99, unit: 'ms' },
  ];
}

const BARE = 'bare SDK stateless server (no auth, no billing)';
const SVC = 'svc /v1/mcp (auth, hold, settle, usage)';

/** Runs both servers in this process, one after the other, under the same load. */
export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 3 : 10;
  const warmup = opts.quick ? 1 : 3;
  const calls: BenchRow[] = [];
  const lists: BenchRow[] = [];

  const bare = await startBareSdkTarget();
  try {
    await autocannon(bare, warmup);
    const load = await autocannon(bare, seconds);
    console.log(`  bare SDK stateless server: ${load.requestsPerSecond.toFixed(0)} tools/call per s`);
    calls.push(...rows('tools/call', BARE, load));
    lists.push(...rows('tools/list', BARE, await autocannon(bare, seconds, LIST)));
  } finally {
    await bare.close();
  }

  const svc = await startSvcTarget();
  try {
    const warm = await autocannon(svc, warmup);
    const load = await autocannon(svc, seconds);
    // The number only counts if every call was really billed: one settled charge per call.
    const { charged, okCalls } = await svc.charged();
    if (charged !== BigInt(okCalls) * PRICE || okCalls < warm.total + load.total) {
      throw new Error(
        `svc: charged ${charged} for ${okCalls} ok calls (${warm.total + load.total} answered), expected ${PRICE} each`,
      );
    }
    console.log(`  svc /v1/mcp: ${load.requestsPerSecond.toFixed(0)} tools/call per s, ${okCalls} calls billed`);
    calls.push(...rows('tools/call', SVC, load));
    lists.push(
      ...rows('tools/list', SVC.replace('hold, settle, usage', 'no billing'), await autocannon(svc, seconds, LIST)),
    );
  } finally {
    await svc.close();
  }
  return [...calls, ...lists];
}
