import diagnostics from 'node:diagnostics_channel';
import type { SvcConfig } from '../config/types';

/** An upstream the configuration names: requests under `origin` + `pathPrefix` belong to `provider`. */
interface UpstreamRoute {
  readonly origin: string;
  readonly pathPrefix: string;
  readonly provider: string;
}

interface UndiciRequest {
  readonly origin?: unknown;
  readonly path?: unknown;
}

export interface UpstreamTimer {
  /** Stops listening. */
  close(): void;
}

function routesOf(config: SvcConfig): UpstreamRoute[] {
  const routes: UpstreamRoute[] = [];
  const add = (baseUrl: string, provider: string): void => {
    if (baseUrl === '') return;
    try {
      const url = new URL(baseUrl);
      routes.push({ origin: url.origin, pathPrefix: url.pathname.replace(/\/+$/, ''), provider });
    } catch {
      // A sandbox provider has no URL; the config loader has validated the others.
    }
  };
  for (const model of config.models.values())
    for (const upstream of model.upstreams)
      if (upstream.provider !== 'sandbox') add(upstream.baseUrl, upstream.provider);
  for (const tool of config.tools.values()) if (tool.provider !== 'sandbox') add(tool.baseUrl, tool.provider);
  // Longest prefix first, so that two providers behind one proxy origin are told apart.
  return routes.sort((a, b) => b.pathPrefix.length - a.pathPrefix.length);
}

/**
 * Times every upstream HTTP exchange through undici's diagnostics channels (the providers use
 * undici pools), so that no provider has to report its own latency: from the request being
 * created to its response headers, or to the error when no response came. Requests to origins
 * the configuration does not name (the OTLP exporter, anything else) are ignored.
 */
export function timeUpstreams(
  config: SvcConfig,
  record: (provider: string, status: string, seconds: number) => void,
): UpstreamTimer {
  const routes = routesOf(config);
  const started = new WeakMap<object, { provider: string; at: number }>();

  function providerOf(request: UndiciRequest): string | undefined {
    const origin = typeof request.origin === 'string' ? request.origin.replace(/\/+$/, '') : '';
    const path = typeof request.path === 'string' ? request.path : '';
    for (const r of routes) {
      if (
        r.origin === origin &&
        (r.pathPrefix === '' ||
          path === r.pathPrefix ||
          path.startsWith(`${r.pathPrefix}/`) ||
          path.startsWith(`${r.pathPrefix}?`))
      ) {
        return r.provider;
      }
    }
    return undefined;
  }

  const onCreate = (message: unknown): void => {
    const request = (message as { request?: UndiciRequest }).request;
    if (request === undefined) return;
    const provider = providerOf(request);
    if (provider !== undefined) started.set(request, { provider, at: performance.now() });
  };
  const finish = (request: object | undefined, status: string): void => {
    if (request === undefined) return;
    const start = started.get(request);
    if (start === undefined) return;
    started.delete(request);
    record(start.provider, status, (performance.now() - start.at) / 1000);
  };
  const onHeaders = (message: unknown): void => {
    const m = message as { request?: object; response?: { statusCode?: number } };
    finish(m.request, String(m.response?.statusCode ?? 'error'));
  };
  const onError = (message: unknown): void => finish((message as { request?: object }).request, 'error');

  if (routes.length > 0) {
    diagnostics.subscribe('undici:request:create', onCreate);
    diagnostics.subscribe('undici:request:headers', onHeaders);
    diagnostics.subscribe('undici:request:error', onError);
  }
  return {
    close() {
      if (routes.length === 0) return;
      diagnostics.unsubscribe('undici:request:create', onCreate);
      diagnostics.unsubscribe('undici:request:headers', onHeaders);
      diagnostics.unsubscribe('undici:request:error', onError);
    },
  };
}
