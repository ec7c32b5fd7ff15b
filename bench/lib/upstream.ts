// The bench's fake OpenAI upstream: the same for every peer, in its own process
// (`node -r tsx/cjs bench/lib/upstream.ts [--latency-ms N] [--chunks N]`, prints its base URL).
// It answers chat completions in the wire format of test/fakes/openai-upstream.ts (chunk shapes,
// `usage: null` on every chunk and a final usage chunk with `choices: []` when
// `stream_options.include_usage` is set, `data: [DONE]` last) but keeps nothing per request, so
// its memory stays flat over a soak and it costs the same for every peer. A model named
// `…-<N>ms` (e.g. `fake-60ms`) waits N ms before its first byte instead of the default latency,
// so one upstream serves the throughput runs (0 ms) and the added-latency runs (60 ms) alike.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface UpstreamOptions {
  /** Wait before the first byte of every answer, unless the model name says otherwise; default 0. */
  readonly latencyMs: number;
  /** Content chunks in a streamed answer (each one word); default 16. */
  readonly chunks: number;
}

// The fake's usage (100 prompt, 50 completion tokens): the bench's svc tariff makes it 45 credits.
const USAGE = {
  prompt_tokens: 100,
  completion_tokens: 50,
  total_tokens: 150,
  prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
  completion_tokens_details: {
    reasoning_tokens: 0,
    audio_tokens: 0,
    accepted_prediction_tokens: 0,
    rejected_prediction_tokens: 0,
  },
};

function latencyOf(model: string, fallback: number): number {
  const m = /-(\d+)ms$/.exec(model);
  return m === null ? fallback : Number(m[1]);
}

/** Starts the upstream on 127.0.0.1:0 and resolves with its base URL (`http://127.0.0.1:PORT/v1`). */
export async function startBenchUpstream(options: UpstreamOptions): Promise<{ baseUrl: string; close(): void }> {
  let counter = 0;
  const words = Array.from({ length: options.chunks }, (_, i) => `word${i} `);
  const text = words.join('');
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>;
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
      const model = typeof body['model'] === 'string' ? body['model'] : 'unknown';
      const delay = latencyOf(model, options.latencyMs);
      const answer = (): void => respond(body, model, res);
      if (delay > 0) setTimeout(answer, delay);
      else answer();
    });
  });

  function respond(body: Record<string, unknown>, model: string, res: http.ServerResponse): void {
    counter += 1;
    const id = `chatcmpl-bench${counter}`;
    const created = 1_700_000_000;
    const includeUsage = (body['stream_options'] as Record<string, unknown> | undefined)?.['include_usage'] === true;
    if (body['stream'] !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: text, refusal: null, annotations: [] },
              logprobs: null,
              finish_reason: 'stop',
            },
          ],
          usage: USAGE,
          service_tier: 'default',
          system_fingerprint: 'fp_fake',
        }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const base = { id, object: 'chat.completion.chunk', created, model, service_tier: 'default' };
    const frame = (choices: unknown[]): string =>
      `data: ${JSON.stringify({ ...base, system_fingerprint: 'fp_fake', choices, ...(includeUsage ? { usage: null } : {}) })}\n\n`;
    res.write(
      frame([
        { index: 0, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null },
      ]),
    );
    for (const word of words)
      res.write(frame([{ index: 0, delta: { content: word }, logprobs: null, finish_reason: null }]));
    res.write(frame([{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }]));
    if (includeUsage)
      res.write(`data: ${JSON.stringify({ ...base, system_fingerprint: 'fp_fake', choices: [], usage: USAGE })}\n\n`);
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** `--name VALUE` from argv as a non-negative integer, or `fallback`. */
export function intArg(argv: readonly string[], name: string, fallback: number): number {
  const at = argv.indexOf(name);
  if (at === -1) return fallback;
  const value = Number(argv[at + 1]);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number ≥ 0`);
  return value;
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  startBenchUpstream({ latencyMs: intArg(argv, '--latency-ms', 0), chunks: intArg(argv, '--chunks', 16) }).then(
    (u) => console.log(u.baseUrl),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
