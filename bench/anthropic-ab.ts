// A native wire's stream on the fast path against its native path, interleaved (`npx tsx
// bench/anthropic-ab.ts [--rounds N] [--seconds S] [--split 1] [--wire responses]`): a fake
// upstream (in this process; its wire as the provider writes it), two `svc serve` (or, with
// --split 1, two `svc core` + `svc gateway` pairs) with SVC_FAST_PATH=1 and 0, and autocannon at
// 32 connections on each in turn (A B B A …); then the median req/s and svc's CPU µs per answered
// request (user + system from /proc, gateway and core added) of each. Both svc's books are
// checked at the end (every call 45 credits, exactly once).
// - the default, Anthropic Messages: /v1/anthropic/v1/messages to an `anthropic` upstream
//   (message_start, content_block_start, ping, 16 text deltas (--deltas N), content_block_stop,
//   message_delta, message_stop);
// - `--wire responses`, OpenAI Responses: /v1/openai/responses to an `openai-responses` upstream
//   (response.created, response.in_progress, output_item.added, content_part.added, 16
//   output_text deltas, output_text.done, content_part.done, output_item.done, response.completed
//   with the usage, as api.openai.com writes them); with `--non-stream`, the Response as JSON.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkBooks, comparison, interleave, numberFlag, svcSide } from './lib/ab';
import { killChildren } from './lib/children';
import { startSvcPeer, type SvcPeer } from './lib/peers';

