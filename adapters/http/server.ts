import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import { DEFAULT_LIMITS, METRICS_CONTENT_TYPE, createRegistry, type MetricsRegistry } from '../../core/edge';
import { createApp as createAnthropicApp } from '../anthropic/app';
import type * as ConsoleApp from '../console/app';
import { createApp as createGeminiApp } from '../gemini/app';
import { createApp as createMcpApp } from '../mcp/app';
import { createApp as createOAuthApp, isOAuthPath } from '../oauth/app';
import { createApp as createOpenAiApp } from '../openai/app';
import { createResponsesWebSocket } from '../openai/websocket';
import { guardConnections, type ConnectionLimits } from './connections';
import type { CoreConnection } from './core-client';
import { handleCors } from './cors';
import { createRequestLog } from './request-log';
import { inRequestContext, mountedAt, setRoute } from './route';
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
  /** `limits.max_upload_bytes` (default 25 MiB). */
  readonly maxUploadBytes?: number;
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
  /** Whether the console offers the operator's sign-in (SVC_ADMIN_TOKEN is set); default true. */
  readonly operatorSignIn?: boolean | undefined;
  /** WebSocket mode of /v1/openai/responses (config `responses.websockets`, default true); off: 426. */
  readonly websockets?: boolean;
  /**
   * What `GET /metrics` answers (default: `metrics` rendered). A worker of `svc serve --workers N`
   * renders every worker's metrics together (cli/cluster.ts), not its own share.
   */
  readonly renderMetrics?: () => Promise<string>;
  /** A worker of `svc serve --workers N`: its number (1..N), shown with its pid by `/healthz`. */
  readonly worker?: number;
  /**
   * Caps on open connections and the request head and body timeouts (config `limits.*`,
   * adapters/http/connections.ts); default `connectionLimitsOf(DEFAULT_LIMITS)`.
   */
  readonly connectionLimits?: ConnectionLimits;
}

/** The gateway's connection limits from the config's `limits`. */
export function connectionLimitsOf(limits: {
  readonly maxConnections: number;
  readonly maxConnectionsPerAddress: number;
  readonly headersTimeoutSeconds: number;
  readonly bodyIdleSeconds: number;
  readonly requestTimeoutSeconds: number;
}): ConnectionLimits {
  return {
    max: limits.maxConnections,
    perAddress: limits.maxConnectionsPerAddress,
    headersTimeoutMs: limits.headersTimeoutSeconds * 1000,
    bodyIdleMs: limits.bodyIdleSeconds * 1000,
    requestTimeoutMs: limits.requestTimeoutSeconds * 1000,
  };
}

