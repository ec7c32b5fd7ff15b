import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { METRICS_CONTENT_TYPE, createRegistry, type MetricsRegistry } from '../../core';
import { createApp as createAnthropicApp } from '../anthropic/app';
import { createApp as createConsoleApp } from '../console/app';
import { createApp as createMcpApp } from '../mcp/app';
import { createApp as createOAuthApp, isOAuthPath } from '../oauth/app';
import { createApp as createOpenAiApp } from '../openai/app';
import type { CoreConnection } from './core-client';
import { createRequestLog } from './request-log';
import type { AdapterDeps } from './types';

export interface Gateway {
  /** `http://HOST:PORT` of the bound listener. */
  readonly url: string;
  readonly server: http.Server;
  /** Stops accepting, waits for running requests (up to `graceMs`), then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

export interface GatewayOptions {
  readonly connection: CoreConnection;
  readonly logger: Logger;
  readonly host: string;
  readonly port: number;
  readonly maxBodyBytes: number;
  readonly allowedOrigins?: readonly string[];
  /** How long a streaming client may stop reading before its stream is cut (default 60 s). */
  readonly streamStallMs?: number;
  /**
   * Where the gateway's HTTP metrics go and what `GET /metrics` renders. `svc serve` passes the
   * core's registry, so one scrape shows both; by default the gateway has a registry of its own.
   */
  readonly metrics?: MetricsRegistry;
  /**
   * The bearer token `GET /metrics` on this (public) server requires: the admin token. None: the
   * metrics are not served here (SVC_METRICS_ADDR serves them on an address of their own).
   */
  readonly metricsToken?: string | undefined;
  /** Sent with console sign-ins so that the core believes the browser address (see AdapterDeps). */
  readonly adapterToken?: string | undefined;
  /** SVC_PUBLIC_URL: the OAuth issuer and the base of the MCP resource (default: each request's Host). */
  readonly publicUrl?: string | undefined;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The HTTP side: one Node server that hands `/v1/openai/*`, `/v1/anthropic/*` and `/v1/mcp*` to their Koa apps
 * (prefix stripped) and answers `/healthz` (process up) and `/readyz` (core reachable).
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { connection, logger } = options;
  const deps: AdapterDeps = {
    core: connection.clients,
    logger,
    maxBodyBytes: options.maxBodyBytes,
    allowedOrigins: options.allowedOrigins ?? [],
    streamStallMs: options.streamStallMs,
    adapterToken: options.adapterToken,
    publicUrl: options.publicUrl,
  };
  const openai = createOpenAiApp(deps).callback();
  const anthropic = createAnthropicApp(deps).callback();
  const mcp = createMcpApp(deps).callback();
  const consoleApp = createConsoleApp(deps).callback();
  const oauthApp = createOAuthApp(deps).callback();
  const metrics = options.metrics ?? createRegistry();
  const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
  const metricsDigest =
    options.metricsToken === undefined || options.metricsToken === '' ? undefined : digest(options.metricsToken);
  const requestLog = createRequestLog({ logger, metrics });

  function mount(prefix: string, req: http.IncomingMessage): boolean {
    const url = req.url ?? '/';
    if (url !== prefix && !url.startsWith(`${prefix}/`) && !url.startsWith(`${prefix}?`)) return false;
    req.url = url.slice(prefix.length) || '/';
    if (req.url.startsWith('?')) req.url = `/${req.url}`;
    return true;
  }

  function route(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (mount('/v1/openai', req)) return void openai(req, res);
    if (mount('/v1/anthropic', req)) return void anthropic(req, res);
    if (mount('/v1/mcp', req)) return void mcp(req, res);
    if (mount('/console', req)) return void consoleApp(req, res);
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    if (isOAuthPath(path)) return void oauthApp(req, res);
    if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
    if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
      // Credits per model and tool are the operator's business, not the public's.
      const bearer = /^\s*Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
      if (metricsDigest === undefined || bearer === undefined || !timingSafeEqual(digest(bearer), metricsDigest)) {
        res.setHeader('www-authenticate', 'Bearer');
        return sendJson(res, 401, {
          error: {
            message:
              metricsDigest === undefined
                ? 'GET /metrics is not served on this address without SVC_ADMIN_TOKEN; set SVC_METRICS_ADDR to serve it on an address of its own.'
                : "GET /metrics here needs the operator admin token (SVC_ADMIN_TOKEN) as 'Authorization: Bearer TOKEN', or scrape SVC_METRICS_ADDR.",
            type: 'invalid_request_error',
            param: null,
            code: 'invalid_api_key',
          },
        });
      }
      metrics
        .render()
        .then((text) => {
          res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
          res.end(req.method === 'HEAD' ? undefined : text);
        })
        .catch((error: unknown) => {
          logger.error({ err: error }, 'metrics rendering failed');
          sendJson(res, 500, {
            error: { message: 'metrics unavailable', type: 'server_error', param: null, code: null },
          });
        });
      return;
    }
    if (path === '/readyz') {
      connection
        .ready(AbortSignal.timeout(2000))
        .then((ok) => sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'core not serving' }))
        .catch(() => sendJson(res, 503, { status: 'core unreachable' }));
      return;
    }
    sendJson(res, 404, {
      error: {
        message: `No route for ${req.method ?? 'GET'} ${path}. The APIs live under /v1/openai, /v1/anthropic and /v1/mcp; the console is at /console.`,
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    });
  }

  const server = http.createServer((req, res) => requestLog.handle(req, res, () => route(req, res)));
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  // Receiving a request (headers and body) may take up to 5 minutes; responses, streams included,
  // are not bound by it.
  server.requestTimeout = 300_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  const url = `http://${host}:${port}`;
  logger.info({ url }, 'gateway listening (HTTP)');

  return {
    url,
    server,
    async close(graceMs = 10_000) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      timer.unref();
      await closed;
      clearTimeout(timer);
    },
  };
}
