import http from 'node:http';
import type { AddressInfo } from 'node:net';

/*
 * A fake OpenAI-compatible chat-completions upstream: a real HTTP server on 127.0.0.1:0 that
 * speaks the wire as api.openai.com does (chunk shapes, tool-call deltas with `index` and the id,
 * type and name in the first delta only, `usage: null` on every chunk and a final usage chunk
 * with `choices: []` when `stream_options.include_usage` is set, `data: [DONE]` last), and that
 * can be scripted to fail: HTTP errors, garbage, hangs, streams cut mid-way. It honours `n` (that
 * many choices; the default usage counts the output of each), and can refuse `max_tokens` as
 * OpenAI's reasoning models do.
 */

export interface FakeUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly cached_tokens?: number;
  /** Cache writes, as the newest OpenAI models (and proxies fronting Anthropic) report them; absent: not sent. */
  readonly cache_write_tokens?: number;
  readonly reasoning_tokens?: number;
}

export interface FakeToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

export type FakeBehavior =
  | {
      kind: 'text';
      text?: string;
      usage?: FakeUsage | 'omit';
      finishReason?: string;
      /** Answers with this refusal (message.refusal / delta.refusal) instead of content. */
      refusal?: string;
      /** message.annotations of a non-stream answer. */
      annotations?: Record<string, unknown>[];
      /** message.audio of a non-stream answer. */
      audio?: Record<string, unknown>;
      /** service_tier of the answer (default "default"). */
      serviceTier?: string;
      /** Reasoning text sent before the answer, as `reasoning_content` (or `reasoningField`). */
      reasoning?: string;
      reasoningField?: 'reasoning_content' | 'reasoning';
      /** Stream only: sends every chunk up to the finish, then stops before the usage chunk and `[DONE]` (the connection stays open). */
      withholdEnd?: boolean;
      /** Stream only: the usage chunk and `[DONE]` wait for this promise after the finish chunk went. */
      usageAfter?: Promise<unknown>;
    }
  | {
      kind: 'tool_calls';
      calls: FakeToolCall[];
      text?: string;
      usage?: FakeUsage | 'omit';
      reasoning?: string;
      reasoningField?: 'reasoning_content' | 'reasoning';
      /** As for `text`. */
      withholdEnd?: boolean;
    }
  /** With `stallBody`, sends the status and half the body, then nothing more (the connection stays open). */
  | { kind: 'http_error'; status: number; body?: string; stallBody?: boolean; headers?: Record<string, string> }
  | { kind: 'garbage'; body?: string }
  /** Never answers (no headers). */
  | { kind: 'hang' }
  /**
   * Closes the connection under the request, before any answer: what svc sees when it reuses a
   * kept-alive connection the upstream has just closed.
   */
  | { kind: 'reset' }
  /** Streams `afterPieces` content pieces, then closes the connection mid-body (stream only). */
  | { kind: 'cut'; afterPieces: number }
  /** Streams `afterPieces` content pieces, then ends the body cleanly but with no finish or [DONE]. */
  | { kind: 'truncate'; afterPieces: number }
  /**
   * Streams `afterPieces` content pieces (a negative number: not even the first chunk), then an
   * error frame `data: {"error": …}`, and ends (stream only).
   */
  | { kind: 'error_frame'; afterPieces: number; error: Record<string, unknown> }
  /** Streams `afterPieces` content pieces, then stops sending without closing (stream only). */
  | { kind: 'stall'; afterPieces: number }
  /**
   * Streams `pieces` content chunks of `pieceBytes` characters as fast as the connection takes
   * them (waiting for `drain`, like a real server), then finishes (stream only).
   */
  | { kind: 'flood'; pieces: number; pieceBytes: number }
  /** Streams `afterPieces` content pieces, waits for `resume`, then finishes like `text` (stream only). */
  | { kind: 'slow'; afterPieces: number; resume: Promise<void>; text?: string; usage?: FakeUsage };

export interface RecordedRequest {
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  /** The client's source port: the same port means the same (kept-alive) connection. */
  readonly remotePort: number | undefined;
  readonly body: Record<string, unknown>;
}

