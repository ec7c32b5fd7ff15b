// Sizing figures for split replicas (README "Scaling out", docs/deploy.md): one `svc core` and one
// `svc gateway` as separate processes on MariaDB, under a fixed load of chat calls (the bench's
// fake upstream, answering at once) and of MCP tool calls (the sandbox maps tool). For each
// process: CPU seconds used (utime + stime from /proc/PID/stat) and so requests per CPU-second,
// and peak RSS (VmHWM). For the database: rows changed per request, from MariaDB's
// information_schema.TABLE_STATISTICS for this run's database only (the server may be shared;
// userstat is switched on for the run and restored after).
//
//   npx tsx bench/replicas.ts [--seconds N] [--connections N]
//   SVC_BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/x   (the server; the database is created and dropped)
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { autocannon } from './lib/autocannon';
import { killChildren, ROOT, startChild, type Child } from './lib/children';
import { intArg, startBenchUpstream } from './lib/upstream';

const exec = promisify(execFile);
const SVC = path.join(ROOT, 'bin', 'svc.js');

function cpuSeconds(pid: number): number {
  // Fields 14 and 15 of /proc/PID/stat (after the command in parentheses): utime, stime in ticks.
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function peakRssMiB(pid: number): number {
  const m = /^VmHWM:\s+(\d+)\s+kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? NaN : Number(m[1]) / 1024;
}

async function freePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const seconds = intArg(argv, '--seconds', 15);
  const connections = intArg(argv, '--connections', 32);
  const server = new URL(process.env['SVC_BENCH_MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306/svc_bench');
  const dbName = `svc_bench_replicas_${process.pid}`;
  const admin = await mysql.createConnection({
    host: server.hostname,
    port: Number(server.port || 3306),
    user: decodeURIComponent(server.username),
    password: decodeURIComponent(server.password),
  });
  await admin.query(`CREATE DATABASE \`${dbName}\` CHARACTER SET utf8mb4`);
  const [[userstat]] = (await admin.query('SELECT @@global.userstat AS v')) as unknown as [[{ v: number }]];
  await admin.query('SET GLOBAL userstat = 1');
  const dbUrl = new URL(server);
  dbUrl.pathname = `/${dbName}`;

  const upstream = await startBenchUpstream({ latencyMs: 0, chunks: 16 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-replicas-'));
  const configFile = path.join(dir, 'svc.yaml');
  fs.writeFileSync(
    configFile,
    `models:
  svc-pro:
    provider: openai
    base_url: ${upstream.baseUrl}
    api_key: bench
    upstream_model: bench-model
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    max_output_tokens: 100
limits:
  requests_per_minute: 100000000
  concurrent_per_key: 0
  concurrent_per_account: 0
`,
  );
  const env = { ...process.env, SVC_DATABASE_URL: dbUrl.toString(), SVC_CONFIG: configFile, SVC_LOG_LEVEL: 'warn' };
  const children: Child[] = [];
  try {
    const cli = async (...args: string[]): Promise<Record<string, unknown>> =>
      JSON.parse((await exec(process.execPath, [SVC, ...args, '--json'], { env })).stdout) as Record<string, unknown>;
    await cli('migrate');
    const account = String((await cli('account', 'create', '--name', 'replicas'))['id']);
    const key = String((await cli('key', 'create', '--account', account))['key']);
    await cli('wallet', 'topup', '--account', account, '--amount', '1000000000000');

    const grpc = `127.0.0.1:${await freePort()}`;
    const httpPort = await freePort();
    const core = await startChild(process.execPath, [SVC, 'core'], {
      env: { ...env, SVC_GRPC_ADDR: grpc, SVC_LOG_LEVEL: 'info' },
      ready: /core listening/,
    });
    children.push(core);
    const gateway = await startChild(process.execPath, [SVC, 'gateway', '--core', grpc], {
      env: { ...env, SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`, SVC_LOG_LEVEL: 'info' },
      ready: /gateway listening/,
    });
    children.push(gateway);
    const base = `http://127.0.0.1:${httpPort}`;
    const headers = { authorization: `Bearer ${key}` };
    const loads = {
      chat: {
        url: `${base}/v1/openai/chat/completions`,
        headers,
        body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'hello' }] }),
      },
      tool: {
        url: `${base}/v1/mcp`,
        headers: { ...headers, accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'maps_search_places', arguments: { query: 'coffee' } },
        }),
      },
    };
    const rowsChanged = async (): Promise<number> => {
      const [rows] = (await admin.query(
        'SELECT COALESCE(SUM(ROWS_CHANGED), 0) AS n FROM information_schema.TABLE_STATISTICS WHERE TABLE_SCHEMA = ?',
        [dbName],
      )) as unknown as [{ n: string | number }[]];
      return Number(rows[0]?.n ?? 0);
    };
    // Warm up (JIT, pools), then measure each load on its own.
    await autocannon({ ...loads.chat, connections, seconds: 3 });
    const results: Record<string, unknown>[] = [];
    for (const [name, load] of Object.entries(loads)) {
      const before = { core: cpuSeconds(core.pid), gateway: cpuSeconds(gateway.pid), rows: await rowsChanged() };
      const run = await autocannon({ ...load, connections, seconds });
      const cpu = { core: cpuSeconds(core.pid) - before.core, gateway: cpuSeconds(gateway.pid) - before.gateway };
      const rows = (await rowsChanged()) - before.rows;
      results.push({
        load: name,
        requests: run.total,
        requestsPerSecond: Math.round(run.requestsPerSecond),
        coreCpuSeconds: Number(cpu.core.toFixed(2)),
        gatewayCpuSeconds: Number(cpu.gateway.toFixed(2)),
        requestsPerCoreCpuSecond: Math.round(run.total / cpu.core),
        requestsPerGatewayCpuSecond: Math.round(run.total / cpu.gateway),
        rowsChangedPerRequest: Number((rows / run.total).toFixed(2)),
      });
    }
    const summary = {
      when: new Date().toISOString(),
      machine: `${os.cpus()[0]?.model ?? 'cpu'} × ${os.cpus().length}, load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')}`,
      node: process.version,
      seconds,
      connections,
      results,
      peakRssMiB: { core: Math.round(peakRssMiB(core.pid)), gateway: Math.round(peakRssMiB(gateway.pid)) },
    };
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  } finally {
    await Promise.all(children.map((c) => c.stop(15_000)));
    killChildren();
    upstream.close();
    await admin.query(`SET GLOBAL userstat = ${Number(userstat.v) ? 1 : 0}`);
    await admin.query(`DROP DATABASE IF EXISTS \`${dbName}\``);
    await admin.end();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`replicas: ${error instanceof Error ? error.message : String(error)}\n`);
  killChildren();
  process.exit(1);
});
