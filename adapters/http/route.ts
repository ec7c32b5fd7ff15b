import type http from 'node:http';
import { context, type Context, type Span } from '@opentelemetry/api';
import type { Middleware } from 'koa';

/**
 * The route a request took, as a template (`/v1/openai/responses/:id`), never its raw path (ids,
 * typos): the `http.route` of its server span, and the route label of its log line and metrics.
 * The request log starts it, the gateway's mount table adds the prefix, the adapter's router
 * names the rest.
 */
interface RouteState {
  readonly span: Span | undefined;
  /** The request's own context (the HTTP server span's), for the mounted app to run in. */
  readonly context: Context;
  prefix: string | undefined;
  route: string | undefined;
}

const ROUTE = Symbol('svc.http.route');
type Tracked = http.IncomingMessage & { [ROUTE]?: RouteState };

/** Starts tracking the route of `req`; `span` (the HTTP server span, if any) gets `http.route`. */
export function trackRoute(req: http.IncomingMessage, span: Span | undefined): void {
  (req as Tracked)[ROUTE] = { span, context: context.active(), prefix: undefined, route: undefined };
}

/**
 * Runs `fn` in the context the request arrived in: the gateway's own routing (a Koa router layer,
 * which the Koa instrumentation gives a span) is not the parent of what the mounted app does, and
 * the app's `trace.getActiveSpan()` is the HTTP server span (the MCP adapter links traces to it).
 */
export function inRequestContext<T>(req: http.IncomingMessage, fn: () => T): T {
  const state = (req as Tracked)[ROUTE];
  return state === undefined ? fn() : context.with(state.context, fn);
}

/** The adapter mounted at `prefix` serves `req` (called before the prefix is stripped). */
export function mountedAt(req: http.IncomingMessage, prefix: string): void {
  const state = (req as Tracked)[ROUTE];
  if (state !== undefined) state.prefix = prefix;
}

/** Names the route of `req`: `template` is relative to the mount prefix. */
export function setRoute(req: http.IncomingMessage, template: string): void {
  const state = (req as Tracked)[ROUTE];
  if (state === undefined) return;
  const route = `${state.prefix ?? ''}${template === '/' && state.prefix !== undefined ? '' : template}`;
  state.route = route;
  state.span?.setAttribute('http.route', route);
  // The span name follows the HTTP semantic conventions once the route is known.
  state.span?.updateName(`${req.method ?? 'GET'} ${route}`);
}

/** The route named for `req`; else `PREFIX/other` inside an adapter, or undefined. */
export function routeOf(req: http.IncomingMessage): string | undefined {
  const state = (req as Tracked)[ROUTE];
  if (state?.route !== undefined) return state.route;
  return state?.prefix === undefined ? undefined : `${state.prefix}/other`;
}

/**
 * Router middleware that names the matched route: put it first on each route of a
 * `@koa/router` table (`router.get('/models', named, listModels)`), where `_matchedRoute` is that
 * route's template.
 */
export const named: Middleware = async (ctx, next) => {
  const template = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  if (typeof template === 'string') setRoute(ctx.req, template);
  await next();
};
