import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { CONTENT_TYPE, type MetricsRegistry } from './registry';

export interface MetricsServer {
  /** `http://HOST:PORT` of the bound listener. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * `GET /metrics` on its own listener, for a core that runs without the HTTP gateway
 * (`svc core` with `SVC_METRICS_ADDR`). Anything else is a 404.
 */
export async function startMetricsServer(options: {
  registry: MetricsRegistry;
  host: string;
  port: number;
  logger: Logger;
}): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
      return;
    }
    options.registry
      .render()
      .then((text) => {
        res.writeHead(200, { 'content-type': CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
        res.end(req.method === 'HEAD' ? undefined : text);
      })
      .catch((error: unknown) => {
        options.logger.error({ err: error }, 'metrics rendering failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n');
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${host}:${port}`;
  options.logger.info({ url: `${url}/metrics` }, 'metrics listening (HTTP)');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
