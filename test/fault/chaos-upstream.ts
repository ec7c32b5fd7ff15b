import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startFakeToolProviders, type FakeProvider, type FakeToolProviders } from '../fakes/providers';

/*
 * Upstreams for the fault tests that misbehave on request and report what they served. Each
 * request names its own fate and tag in its text (`[f:MODE]`, `[t:TAG]`: the prompt of a chat
 * call, the query of a tool call), so concurrent calls with different faults can share one
 * upstream and the test can match what an upstream served with what the wallet charged.
 *
 * Chat (the OpenAI chat-completions wire, as test/fakes/openai-upstream.ts speaks it):
 *   ok       answers at once                      slow   one piece every `pieceMs`
 *   error    HTTP 500 (an upstream failure)       hang   never answers (the model's timeout)
 *   cut      streams 3 pieces, then drops the connection (non-stream: drops it before answering)
 *   stall    streams 3 pieces, then sends nothing more and keeps the connection open
 * Tools (a proxy in front of test/fakes/providers, which speak each provider's recorded wire):
 *   ok / slow (answers after `pieceMs` × 3) forward; error answers 500; hang never answers.
 */

export type ChatFate = 'ok' | 'slow' | 'error' | 'hang' | 'cut' | 'stall';
export type ToolFate = 'ok' | 'slow' | 'error' | 'hang';

/** What an upstream served in full, by tag: the usage it reported (chat) or that it answered (tools). */
export interface Served {
  readonly tag: string;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

export interface ChaosUpstreams {
  /** `base_url` of the chat model. */
  readonly chatBaseUrl: string;
  /** `base_url` of a tool provider. */
  toolBaseUrl(provider: FakeProvider): string;
  /** Chat calls answered in full (the whole body, usage included), by tag. */
  readonly chatServed: Map<string, Served>;
  /** Tool calls answered in full with the provider's results, by tag. */
  readonly toolServed: Map<string, Served>;
  /** Requests received, by fate. */
  readonly received: Map<string, number>;
  close(): Promise<void>;
}

const WORDS = 'alpha beta gamma delta epsilon zeta eta theta iota kappa'.split(' ');
export const PROMPT_TOKENS = 20;

function marker(text: string, name: string): string | undefined {
  return new RegExp(`\\[${name}:([A-Za-z0-9_.-]+)\\]`).exec(text)?.[1];
}

function lastUserText(body: Record<string, unknown>): string {
  const messages = Array.isArray(body['messages']) ? (body['messages'] as Record<string, unknown>[]) : [];
  const content = [...messages].reverse().find((m) => m['role'] === 'user')?.['content'];
  return typeof content === 'string' ? content : '';
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function shut(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** The `models:` section of a config with `svc-pro` on the chaos chat upstream (150,000 / 600,000 credits per 1M tokens). */
export function chaosModels(upstreams: ChaosUpstreams, timeoutMs: number): string {
  return `models:
  svc-pro:
    provider: openai
    base_url: ${upstreams.chatBaseUrl}
    api_key: chaos
    upstream_model: chaos-1
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    max_output_tokens: 100
    timeout_ms: ${timeoutMs}
`;
}

/** Starts the chat upstream and the tool proxy; `pieceMs` paces slow answers. */
export async function startChaosUpstreams(
  options: { pieceMs?: number; pieces?: number } = {},
): Promise<ChaosUpstreams> {
  const pieceMs = options.pieceMs ?? 50;
  const pieceCount = options.pieces ?? 8;
  const chatServed = new Map<string, Served>();
  const toolServed = new Map<string, Served>();
  const received = new Map<string, number>();
  const count = (fate: string): void => void received.set(fate, (received.get(fate) ?? 0) + 1);
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  const chat = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      const text = lastUserText(body);
      const fate = (marker(text, 'f') ?? 'ok') as ChatFate;
      const tag = marker(text, 't') ?? '';
      count(`chat:${fate}`);
      void answerChat(body, fate, tag, res).catch(() => res.destroy());
    });
  });

  async function answerChat(body: Record<string, unknown>, fate: ChatFate, tag: string, res: http.ServerResponse) {
    const usage = {
      prompt_tokens: PROMPT_TOKENS,
      completion_tokens: pieceCount,
      total_tokens: PROMPT_TOKENS + pieceCount,
    };
    const base = {
      id: `chatcmpl-${tag}`,
      created: 1_700_000_000,
      model: String(body['model']),
      system_fingerprint: 'fp_chaos',
    };
    const done = (): void => {
      if (tag !== '') chatServed.set(tag, { tag, promptTokens: PROMPT_TOKENS, completionTokens: pieceCount });
    };
    if (fate === 'hang') return;
    if (fate === 'error') {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: 'injected failure', type: 'server_error', param: null, code: null } }),
      );
      return;
    }
    if (body['stream'] !== true) {
      if (fate === 'cut' || fate === 'stall') {
        if (fate === 'cut') res.destroy();
        return;
      }
      if (fate === 'slow') await sleep(pieceMs * pieceCount);
      const content = WORDS.slice(0, pieceCount).join(' ');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          ...base,
          object: 'chat.completion',
          choices: [
            { index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' },
          ],
          usage,
        }),
        done,
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (choices: unknown[], extra: Record<string, unknown> = {}): boolean =>
      res.write(
        `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, usage: null, ...extra })}\n\n`,
      );
    send([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
    for (let n = 0; n < pieceCount; n++) {
      if (res.destroyed) return;
      if ((fate === 'cut' || fate === 'stall') && n === 3) {
        if (fate === 'cut') res.socket?.destroySoon();
        return;
      }
      if (fate === 'slow') await sleep(pieceMs);
      send([
        { index: 0, delta: { content: `${WORDS[n % WORDS.length] ?? 'x'} ` }, logprobs: null, finish_reason: null },
      ]);
    }
    send([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]);
    res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
    res.end('data: [DONE]\n\n', done);
  }

  const tools: FakeToolProviders = await startFakeToolProviders();
  const toolsUrl = new URL(tools.baseUrl('neshan')).origin;
  const proxy = http.createServer((req, res) => {
    const target = decodeURIComponent(req.url ?? '/');
    const fate = (marker(target, 'f') ?? 'ok') as ToolFate;
    const tag = marker(target, 't') ?? '';
    count(`tool:${fate}`);
    if (fate === 'hang') return;
    if (fate === 'error') {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"injected failure"}');
      return;
    }
    const forward = (): void => {
      const upstream = http.request(
        `${toolsUrl}${req.url ?? '/'}`,
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          res.on('finish', () => {
            if (tag !== '' && answer.statusCode === 200)
              toolServed.set(tag, { tag, promptTokens: 0, completionTokens: 0 });
          });
        },
      );
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    };
    if (fate === 'slow') setTimeout(forward, pieceMs * 3);
    else forward();
  });

  const chatPort = await listen(chat);
  const proxyPort = await listen(proxy);
  return {
    chatBaseUrl: `http://127.0.0.1:${chatPort}/v1`,
    toolBaseUrl: (provider) => `http://127.0.0.1:${proxyPort}${new URL(tools.baseUrl(provider)).pathname}`,
    chatServed,
    toolServed,
    received,
    async close() {
      await shut(chat);
      await shut(proxy);
      await tools.close();
    },
  };
}
