import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { MetricsRegistry } from '../../core/edge';

/*
 * The HTTP server's own limits (issue 48 point 5, SPEC §4): open client connections are capped
 * in all and per client address, a request head must arrive within seconds, and a request body
 * that stops arriving is cut after seconds, not minutes. Node's defaults (no cap, a head kept
 * 85 s, a body 300 s) let one address that trickles bytes pin the process at its open-files
 * limit, the other tenants then getting resets.
 *
 * A connection over a cap is refused quickly: its first request is answered with a 503 in the
 * wire's shape (`/v1/openai` a 503 `service_unavailable`, `/v1/anthropic` a 529
 * `overloaded_error`, `/v1/gemini` a 503 `UNAVAILABLE`, `/v1/mcp` a JSON-RPC error, anything
 * else plain text), each with `retry-after`, and the connection is closed; one whose head does
 * not come within a second is closed without an answer. Refusals are counted in
 * `svc_http_connections_refused_total` (svc's own, never an upstream's error) and do not reach
 * the request log.
 */

export interface ConnectionLimits {
  /** Open client connections at most, in this process. */
  readonly max: number;
  /** Open client connections at most from one address, in this process. */
  readonly perAddress: number;
  /** How long a request's head may take to arrive, in milliseconds. */
  readonly headersTimeoutMs: number;
  /** How long a request's body may pause between bytes, in milliseconds. */
  readonly bodyIdleMs: number;
  /** How long the whole request (head and body) may take to arrive, in milliseconds. */
  readonly requestTimeoutMs: number;
}

/** A refused connection's head must come within this, or it is closed without an answer. */
const REFUSED_HEAD_MS = 1000;

const MESSAGE = 'svc is at its connection limit; retry shortly';

interface Answer {
  readonly status: number;
  readonly type: string;
  readonly body: string;
}

/** The "unavailable, retry" answer of the wire at `path` (plain text where no wire is known). */
export function busyAnswer(path: string): Answer {
  const json = (status: number, body: unknown): Answer => ({
    status,
    type: 'application/json',
    body: JSON.stringify(body),
  });
  if (path.startsWith('/v1/openai'))
    return json(503, { error: { message: MESSAGE, type: 'server_error', param: null, code: 'service_unavailable' } });
  if (path.startsWith('/v1/anthropic'))
    return json(529, { type: 'error', error: { type: 'overloaded_error', message: MESSAGE } });
  if (path.startsWith('/v1/gemini'))
    return json(503, { error: { code: 503, message: MESSAGE, status: 'UNAVAILABLE' } });
  if (path.startsWith('/v1/mcp'))
    return json(503, {
      jsonrpc: '2.0',
      id: null,
      error: { code: -32603, message: MESSAGE, data: { code: 'unavailable' } },
    });
  return { status: 503, type: 'text/plain; charset=utf-8', body: `${MESSAGE}\n` };
}

export interface ConnectionGuard {
  /** Answers `req` (and closes its connection) when that connection was refused; true then. */
  refused(req: http.IncomingMessage, res: http.ServerResponse): boolean;
  /** The same for a WebSocket upgrade. */
  refusedUpgrade(req: http.IncomingMessage, socket: Duplex): boolean;
  /** Cuts a request whose body stops arriving for `bodyIdleMs`. */
  watchBody(req: http.IncomingMessage): void;
  /** Open connections now (served ones; refused ones are not counted). */
  readonly open: number;
}

/** Applies `limits` to `server`; the caps are per process (each worker of `svc serve --workers N`). */
export function guardConnections(
  server: http.Server,
  limits: ConnectionLimits,
  metrics: MetricsRegistry,
): ConnectionGuard {
  const refusals = metrics.counter(
    'svc_http_connections_refused_total',
    'Client connections refused because svc was at a connection cap ("total" or "address"), answered 503 by svc itself.',
    ['limit'],
  );
  const openGauge = metrics.gauge('svc_http_connections_open', 'Client connections open now, in this process.');
  const refusedSockets = new WeakSet<Socket>();
  const byAddress = new Map<string, number>();
  let open = 0;

  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = Math.max(limits.requestTimeoutMs, limits.headersTimeoutMs + 1);
  // A backstop past the caps: beyond it Node closes a connection before reading anything.
  server.maxConnections = limits.max + limits.perAddress;

  server.prependListener('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const fromAddress = byAddress.get(address) ?? 0;
    const over = open >= limits.max ? 'total' : fromAddress >= limits.perAddress ? 'address' : undefined;
    if (over !== undefined) {
      refusals.inc({ limit: over });
      refusedSockets.add(socket);
      // The head must come at once; the answer then closes the connection.
      socket.setTimeout(REFUSED_HEAD_MS);
      return;
    }
    open += 1;
    byAddress.set(address, fromAddress + 1);
    openGauge.set({}, open);
    socket.once('close', () => {
      open -= 1;
      const left = (byAddress.get(address) ?? 1) - 1;
      if (left <= 0) byAddress.delete(address);
      else byAddress.set(address, left);
      openGauge.set({}, open);
    });
  });

  const pathOf = (req: http.IncomingMessage): string => (req.url ?? '/').split('?', 1)[0] ?? '/';

  return {
    get open() {
      return open;
    },
    refused(req, res) {
      if (!refusedSockets.has(req.socket)) return false;
      const answer = busyAnswer(pathOf(req));
      res.shouldKeepAlive = false;
      res.writeHead(answer.status, {
        'content-type': answer.type,
        'content-length': Buffer.byteLength(answer.body),
        'retry-after': '1',
        connection: 'close',
      });
      res.end(answer.body);
      return true;
    },
    refusedUpgrade(req, socket) {
      if (!refusedSockets.has(req.socket)) return false;
      const answer = busyAnswer(pathOf(req));
      socket.end(
        `HTTP/1.1 ${answer.status} Service Unavailable\r\ncontent-type: ${answer.type}\r\n` +
          `content-length: ${Buffer.byteLength(answer.body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n${answer.body}`,
      );
      return true;
    },
    watchBody(req) {
      const hasBody =
        req.headers['transfer-encoding'] !== undefined ||
        (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
      if (!hasBody || req.complete) return;
      const socket = req.socket;
      // Node closes a socket whose timeout fires with nobody listening for it: the body's reader
      // sees the request aborted. Reading resumes the socket's activity, and so the timer.
      socket.setTimeout(limits.bodyIdleMs);
      const done = (): void => {
        if (!socket.destroyed) socket.setTimeout(0);
      };
      req.once('end', done);
    },
  };
}