/** The fake Messages API: every stream the same `deltas` words; usage 100 in, 50 out (45 credits at the bench's price). */
async function startAnthropicUpstream(deltas: number): Promise<{ baseUrl: string; close(): void }> {
  let counter = 0;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>;
      counter += 1;
      const frame = (event: Record<string, unknown>): string =>
        `event: ${String(event['type'])}\ndata: ${JSON.stringify(event)}\n\n`;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(
        frame({
          type: 'message_start',
          message: {
            id: `msg_bench${counter}`,
            type: 'message',
            role: 'assistant',
            content: [],
            model: body['model'],
            stop_reason: null,
            stop_sequence: null,
            usage: {
              input_tokens: 100,
              cache_creation_input_tokens: 0,
              cache_read_input_tokens: 0,
              output_tokens: 1,
              service_tier: 'standard',
            },
          },
        }),
      );
      res.write(frame({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }));
      res.write('event: ping\ndata: {"type": "ping"}\n\n');
      for (let i = 0; i < deltas; i++)
        res.write(frame({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `word${i} ` } }));
      res.write(frame({ type: 'content_block_stop', index: 0 }));
      res.write(
        frame({
          type: 'message_delta',
          delta: { stop_reason: 'end_turn', stop_sequence: null },
          usage: { output_tokens: 50 },
        }),
      );
      res.end(frame({ type: 'message_stop' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** The fake Responses API: every stream the same `deltas` words; usage 100 in, 50 out (45 credits at the bench's price). */
async function startResponsesUpstream(deltas: number): Promise<{ baseUrl: string; close(): void }> {
  let counter = 0;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>;
      counter += 1;
      let sequence = 0;
      const frame = (event: Record<string, unknown>): string =>
        `event: ${String(event['type'])}\ndata: ${JSON.stringify({ ...event, sequence_number: sequence++ })}\n\n`;
      const text = Array.from({ length: deltas }, (_, i) => `word${i} `).join('');
      const item = { id: `msg_bench${counter}`, type: 'message', role: 'assistant' };
      const response = (status: string, output: unknown[], usage: unknown): Record<string, unknown> => ({
        id: `resp_bench${counter}`,
        object: 'response',
        created_at: 1741294021,
        status,
        background: false,
        error: null,
        incomplete_details: null,
        instructions: null,
        max_output_tokens: body['max_output_tokens'] ?? null,
        model: body['model'],
        output,
        parallel_tool_calls: true,
        previous_response_id: null,
        reasoning: { effort: null, summary: null },
        service_tier: 'default',
        store: false,
        temperature: 1.0,
        text: { format: { type: 'text' }, verbosity: 'medium' },
        tool_choice: 'auto',
        tools: [],
        top_p: 1.0,
        truncation: 'disabled',
        usage,
        user: null,
        metadata: {},
      });
      const at = { item_id: item.id, output_index: 0, content_index: 0 };
      const usage = {
        input_tokens: 100,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 50,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 150,
      };
      if (body['stream'] !== true) {
        const part = { type: 'output_text', annotations: [], logprobs: [], text };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(response('completed', [{ ...item, status: 'completed', content: [part] }], usage)));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(frame({ type: 'response.created', response: response('in_progress', [], null) }));
      res.write(frame({ type: 'response.in_progress', response: response('in_progress', [], null) }));
      res.write(
        frame({
          type: 'response.output_item.added',
          output_index: 0,
          item: { ...item, status: 'in_progress', content: [] },
        }),
      );
      res.write(
        frame({
          type: 'response.content_part.added',
          ...at,
          part: { type: 'output_text', annotations: [], logprobs: [], text: '' },
        }),
      );
      for (let i = 0; i < deltas; i++)
        res.write(
          frame({ type: 'response.output_text.delta', ...at, delta: `word${i} `, logprobs: [], obfuscation: 'aBcD' }),
        );
      res.write(frame({ type: 'response.output_text.done', ...at, text, logprobs: [] }));
      const part = { type: 'output_text', annotations: [], logprobs: [], text };
      res.write(frame({ type: 'response.content_part.done', ...at, part }));
      const done = { ...item, status: 'completed', content: [part] };
      res.write(frame({ type: 'response.output_item.done', output_index: 0, item: done }));
      res.end(frame({ type: 'response.completed', response: response('completed', [done], usage) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

async function main(): Promise<void> {
  const rounds = numberFlag('--rounds', 4);
  const seconds = numberFlag('--seconds', 3);
  const split = numberFlag('--split', 0) === 1;
  const deltas = numberFlag('--deltas', 16);
  const wireAt = process.argv.indexOf('--wire');
  const responses = wireAt !== -1 && process.argv[wireAt + 1] === 'responses';
  const upstream = responses ? await startResponsesUpstream(deltas) : await startAnthropicUpstream(deltas);
  const model = responses
    ? `  svc-codex:
    provider: openai-responses
    base_url: ${upstream.baseUrl}/v1
    api_key: bench
    upstream_model: gpt-bench
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 200000
    max_output_tokens: 4096
`
    : `  svc-claude:
    provider: anthropic
    base_url: ${upstream.baseUrl}
    api_key: bench
    upstream_model: claude-bench
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 200000
    max_output_tokens: 4096
`;
  // The OpenAI models' upstream is never called here.
  const start = (fast: string): Promise<SvcPeer> =>
    startSvcPeer('http://127.0.0.1:9/v1', { SVC_FAST_PATH: fast }, undefined, model, [], split);
  const peers: [string, SvcPeer][] = [
    ['fast', await start('1')],
    ['native', await start('0')],
  ];
  const body = JSON.stringify(
    responses
      ? {
          model: 'svc-codex',
          max_output_tokens: 256,
          stream: !process.argv.includes('--non-stream'),
          input: 'Say hello in sixteen words.',
        }
      : {
          model: 'svc-claude',
          max_tokens: 256,
          stream: true,
          messages: [{ role: 'user', content: 'Say hello in sixteen words.' }],
        },
  );
  const load = (peer: SvcPeer) =>
    responses
      ? { body, path: '/v1/openai/responses' }
      : {
          body,
          path: '/v1/anthropic/v1/messages',
          headers: { 'x-api-key': peer.key, 'anthropic-version': '2023-06-01' },
        };
  let readings: Awaited<ReturnType<typeof interleave>>;
  try {
    readings = await interleave(
      peers.map(([name, peer]) => svcSide(name, peer, load(peer))),
      { rounds, seconds, warmupSeconds: numberFlag('--warmup', 5) },
    );
  } finally {
    await checkBooks(peers).finally(() => {
      upstream.close();
      killChildren();
    });
  }
  console.log(
    comparison(
      `${responses ? 'responses' : 'anthropic'} ${process.argv.includes('--non-stream') ? 'non-stream' : 'stream'}, ${deltas} deltas${split ? ' (split: core + gateway)' : ''}`,
      ['fast', readings.get('fast')],
      ['native', readings.get('native')],
    ),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
