import type http from 'node:http';
import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { MetricsRegistry } from '../../core/edge';
import { attachOutcome, type CoreOutcome } from './core-outcome';
import { routeOf, trackRoute } from './route';

// Probes and scrapes arrive every few seconds; at info they would drown the request lines.
const QUIET_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

export interface RequestLog {
  /** Serves one request through `handler`, then writes its one log line and its metrics. */
  handle(req: http.IncomingMessage, res: http.ServerResponse, handler: () => void): void;
}

/**
 * One structured line per HTTP request, written when the response is finished or the client has
 * gone: request id, trace id, route, status, latency, and what the core reported in its trailers
 * (account id, key id, cost). Never a key, a header, a body or a prompt.
 */
export function createRequestLog(deps: { logger: Logger; metrics: MetricsRegistry }): RequestLog {
  const requests = deps.metrics.counter(
    'svc_http_requests_total',
    'HTTP requests served by the gateway, by method, route and status.',
    ['method', 'route', 'status'],
  );
  const seconds = deps.metrics.histogram(
    'svc_http_request_duration_seconds',
    'HTTP request duration at the gateway, until the last byte of the response.',
    ['method', 'route', 'status'],
  );
  // The line's keys are fixed above and none is a redacted path: pino's redaction (its wildcard
  // paths run on every key of every line) would only copy and re-serialise it. The line still
  // passes the destination's scrubbing of key shapes like every other line.
  const logger = deps.logger.child({}, { redact: { paths: [] } });

  return {
    handle(req, res, handler) {
      const startedAt = performance.now();
      const method = req.method ?? 'GET';
      // The HTTP server span is active here (when tracing is on): its trace id joins the line to the
      // trace, and the route the request takes becomes its `http.route`.
      const span = trace.getActiveSpan();
      const traceId = span?.spanContext().traceId;
      trackRoute(req, span);
      const outcome: CoreOutcome = {};
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        // 499: the client went away before the response was complete (nginx's convention).
        const status = res.writableFinished ? res.statusCode : 499;
        const latency = performance.now() - startedAt;
        // Routes are fixed templates as labels, never raw paths (ids, typos): what the mount and
        // the adapters' routers named, or `other`.
        const route = routeOf(req) ?? (method === 'OPTIONS' ? 'preflight' : 'other');
        const labels = { method, route, status: String(status) };
        requests.inc(labels);
        seconds.observe(labels, latency / 1000);
        const requestId = res.getHeader('x-request-id');
        const clientRequestId = res.getHeader('x-client-request-id');
        const line = {
          requestId: typeof requestId === 'string' ? requestId : undefined,
          clientRequestId: typeof clientRequestId === 'string' ? clientRequestId : undefined,
          traceId,
          accountId: outcome.accountId,
          keyId: outcome.keyId,
          method,
          route,
          status,
          cost: outcome.cost === undefined ? undefined : Number(outcome.cost),
          latencyMs: Math.round(latency * 100) / 100,
        };
        if (QUIET_ROUTES.has(route)) logger.debug(line, 'request');
        else logger.info(line, 'request');
      };
      res.once('finish', finish);
      res.once('close', finish);
      attachOutcome(req, outcome);
      handler();
    },
  };
}
