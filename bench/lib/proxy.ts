// A bare Node passthrough proxy, the least any gateway must do (one extra HTTP hop, no auth, no
// billing): `node -r tsx/cjs bench/lib/proxy.ts UPSTREAM_BASE_URL` prints its own URL and
// forwards POST …/chat/completions to the upstream through an undici pool.
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
  console.log(`http://127.0.0.1:${port}/v1`);
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close();
    void pool.close();
  });
}

const target = process.argv[2];
if (target === undefined) {
  console.error('usage: proxy.ts UPSTREAM_BASE_URL');
  process.exit(2);
}
main(target).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
