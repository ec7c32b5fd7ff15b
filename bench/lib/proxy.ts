// A bare Node passthrough proxy, the least any gateway must do (one extra HTTP hop, no auth, no
// billing): `node -r tsx/cjs bench/lib/proxy.ts UPSTREAM_BASE_URL [WORKERS]` prints its own URL and
// forwards POST …/chat/completions to the upstream through an undici pool. With WORKERS > 1 it
// runs as `svc serve --workers N` does (node:cluster, one port), so the two compare the same way.
import cluster from 'node:cluster';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

async function main(upstreamBaseUrl: string): Promise<void> {
  const upstream = new URL(upstreamBaseUrl);
  const pool = new Pool(upstream.origin, { connections: 256, pipelining: 1 });
  const server = http.createServer((req, res) => {
    pool
      .request({
        path: `${upstream.pathname}/chat/completions`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: req,
      })
      .then(async ({ statusCode, headers, body }) => {
        res.writeHead(statusCode, { 'content-type': String(headers['content-type'] ?? 'application/json') });
        for await (const chunk of body) res.write(chunk);
        res.end();
      })
      .catch(() => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  if (cluster.isWorker) process.send?.({ port });
  else console.log(`http://127.0.0.1:${port}/v1`);
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
    void pool.close();
  });
}

/** The primary of WORKERS processes: prints the URL once every one listens, stops them on SIGTERM. */
function primary(workers: number): void {
  let listening = 0;
  for (let i = 0; i < workers; i += 1)
    cluster.fork().on('message', (message: { port: number }) => {
      listening += 1;
      if (listening === workers) console.log(`http://127.0.0.1:${message.port}/v1`);
    });
  process.once('SIGTERM', () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
  });
}

const target = process.argv[2];
const workers = Number(process.argv[3] ?? '1');
if (target === undefined || !(workers >= 1)) {
  console.error('usage: proxy.ts UPSTREAM_BASE_URL [WORKERS]');
  process.exit(2);
}
if (cluster.isPrimary && workers > 1) primary(workers);
else
  main(target).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