// What makes Koa's URL parsing (parseurl) leave its fast path: such a URL is routed by Koa.
const UNUSUAL_URL = /[\t\n\f\r #\u00a0\ufeff]/;

const GEMINI_ACTIONS = new Set([
  'generateContent',
  'streamGenerateContent',
  'countTokens',
  'embedContent',
  'batchEmbedContents',
]);

/** The Gemini API's routes (`/models/{model}:ACTION`): the model and method, never the query (it may hold `?key=`). */
function geminiRoute(path: string): string {
  const action = /:([A-Za-z]+)$/.exec(path)?.[1];
  if (action === undefined) return '/models';
  return GEMINI_ACTIONS.has(action) ? `/models/{model}:${action}` : '/other';
}

/**
 * The HTTP side: one Node server that hands `/v1/openai/*`, `/v1/anthropic/*`, `/v1/gemini/*` and `/v1/mcp*` to their Koa apps
 * (prefix stripped) and answers `/healthz` (process up) and `/readyz` (core reachable).
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { connection, logger } = options;
  const deps: AdapterDeps = {
    core: connection.clients,
    logger,
    maxBodyBytes: options.maxBodyBytes,
    maxUploadBytes: options.maxUploadBytes,
    allowedOrigins: options.allowedOrigins ?? [],
    streamStallMs: options.streamStallMs,
    adapterToken: options.adapterToken,
    publicUrl: options.publicUrl,
    operatorSignIn: options.operatorSignIn,
  };
  // The adapters by mount prefix (stripped before the app sees the request): mounting another
  // is one line here. `route` names the requests of an app that has no route table of its own
  // (a template, or one made from the path below the prefix).
  // `cors`: the model APIs answer browser clients (cors.ts).
  const mounts: readonly {
    prefix: string;
    /** The app, or what makes it on the first request under the prefix. */
    app: Koa<never> | (() => Koa<never>);
    route?: string | ((path: string) => string);
    cors?: true;
  }[] = [
    { prefix: '/v1/openai', app: createOpenAiApp(deps) as Koa<never>, cors: true },
    { prefix: '/v1/anthropic', app: createAnthropicApp(deps) as Koa<never>, cors: true },
    { prefix: '/v1/gemini', app: createGeminiApp(deps) as Koa<never>, route: geminiRoute, cors: true },
    { prefix: '/v1/mcp', app: createMcpApp(deps) as Koa<never>, route: '/' },
    // The console's pages (22 modules; ~0.7 MiB of live heap measured when they were 19), which svc
    // serve no longer loads at start, are required on its first request: a server that only
    // answers the APIs never loads them (docs/performance.md, Memory).
    {
      prefix: '/console',
      app: () =>
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        (require('../console/app') as typeof ConsoleApp).createApp(deps) as Koa<never>,
    },
  ];
  const oauthApp = createOAuthApp(deps).callback();
  const metrics = options.metrics ?? createRegistry();
  const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
  const metricsDigest =
    options.metricsToken === undefined || options.metricsToken === '' ? undefined : digest(options.metricsToken);
  const requestLog = createRequestLog({ logger, metrics });

  // The app answers on the raw request; `path` is the request's path (no query).
  const mounted = mounts.map(({ prefix, app, route, cors }) => {
    let made = typeof app === 'function' ? undefined : app.callback();
    const serve: ReturnType<Koa['callback']> = (req, res) =>
      (made ??= (app as () => Koa<never>)().callback())(req, res);
    return {
      prefix,
      below: `${prefix}/`,
      serve(req: http.IncomingMessage, res: http.ServerResponse, path: string): void {
        mountedAt(req, prefix);
        if (cors === true && handleCors(req, res)) return;
        if (route !== undefined) setRoute(req, typeof route === 'string' ? route : route(path.slice(prefix.length)));
        const url = req.url ?? '/';
        req.url = url.slice(prefix.length) || '/';
        if (req.url.startsWith('?')) req.url = `/${req.url}`;
        void inRequestContext(req, () => serve(req, res));
      },
    };
  });
  const router = new Router();
  for (const mount of mounted) {
    router.all([mount.prefix, `${mount.prefix}/{*rest}`], (ctx) => {
      ctx.respond = false;
      mount.serve(ctx.req, ctx.res, ctx.path);
    });
  }
  /**
   * The mount of a request whose path starts with `PREFIX/` exactly (the API calls): served
   * without the gateway's Koa context and router, which would only route it (a second Koa context
   * per request besides the app's own). Every other path (other casing, a bare prefix, a URL that
   * Koa parses differently: whitespace or `#`) goes through the router as before.
   */
  const directMount = (url: string): { mount: (typeof mounted)[number]; path: string } | undefined => {
    if (UNUSUAL_URL.test(url)) return undefined;
    for (const mount of mounted) {
      if (!url.startsWith(mount.below)) continue;
      const query = url.indexOf('?');
      return { mount, path: query === -1 ? url : url.slice(0, query) };
    }
    return undefined;
  };
  router.get('/healthz', (ctx) => {
    setRoute(ctx.req, '/healthz');
    ctx.body =
      options.worker === undefined ? { status: 'ok' } : { status: 'ok', worker: options.worker, pid: process.pid };
  });
  router.get('/readyz', async (ctx) => {
    setRoute(ctx.req, '/readyz');
    const ok = await connection.ready(AbortSignal.timeout(2000)).catch(() => undefined);
    ctx.status = ok === true ? 200 : 503;
    ctx.body = { status: ok === true ? 'ready' : ok === false ? 'core not serving' : 'core unreachable' };
  });
  // GET and HEAD (HEAD routes come with GET in @koa/router).
  router.get('/metrics', async (ctx) => {
    setRoute(ctx.req, '/metrics');
    // Credits per model and tool are the operator's business, not the public's.
    const bearer = /^\s*Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'))?.[1];
    if (metricsDigest === undefined || bearer === undefined || !timingSafeEqual(digest(bearer), metricsDigest)) {
      ctx.set('www-authenticate', 'Bearer');
      ctx.status = 401;
      ctx.body = {
        error: {
          message:
            metricsDigest === undefined
              ? 'GET /metrics is not served on this address without SVC_ADMIN_TOKEN; set SVC_METRICS_ADDR to serve it on an address of its own.'
              : "GET /metrics here needs the operator admin token (SVC_ADMIN_TOKEN) as 'Authorization: Bearer TOKEN', or scrape SVC_METRICS_ADDR.",
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      };
      return;
    }
    try {
      const text = await (options.renderMetrics ?? (() => metrics.render()))();
      ctx.type = METRICS_CONTENT_TYPE;
      ctx.body = text;
    } catch (error) {
      logger.error({ err: error }, 'metrics rendering failed');
      ctx.status = 500;
      ctx.body = { error: { message: 'metrics unavailable', type: 'server_error', param: null, code: null } };
    }
  });

  const gateway = new Koa();
  // Koa would print every error to stderr; these go to the log.
  gateway.on('error', (error: unknown) => logger.warn({ err: error }, 'gateway error'));
  gateway.use(router.routes());
  gateway.use((ctx) => {
    const { req, res } = ctx;
    const path = ctx.path;
    // The OAuth endpoints live at well-known paths, not under one prefix.
    if (isOAuthPath(path)) {
      ctx.respond = false;
      return void inRequestContext(req, () => oauthApp(req, res));
    }
    ctx.status = 404;
    ctx.body = {
      error: {
        message: `No route for ${ctx.method} ${path}. The APIs live under /v1/openai, /v1/anthropic, /v1/gemini and /v1/mcp; the console is at /console.`,
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    };
  });
  const handle = gateway.callback();

  // Node checks the head and request timeouts of open connections every this many ms (30 s by
  // default, which would let a 10 s head timeout run to 40 s).
  const server = http.createServer({ connectionsCheckingInterval: 1000 }, (req, res) => {
    if (guard.refused(req, res)) return;
    guard.watchBody(req);
    requestLog.handle(req, res, () => {
      const direct = directMount(req.url ?? '/');
      if (direct === undefined) return void handle(req, res);
      try {
        direct.mount.serve(req, res, direct.path);
      } catch (error) {
        // What Koa would have made of a throw in its router: the log line and a bare 500.
        logger.warn({ err: error }, 'gateway error');
        if (res.headersSent) return void res.destroy();
        res.statusCode = 500;
        res.setHeader('content-type', 'text/plain; charset=utf-8');
        res.end('Internal Server Error');
      }
    });
  });
  const guard = guardConnections(server, options.connectionLimits ?? connectionLimitsOf(DEFAULT_LIMITS), metrics);
  // WebSocket upgrades: the Responses API's WebSocket mode; any other path is a 404.
  const responsesWs = createResponsesWebSocket(deps, { enabled: options.websockets ?? true });
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (guard.refusedUpgrade(req, socket)) return;
    const path = (req.url ?? '/').split('?', 1)[0]?.replace(/\/+$/, '');
    if (path === '/v1/openai/responses') return responsesWs.handleUpgrade(req, socket, head);
    socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
  });
  // An idle kept-alive connection is closed after 65 s. The head and request timeouts are the
  // guard's (`limits.headers_timeout_seconds`, `limits.request_timeout_seconds`); responses,
  // streams included, are not bound by them.
  server.keepAliveTimeout = 65_000;

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
      responsesWs.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), graceMs);
      timer.unref();
      await closed;
      clearTimeout(timer);
    },
  };
}
