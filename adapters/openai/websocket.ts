import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type * as Ws from 'ws';
import type { RawData, WebSocket, WebSocketServer } from 'ws';
import { mappingFor, SvcError } from '../../core/edge';
import { callCore, clientSessionId, streamCore, type CallMeta } from '../http/core-client';
import { callerIds } from '../http/request';
import type { AdapterDeps } from '../http/types';
import { asSvcError, openAiError } from './errors';

/*
 * WebSocket mode of the Responses API (SPEC §7d): `GET /v1/openai/responses` with
 * `Upgrade: websocket` (Codex with `supports_websockets`, openai-node's ResponsesWS). Each
 * `{"type": "response.create", …CreateResponse}` message runs through the very core call the SSE
 * stream makes (ChatService.StreamResponse: the same hold, settle, billing and events), and every
 * event goes back as one message. This file is only the framing:
 * - the key is checked at the upgrade (401 without one or with a bad one) and by the core again on
 *   every response, so a key revoked while the connection is open stops at its next response
 *   (the error message, then close 1008);
 * - one response at a time per connection; a client that leaves mid-response aborts the core
 *   call, which charges what the upstream produced and releases the rest of the hold;
 * - `previous_response_id` naming the connection's last response works without `store` (the
 *   connection keeps that response's conversation and sends it as input, as a stateless client
 *   would); any other id goes to the core (stored responses), and an unknown one is
 *   `previous_response_not_found`;
 * - `generate: false` warms up: the request is validated by the core (no model call, no charge)
 *   and answered as an empty completed response whose id later turns can continue from;
 * - errors are `{"type": "error", "status_code", "error": {message, type, param, code}}`;
 * - pings every 30 s; a peer that misses one is dropped.
 * With `responses.websockets: false` the upgrade is answered 426 at once (Codex then uses HTTP).
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const PING_MS = 30_000;

/** An HTTP answer to an upgrade that is refused (the socket is still raw HTTP then). */
function refuseUpgrade(socket: Duplex, status: number, reason: string, error: Obj, headers: Obj = {}): void {
  const body = JSON.stringify({ error });
  const lines = [
    `HTTP/1.1 ${status} ${reason}`,
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${String(v)}`),
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  426: 'Upgrade Required',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

function inputItems(input: unknown): unknown[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? input : [];
}

export interface ResponsesWebSocket {
  /** Takes an upgrade of `/v1/openai/responses` (the caller checked the path). */
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes every open connection. */
  close(): void;
}

export function createResponsesWebSocket(deps: AdapterDeps, options: { enabled: boolean }): ResponsesWebSocket {
  const { core, logger } = deps;
  // `ws` (~1.2 MiB of heap) is required on the first upgrade: a server that never sees one never
  // loads it (docs/performance.md, Memory).
  let wss: WebSocketServer | undefined;
  const server = (): WebSocketServer => {
    if (wss !== undefined) return wss;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { WebSocketServer } = require('ws') as typeof Ws;
    wss = new WebSocketServer({ noServer: true, maxPayload: deps.maxBodyBytes });
    // The handshake answer echoes Codex's sticky-routing token, like every HTTP response does.
    wss.on('headers', (headers, req) => {
      const turn = req.headers['x-codex-turn-state'];
      if (typeof turn === 'string' && turn.length <= 1024 && !/[\r\n]/.test(turn))
        headers.push(`x-codex-turn-state: ${turn}`);
    });
    return wss;
  };

  async function handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    if (!options.enabled) {
      refuseUpgrade(socket, 426, REASONS[426] ?? '', {
        message: 'WebSocket mode is turned off on this server: use POST /v1/openai/responses (SSE) instead.',
        type: 'invalid_request_error',
        param: null,
        code: 'websockets_disabled',
      });
      return;
    }
    const authorization = req.headers.authorization;
    try {
      if (authorization === undefined || authorization === '')
        throw new SvcError(
          'missing_api_key',
          "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer svc_sk_...).",
        );
      await callCore({ authorization, ids: callerIds() }, (o) => core.auth.authenticate({ scope: 'chat' }, o));
    } catch (error) {
      const svc = asSvcError(error);
      const status = mappingFor(svc.code).http;
      refuseUpgrade(socket, status, REASONS[status] ?? 'Error', { ...openAiError(svc) });
      return;
    }
    // The upgrade's session id (Codex's `session_id`) holds for every response on the connection.
    const sessionId = clientSessionId((name) => {
      const value = req.headers[name.toLowerCase()];
      return typeof value === 'string' ? value : '';
    });
    server().handleUpgrade(req, socket, head, (ws) => serve(ws, authorization, logger, sessionId));
  }

  function serve(ws: WebSocket, authorization: string, log: Logger, sessionId: string | undefined): void {
    let running: AbortController | undefined;
    let last: { id: string; conversation: unknown[] } | undefined;
    let alive = true;
    const ping = setInterval(() => {
      if (!alive) return void ws.terminate();
      alive = false;
      ws.ping();
    }, PING_MS);
    ping.unref();
    ws.on('pong', () => (alive = true));
    ws.on('close', () => {
      clearInterval(ping);
      running?.abort();
    });
    ws.on('error', (error) => log.debug({ err: error }, 'responses websocket error'));

    const send = (message: Obj): void => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
    };
    const sendError = (error: unknown, extra: Obj = {}): void => {
      const svc = asSvcError(error);
      if (svc.code === 'internal') log.warn({ err: error }, 'responses websocket request failed');
      const body = openAiError(svc);
      // OpenAI's code for a previous response it does not have, which Codex's recovery reads.
      const notFound = svc.code === 'not_found' && svc.param === 'previous_response_id';
      send({
        type: 'error',
        status_code: notFound ? 400 : mappingFor(svc.code).http,
        error: notFound ? { ...body, code: 'previous_response_not_found' } : body,
        ...extra,
      });
      // A key revoked while the connection was open: nothing more is served on it.
      if (svc.code === 'invalid_api_key') ws.close(1008, 'invalid api key');
    };

    // `done` frees the connection for the next response as soon as the last event is out (the
    // charge is settled before it is sent), so a client that answers it at once is not refused.
    async function create(message: Obj, signal: AbortSignal, done: () => void): Promise<void> {
      const { type: _type, generate, stream: _stream, background: _background, ...body } = message;
      let input = inputItems(body['input']);
      const previous = body['previous_response_id'];
      if (typeof previous === 'string' && last !== undefined && previous === last.id) {
        input = [...last.conversation, ...input];
        body['input'] = input;
        delete body['previous_response_id'];
      }
      const meta: CallMeta = { authorization, ids: callerIds(), signal, sessionId };
      if (generate === false) {
        // Validated like a real request (key, model, every field), without a model call or a charge.
        await callCore(meta, (o) => core.chat.countResponseInputTokens({ body }, o));
        const id = `resp_${randomBytes(16).toString('hex')}`;
        const now = Math.floor(Date.now() / 1000);
        const response: Obj = {
          id,
          object: 'response',
          created_at: now,
          status: 'completed',
          completed_at: now,
          error: null,
          incomplete_details: null,
          model: body['model'],
          output: [],
          usage: { input_tokens: 0, output_tokens: 0, total_tokens: 0, cost: 0 },
        };
        send({ type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress' } });
        last = { id, conversation: input };
        done();
        send({ type: 'response.completed', sequence_number: 1, response });
        return;
      }
      let sequence = -1;
      let completed: Obj | undefined;
      try {
        for await (const out of streamCore(meta, (o) =>
          core.chat.streamResponse({ body: { ...body, stream: true } }, o),
        )) {
          const event = out.event;
          if (event === undefined) continue;
          if (typeof event['sequence_number'] === 'number') sequence = event['sequence_number'];
          if (event['type'] === 'response.completed' && isObj(event['response'])) completed = event['response'];
          const terminal = ['response.completed', 'response.incomplete', 'response.failed'].includes(
            String(event['type']),
          );
          if (terminal && completed !== undefined && typeof completed['id'] === 'string') {
            const output = Array.isArray(completed['output']) ? (completed['output'] as unknown[]) : [];
            // After a compaction its output stands for everything before (the trigger included),
            // as svc's stored conversation of a compaction is its summary alone.
            const compacted =
              isObj(input[input.length - 1]) && (input[input.length - 1] as Obj)['type'] === 'compaction_trigger';
            last = { id: completed['id'], conversation: compacted ? output : [...input, ...output] };
          }
          if (terminal) done();
          send(event);
        }
      } catch (error) {
        if (signal.aborted) return;
        done();
        sendError(error, sequence >= 0 ? { sequence_number: sequence + 1 } : {});
        return;
      }
    }

    ws.on('message', (data: RawData, isBinary: boolean) => {
      let message: unknown;
      try {
        message = JSON.parse(isBinary ? Buffer.from(data as Buffer).toString('utf8') : String(data));
      } catch {
        return sendError(
          new SvcError('invalid_json', 'The message is not valid JSON. Send a JSON object with a type.'),
        );
      }
      if (!isObj(message) || typeof message['type'] !== 'string')
        return sendError(
          new SvcError('invalid_argument', `Invalid message: expected a JSON object with a 'type'.`, { param: 'type' }),
        );
      switch (message['type']) {
        case 'response.create': {
          if (running !== undefined) {
            return sendError(
              new SvcError(
                'invalid_argument',
                'A response is already in progress on this connection: wait for it to end (or open another connection).',
                { param: 'type' },
              ),
            );
          }
          const controller = new AbortController();
          running = controller;
          const free = (): void => {
            if (running === controller) running = undefined;
          };
          void create(message, controller.signal, free)
            .catch((error: unknown) => {
              free();
              sendError(error);
            })
            .finally(free);
          return;
        }
        // Codex's acknowledgements of a response it has read: nothing to do.
        case 'response.processed':
          return;
        default:
          return sendError(
            new SvcError(
              'invalid_argument',
              `Invalid value: '${message['type']}'. Supported message types are: 'response.create'.`,
              { param: 'type' },
            ),
          );
      }
    });
  }

  return {
    handleUpgrade(req, socket, head) {
      void handleUpgrade(req, socket, head).catch((error: unknown) => {
        logger.warn({ err: error }, 'responses websocket upgrade failed');
        socket.destroy();
      });
    },
    close() {
      if (wss === undefined) return;
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