export interface FakeUpstream {
  /** e.g. http://127.0.0.1:PORT/v1 (the `base_url` of a model). */
  readonly baseUrl: string;
  readonly requests: RecordedRequest[];
  /** Queues behaviours for the next requests, in order; afterwards the default text reply. */
  enqueue(...behaviors: FakeBehavior[]): void;
  /** Resolves once a request is open on the server (for hang/stall tests). */
  nextRequestOpen(): Promise<void>;
  /** Holds every answer back until the returned function is called (requests still arrive). */
  pause(): () => void;
  /** Number of requests whose connection closed before the response finished. */
  readonly aborted: number;
  /** Content chunks written by `flood` streams so far. */
  readonly flooded: number;
  /**
   * Answers a request that carries `max_tokens` as OpenAI's reasoning models (o-series, gpt-5) do:
   * 400 `unsupported_parameter`. Until `reset()`.
   */
  rejectMaxTokens(): void;
  reset(): void;
  close(): Promise<void>;
}

export const DEFAULT_USAGE: FakeUsage = { prompt_tokens: 100, completion_tokens: 50 };

/** OpenAI's answer to `max_tokens` sent to a reasoning model, verbatim. */
export const MAX_TOKENS_UNSUPPORTED = {
  error: {
    message:
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    type: 'invalid_request_error',
    param: 'max_tokens',
    code: 'unsupported_parameter',
  },
};

function lastUserText(body: Record<string, unknown>): string {
  const messages = Array.isArray(body['messages']) ? (body['messages'] as Record<string, unknown>[]) : [];
  const user = [...messages].reverse().find((m) => m['role'] === 'user');
  const content = user?.['content'];
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((p: Record<string, unknown>) => (typeof p['text'] === 'string' ? p['text'] : '')).join(' ');
  return '';
}

function pieces(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

// A logprob per piece of text, as OpenAI sends them when the request sets `logprobs: true`.
function tokenLogprobs(text: string, top: number): Record<string, unknown>[] {
  return pieces(text).map((token, i) => ({
    token,
    logprob: -0.25 * (i + 1),
    bytes: [...Buffer.from(token, 'utf8')],
    top_logprobs: Array.from({ length: top }, (_, j) => ({
      token: `${token.trim()}#${j}`,
      logprob: -0.5 * (j + 1),
      bytes: [...Buffer.from(`${token.trim()}#${j}`, 'utf8')],
    })),
  }));
}

function usageJson(u: FakeUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: {
      cached_tokens: u.cached_tokens ?? 0,
      audio_tokens: 0,
      ...(u.cache_write_tokens === undefined ? {} : { cache_write_tokens: u.cache_write_tokens }),
    },
    completion_tokens_details: {
      reasoning_tokens: u.reasoning_tokens ?? 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

export async function startFakeUpstream(): Promise<FakeUpstream> {
  const queue: FakeBehavior[] = [];
  const requests: RecordedRequest[] = [];
  let aborted = 0;
  let flooded = 0;
  let openWaiters: (() => void)[] = [];
  let counter = 0;
  let gate: Promise<void> = Promise.resolve();
  let refuseMaxTokens = false;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ error: { message: 'bad json', type: 'invalid_request_error', param: null, code: null } }),
        );
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error', param: null, code: null } }),
        );
        return;
      }
      requests.push({ path: req.url, headers: req.headers, remotePort: req.socket.remotePort, body });
      res.on('close', () => {
        if (!res.writableFinished) aborted += 1;
      });
      const waiters = openWaiters;
      openWaiters = [];
      for (const w of waiters) w();
      if (refuseMaxTokens && body['max_tokens'] !== undefined) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify(MAX_TOKENS_UNSUPPORTED));
        return;
      }
      const behavior = queue.shift() ?? { kind: 'text' };
      void gate.then(() => respond(body, behavior, res));
    });
  });

  async function respond(
    body: Record<string, unknown>,
    behavior: FakeBehavior,
    res: http.ServerResponse,
  ): Promise<void> {
    counter += 1;
    const id = `chatcmpl-fake${counter}`;
    const created = 1_700_000_000 + counter;
    const model = typeof body['model'] === 'string' ? body['model'] : 'unknown';
    const stream = body['stream'] === true;
    const includeUsage = (body['stream_options'] as Record<string, unknown> | undefined)?.['include_usage'] === true;
    const logprobs = body['logprobs'] === true;
    const top = typeof body['top_logprobs'] === 'number' ? body['top_logprobs'] : 0;

    switch (behavior.kind) {
      case 'http_error': {
        const errorBody =
          behavior.body ??
          JSON.stringify({ error: { message: 'upstream failure', type: 'server_error', param: null, code: null } });
        res.writeHead(behavior.status, { 'content-type': 'application/json', ...behavior.headers });
        if (behavior.stallBody === true) res.write(errorBody.slice(0, Math.floor(errorBody.length / 2)));
        else res.end(errorBody);
        return;
      }
      case 'garbage':
        res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
        res.end(behavior.body ?? (stream ? 'data: {not json\n\n' : '<html>oops</html>'));
        return;
      case 'hang':
        return;
      case 'reset':
        res.socket?.destroy();
        return;
      default:
        break;
    }

    const text =
      behavior.kind === 'text' || behavior.kind === 'slow'
        ? (behavior.text ?? `Hello from upstream: ${lastUserText(body)}`)
        : behavior.kind === 'tool_calls'
          ? (behavior.text ?? null)
          : 'one two three four five six seven eight nine ten';
    const calls = behavior.kind === 'tool_calls' ? behavior.calls : [];
    const n = typeof body['n'] === 'number' && body['n'] > 1 ? body['n'] : 1;
    const defaultUsage = { ...DEFAULT_USAGE, completion_tokens: DEFAULT_USAGE.completion_tokens * n };
    const usage =
      behavior.kind === 'text' || behavior.kind === 'tool_calls' || behavior.kind === 'slow'
        ? (behavior.usage ?? defaultUsage)
        : defaultUsage;
    const refusal = behavior.kind === 'text' ? behavior.refusal : undefined;
    const reasoning = behavior.kind === 'text' || behavior.kind === 'tool_calls' ? behavior.reasoning : undefined;
    const reasoningField =
      (behavior.kind === 'text' || behavior.kind === 'tool_calls' ? behavior.reasoningField : undefined) ??
      'reasoning_content';
    const serviceTier = (behavior.kind === 'text' ? behavior.serviceTier : undefined) ?? 'default';
    const finish =
      behavior.kind === 'tool_calls'
        ? 'tool_calls'
        : behavior.kind === 'text'
          ? (behavior.finishReason ?? 'stop')
          : 'stop';

    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: Array.from({ length: n }, (_, index) => ({
            index,
            message: {
              role: 'assistant',
              content: refusal !== undefined ? null : text,
              refusal: refusal ?? null,
              ...(reasoning !== undefined ? { [reasoningField]: reasoning } : {}),
              annotations: (behavior.kind === 'text' ? behavior.annotations : undefined) ?? [],
              ...(behavior.kind === 'text' && behavior.audio !== undefined ? { audio: behavior.audio } : {}),
              ...(calls.length > 0
                ? {
                    tool_calls: calls.map((c) => ({
                      id: c.id,
                      type: 'function',
                      function: { name: c.name, arguments: c.arguments },
                    })),
                  }
                : {}),
            },
            logprobs: logprobs ? { content: tokenLogprobs(text ?? '', top), refusal: null } : null,
            finish_reason: finish,
          })),
          ...(usage !== 'omit' ? { usage: usageJson(usage) } : {}),
          service_tier: serviceTier,
          system_fingerprint: 'fp_fake',
        }),
      );
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const base = {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      service_tier: serviceTier,
      system_fingerprint: 'fp_fake',
    };
    const send = (choices: unknown[], extra: Record<string, unknown> = {}): void => {
      res.write(
        `data: ${JSON.stringify({ ...base, choices, ...(includeUsage ? { usage: null } : {}), ...extra })}\n\n`,
      );
    };
    // A negative afterPieces: the error frame is the stream's first frame, before any chunk.
    if (behavior.kind === 'error_frame' && behavior.afterPieces < 0) {
      res.end(`data: ${JSON.stringify({ error: behavior.error })}\n\n`);
      return;
    }
    for (let choice = 0; choice < n; choice += 1) {
      send([
        {
          index: choice,
          delta: { role: 'assistant', content: calls.length > 0 && text === null ? null : '', refusal: null },
          logprobs: null,
          finish_reason: null,
        },
      ]);
      if (behavior.kind === 'flood') {
        const piece = 'x'.repeat(behavior.pieceBytes);
        for (let sent = 0; sent < behavior.pieces; sent++) {
          if (res.destroyed) return;
          const more = res.write(
            `data: ${JSON.stringify({ ...base, choices: [{ index: choice, delta: { content: piece }, logprobs: null, finish_reason: null }] })}\n\n`,
          );
          flooded++;
          if (!more) {
            const open = await new Promise<boolean>((resolve) => {
              const settle = (ok: boolean): void => {
                res.off('drain', onDrain);
                res.off('close', onClose);
                resolve(ok);
              };
              const onDrain = (): void => settle(true);
              const onClose = (): void => settle(false);
              res.on('drain', onDrain);
              res.on('close', onClose);
            });
            if (!open) return;
          }
        }
      }
      if (reasoning !== undefined) {
        for (const piece of pieces(reasoning))
          send([{ index: choice, delta: { [reasoningField]: piece }, logprobs: null, finish_reason: null }]);
      }
      if (refusal !== undefined) {
        for (const piece of pieces(refusal))
          send([{ index: choice, delta: { refusal: piece }, logprobs: null, finish_reason: null }]);
      }
      const textPieces = text === null || refusal !== undefined ? [] : pieces(text);
      for (const [at, piece] of textPieces.entries()) {
        if (
          (behavior.kind === 'cut' ||
            behavior.kind === 'stall' ||
            behavior.kind === 'truncate' ||
            behavior.kind === 'error_frame') &&
          at >= behavior.afterPieces
        ) {
          if (behavior.kind === 'error_frame') res.end(`data: ${JSON.stringify({ error: behavior.error })}\n\n`);
          // destroySoon flushes what was written, then closes: the chunked body never ends.
          if (behavior.kind === 'cut') res.socket?.destroySoon();
          if (behavior.kind === 'truncate') res.end();
          return;
        }
        if (behavior.kind === 'slow' && at === behavior.afterPieces) await behavior.resume;
        send([
          {
            index: choice,
            delta: { content: piece },
            logprobs: logprobs ? { content: tokenLogprobs(piece, top), refusal: null } : null,
            finish_reason: null,
          },
        ]);
      }
      for (const [index, call] of calls.entries()) {
        send([
          {
            index: choice,
            delta: {
              tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }],
            },
            logprobs: null,
            finish_reason: null,
          },
        ]);
        const args = call.arguments;
        const step = Math.max(1, Math.ceil(args.length / 3));
        for (let at = 0; at < args.length; at += step) {
          send([
            {
              index: choice,
              delta: { tool_calls: [{ index, function: { arguments: args.slice(at, at + step) } }] },
              logprobs: null,
              finish_reason: null,
            },
          ]);
        }
      }
      send([{ index: choice, delta: {}, logprobs: null, finish_reason: finish }]);
    }
    if ((behavior.kind === 'text' || behavior.kind === 'tool_calls') && behavior.withholdEnd === true) return;
    if (behavior.kind === 'text' && behavior.usageAfter !== undefined) await behavior.usageAfter;
    if (includeUsage && usage !== 'omit')
      res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: usageJson(usage) })}\n\n`);
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    get aborted() {
      return aborted;
    },
    get flooded() {
      return flooded;
    },
    enqueue(...behaviors) {
      queue.push(...behaviors);
    },
    nextRequestOpen() {
      return new Promise<void>((resolve) => openWaiters.push(resolve));
    },
    pause() {
      let release = (): void => undefined;
      gate = new Promise<void>((resolve) => (release = resolve));
      return () => {
        release();
        gate = Promise.resolve();
      };
    },
    rejectMaxTokens() {
      refuseMaxTokens = true;
    },
    reset() {
      refuseMaxTokens = false;
      queue.length = 0;
      requests.length = 0;
      aborted = 0;
      flooded = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
