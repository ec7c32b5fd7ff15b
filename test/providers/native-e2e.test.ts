import assert from 'node:assert/strict';
import type Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { parseSse } from '../../core/providers/llm/openai/sse';
import { startAnthropicFixture, type AnthropicFixture } from '../anthropic/fixture';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import {
  FAKE_RESPONSES_KEY,
  startFakeResponsesUpstream,
  type FakeResponsesUpstream,
} from '../fakes/openai-responses-upstream';
import { llmSample } from '../fakes/sample-replay';
import { assertAnthropicShape } from '../helpers/anthropic-shapes';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M } from '../openai/fixture';

/*
 * The native providers end to end: svc's real core and gateway, the official `openai` and
 * `@anthropic-ai/sdk` clients, and fakes of Anthropic's Messages API and OpenAI's Responses API
 * that replay recorded wire samples. Each answer must carry the upstream's usage (cached and
 * reasoning tokens included) and cost exactly its price, charged once.
 */

async function* bytes(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text, 'utf8');
}

describe('native upstreams end to end (anthropic, openai-responses; official clients)', function () {
  let anthropicUp: FakeAnthropicUpstream;
  let responsesUp: FakeResponsesUpstream;
  let fx: AnthropicFixture;

  const model = (id: string, provider: string, baseUrl: string, key: string, upstreamModel: string): string => `
  ${id}:
    provider: ${provider}
    base_url: ${baseUrl}
    api_key: ${key}
    upstream_model: ${upstreamModel}
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
`;

  before(async () => {
    anthropicUp = await startFakeAnthropicUpstream();
    responsesUp = await startFakeResponsesUpstream();
    fx = await startAnthropicFixture({
      extraModels: () =>
        model('svc-claude', 'anthropic', anthropicUp.baseUrl, FAKE_ANTHROPIC_KEY, 'claude-opus-4-8') +
        model('svc-reasoner', 'openai-responses', responsesUp.baseUrl, FAKE_RESPONSES_KEY, 'gpt-5.4'),
    });
  });
  after(async () => {
    await fx?.close();
    await anthropicUp?.close();
    await responsesUp?.close();
  });

  const openai = (key: string): OpenAI => fx.client(key);

  describe('anthropic upstream', () => {
    it('/v1/openai chat, not streamed: thinking as reasoning, cache reads as cached_tokens, the exact price once', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/message-thinking-cache.json' });
      const raw = await openai(key)
        .chat.completions.create({
          model: 'svc-claude',
          messages: [
            { role: 'system', content: 'Be exact.' },
            { role: 'user', content: 'What is 27 * 453?' },
          ],
          max_completion_tokens: 3000,
          reasoning_effort: 'medium',
        })
        .withResponse();
      const completion = raw.data;
      assert.equal(completion.model, 'svc-claude');
      assert.equal(completion.choices[0]?.message.content, '27 × 453 = 12,231.');
      assert.equal(completion.choices[0]?.finish_reason, 'stop');
      assert.equal(completion.usage?.prompt_tokens, 21 + 1800 + 188);
      assert.equal(completion.usage?.completion_tokens, 120);
      assert.equal(completion.usage?.prompt_tokens_details?.cached_tokens, 1800);
      const sent = anthropicUp.requests.at(-1)?.body;
      assert.equal(sent?.['model'], 'claude-opus-4-8');
      assert.equal(sent?.['max_tokens'], 3000);
      // svc's breakpoints on a request from a wire without cache_control (SPEC §13).
      assert.deepEqual(sent?.['system'], [{ type: 'text', text: 'Be exact.', cache_control: { type: 'ephemeral' } }]);
      assert.deepEqual(sent?.['thinking'], { type: 'enabled', budget_tokens: 2999 });
      const cost = expectedCost(2009, 120);
      assert.equal(raw.response.headers.get('x-svc-cost'), String(cost));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
    });

    it('/v1/openai chat, streamed: the recorded tool-use stream as tool-call deltas, usage last', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/stream-tool-use.sse' });
      const stream = await openai(key).chat.completions.create({
        model: 'svc-claude',
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
        tools: [
          {
            type: 'function',
            function: {
              name: 'get_weather',
              parameters: { type: 'object', properties: { location: { type: 'string' } } },
            },
          },
        ],
        stream: true,
        stream_options: { include_usage: true },
      });
      let content = '';
      let args = '';
      let name = '';
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) {
          content += choice.delta.content ?? '';
          for (const call of choice.delta.tool_calls ?? []) {
            name += call.function?.name ?? '';
            args += call.function?.arguments ?? '';
          }
          finish = choice.finish_reason ?? finish;
        }
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(content, "I'll check the current weather in Paris for you.");
      assert.equal(name, 'get_weather');
      assert.deepEqual(JSON.parse(args), { location: 'Paris' });
      assert.equal(finish, 'tool_calls');
      assert.equal(usage?.prompt_tokens, 377);
      assert.equal(usage?.completion_tokens, 65);
      assert.deepEqual(anthropicUp.requests.at(-1)?.body['tools'], [
        {
          name: 'get_weather',
          input_schema: { type: 'object', properties: { location: { type: 'string' } } },
          cache_control: { type: 'ephemeral' },
        },
      ]);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(377, 65));
    });

    it('/v1/openai Responses, streamed: the recorded cache-usage stream, cached tokens in the Response usage', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/stream-cache-usage.sse' });
      const stream = await openai(key).responses.create({ model: 'svc-claude', input: 'Run some code.', stream: true });
      let text = '';
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of stream) {
        if (event.type === 'response.output_text.delta') text += event.delta;
        if (event.type === 'response.completed') completed = event.response;
      }
      assert.equal(text, 'Done.');
      assert.equal(completed?.usage?.input_tokens, 42 + 8 + 7);
      assert.equal(completed?.usage?.input_tokens_details.cached_tokens, 8);
      assert.equal(
        (completed?.usage?.input_tokens_details as { cache_write_tokens?: number } | undefined)?.cache_write_tokens,
        7,
      );
      assert.equal(completed?.usage?.output_tokens, 99);
      assert.equal(completed?.usage?.output_tokens_details.reasoning_tokens, 30);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(57, 99));
    });

    it('/v1/anthropic, not streamed, is passed through: unknown fields, thinking and cache_control reach the upstream, its answer comes back whole', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/message-thinking-cache.json' });
      const system = [{ type: 'text', text: 'Be exact.', cache_control: { type: 'ephemeral' } }];
      const raw = await fx
        .anthropic(key)
        .messages.create(
          {
            model: 'svc-claude',
            max_tokens: 32000,
            system: system as Anthropic.TextBlockParam[],
            thinking: { type: 'enabled', budget_tokens: 1500 },
            messages: [{ role: 'user', content: 'What is 27 * 453?' }],
            // A field this SDK version may not declare: it must reach the upstream unchanged.
            ...({ context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] } } as object),
          },
          { timeout: 60_000 },
        )
        .withResponse();
      const message = raw.data;
      // Passed through, nothing was ignored (translated, `thinking` and `context_management` would be).
      assert.equal(raw.response.headers.get('x-svc-ignored-fields'), null);
      const sent = anthropicUp.requests.at(-1)?.body;
      assert.equal(sent?.['model'], 'claude-opus-4-8');
      // svc's limit: the model's max_output_tokens, fitted and said (SPEC §7d).
      assert.equal(sent?.['max_tokens'], 4000);
      assert.equal(raw.response.headers.get('x-svc-fitted'), 'max_tokens=32000->4000');
      assert.deepEqual(sent?.['system'], system);
      assert.deepEqual(sent?.['thinking'], { type: 'enabled', budget_tokens: 1500 });
      assert.deepEqual(sent?.['context_management'], { edits: [{ type: 'clear_tool_uses_20250919' }] });
      assert.equal(sent?.['stream'], undefined);
      assertAnthropicShape('Message', message);
      const recorded = JSON.parse(llmSample('anthropic/message-thinking-cache.json')) as Record<string, unknown>;
      assert.deepEqual(message, { ...recorded, model: 'svc-claude' });
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(21 + 1800 + 188, 120));
    });

    it('/v1/anthropic, streamed, is passed through event for event (signatures, refusal details, usage)', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/stream-thinking-refusal.sse' });
      const response = await fetch(`${fx.anthropicURL}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({
          model: 'svc-claude',
          max_tokens: 2000,
          stream: true,
          thinking: { type: 'enabled', budget_tokens: 1024 },
          messages: [{ role: 'user', content: 'hi claudius, what is a solar eclipse?' }],
        }),
      });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('x-svc-ignored-fields'), null);
      const received: unknown[] = [];
      for await (const data of parseSse(response.body as unknown as AsyncIterable<Uint8Array>))
        received.push(JSON.parse(data));
      const expected: unknown[] = [];
      for await (const data of parseSse(bytes(llmSample('anthropic/stream-thinking-refusal.sse')))) {
        const event = JSON.parse(data) as { type: string; message?: Record<string, unknown> };
        expected.push(
          event.type === 'message_start' ? { ...event, message: { ...event.message, model: 'svc-claude' } } : event,
        );
      }
      assert.deepEqual(received, expected);
      assert.equal(anthropicUp.requests.at(-1)?.body['stream'], true);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(28, 106));
    });

    it('/v1/anthropic, streamed with the official client: cache writes and reads billed from the upstream usage', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/stream-cache-usage.sse' });
      const final = await fx
        .anthropic(key)
        .messages.stream({
          model: 'svc-claude',
          max_tokens: 100,
          messages: [{ role: 'user', content: 'Run some code.' }],
        })
        .finalMessage();
      assert.equal(final.model, 'svc-claude');
      assert.deepEqual(
        final.content.map((b) => (b.type === 'text' ? b.text : b.type)),
        ['Done.'],
      );
      assert.equal(final.usage.cache_creation_input_tokens, 7);
      assert.equal(final.usage.cache_read_input_tokens, 8);
      assert.equal(anthropicUp.requests.at(-1)?.body['max_tokens'], 100);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(42 + 8 + 7, 99));
    });

    it('an overloaded upstream (529) is a 503 and costs nothing', async () => {
      const { key, accountId } = await fx.fund(100_000);
      anthropicUp.enqueue({ sample: 'anthropic/error-overloaded.json', status: 529 });
      await assert.rejects(
        openai(key).chat.completions.create({ model: 'svc-claude', messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof OpenAI.APIError && e.status === 503,
      );
      anthropicUp.enqueue({ sample: 'anthropic/stream-error-overloaded.sse' });
      const stream = await openai(key).chat.completions.create({
        model: 'svc-claude',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      await assert.rejects(async () => {
        for await (const _ of stream) {
          // The error arrives after the role chunk.
        }
      });
      assert.equal((await fx.settled(accountId)).balance, 100_000n);
    });
  });

  describe('openai-responses upstream', () => {
    it('/v1/openai chat, not streamed: the recorded function call, reasoning tokens in usage', async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/response-function-call.json' });
      const completion = await openai(key).chat.completions.create({
        model: 'svc-reasoner',
        messages: [{ role: 'user', content: 'What is the weather like in Boston today?' }],
        tools: [{ type: 'function', function: { name: 'get_current_weather', parameters: { type: 'object' } } }],
        max_tokens: 500,
      });
      assert.deepEqual(completion.choices[0]?.message.tool_calls, [
        {
          id: 'call_unLAR8MvFNptuiZK6K6HCy5k',
          type: 'function',
          function: { name: 'get_current_weather', arguments: '{"location":"Boston, MA","unit":"celsius"}' },
        },
      ]);
      assert.equal(completion.choices[0]?.finish_reason, 'tool_calls');
      const sent = responsesUp.requests.at(-1)?.body;
      assert.equal(sent?.['model'], 'gpt-5.4');
      assert.equal(sent?.['max_output_tokens'], 500);
      assert.equal(sent?.['store'], false);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(291, 23));
    });

    it('/v1/openai chat, streamed: reasoning summary and text, cached and reasoning tokens in the usage chunk', async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/stream-reasoning-summary.sse' });
      const stream = await openai(key).chat.completions.create({
        model: 'svc-reasoner',
        messages: [{ role: 'user', content: 'Hello!' }],
        reasoning_effort: 'high',
        stream: true,
        stream_options: { include_usage: true },
      });
      let content = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) content += choice.delta.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(content, 'Hello! How can I assist you today?');
      assert.equal(usage?.prompt_tokens, 2048);
      assert.equal(usage?.prompt_tokens_details?.cached_tokens, 1536);
      assert.equal(usage?.completion_tokens, 350);
      assert.equal(usage?.completion_tokens_details?.reasoning_tokens, 320);
      assert.deepEqual(responsesUp.requests.at(-1)?.body['reasoning'], { effort: 'high', summary: 'auto' });
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(2048, 350));
    });

    it('/v1/openai Responses, not streamed and streamed: reasoning items and usage from the upstream', async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/response-reasoning.json' });
      const response = await openai(key).responses.create({
        model: 'svc-reasoner',
        input: 'How much wood would a woodchuck chuck?',
        reasoning: { effort: 'high' },
      });
      assert.equal(response.output_text, 'The classic tongue twister...');
      assert.equal(response.usage?.output_tokens_details.reasoning_tokens, 832);
      assert.equal(response.usage?.input_tokens, 81);

      responsesUp.enqueue({ sample: 'openai-responses/stream-reasoning-summary.sse' });
      const stream = await openai(key).responses.create({ model: 'svc-reasoner', input: 'Hello!', stream: true });
      let reasoning = '';
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of stream) {
        if (event.type === 'response.reasoning_summary_text.delta') reasoning += event.delta;
        if (event.type === 'response.completed') completed = event.response;
      }
      assert.match(reasoning, /^\*\*Responding to a greeting\*\*/);
      assert.deepEqual(
        completed?.output.map((item) => item.type),
        ['reasoning', 'message'],
      );
      assert.equal(completed?.usage?.input_tokens_details.cached_tokens, 1536);
      assert.equal(completed?.usage?.output_tokens_details.reasoning_tokens, 320);
      const total = expectedCost(81, 1035) + expectedCost(2048, 350);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - total);
    });

    it('/v1/openai Responses, not streamed, is passed through: encrypted reasoning, include and unknown fields reach the upstream, its output comes back whole', async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/response-reasoning.json' });
      const input = [
        { type: 'message', role: 'user', content: 'How much wood would a woodchuck chuck?' },
        {
          type: 'reasoning',
          id: 'rs_earlier_1',
          summary: [],
          encrypted_content: 'gAAAAABo-opaque-reasoning-state-from-an-earlier-turn==',
        },
        { type: 'message', role: 'user', content: 'And a woodpecker?' },
      ];
      const response = await openai(key).responses.create({
        model: 'svc-reasoner',
        input: input as OpenAI.Responses.ResponseInput,
        store: false,
        include: ['reasoning.encrypted_content'],
        reasoning: { effort: 'high', summary: 'auto' },
        max_output_tokens: 3500,
        tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} }, strict: true }],
        // A field this client may not declare: it must reach the upstream unchanged.
        ...({ context_management: [{ type: 'compaction', compact_threshold: 200000 }] } as object),
      });
      const sent = responsesUp.requests.at(-1)?.body;
      assert.equal(sent?.['model'], 'gpt-5.4');
      assert.deepEqual(sent?.['input'], input);
      assert.deepEqual(sent?.['include'], ['reasoning.encrypted_content']);
      assert.deepEqual(sent?.['reasoning'], { effort: 'high', summary: 'auto' });
      assert.deepEqual(sent?.['context_management'], [{ type: 'compaction', compact_threshold: 200000 }]);
      assert.deepEqual(sent?.['tools'], [
        { type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} }, strict: true },
      ]);
      // svc's limit: the client's (above the model's max_output_tokens it is fitted, see below).
      assert.equal(sent?.['max_output_tokens'], 3500);
      assert.equal(sent?.['store'], false);
      const recorded = JSON.parse(llmSample('openai-responses/response-reasoning.json')) as Record<string, unknown>;
      const cost = expectedCost(81, 1035);
      assert.deepEqual(response.output, recorded['output']);
      assert.equal(response.model, 'svc-reasoner');
      assert.match(response.id, /^resp_/);
      assert.notEqual(response.id, recorded['id']);
      assert.equal((response as unknown as { store?: boolean }).store, false);
      assert.deepEqual(response.usage, { ...(recorded['usage'] as object), cost: Number(cost) });
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
      await assert.rejects(
        openai(key).responses.retrieve(response.id),
        (e: unknown) => e instanceof OpenAI.NotFoundError,
      );
    });

    it("/v1/openai Responses, streamed, is passed through event for event and stored under svc's id", async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/stream-reasoning-summary.sse' });
      const stream = await openai(key).responses.create({ model: 'svc-reasoner', input: 'Hello!', stream: true });
      const received: Record<string, unknown>[] = [];
      for await (const event of stream) received.push(event as unknown as Record<string, unknown>);
      const expected: Record<string, unknown>[] = [];
      for await (const data of parseSse(bytes(llmSample('openai-responses/stream-reasoning-summary.sse'))))
        expected.push(JSON.parse(data) as Record<string, unknown>);
      const cost = expectedCost(2048, 350);
      assert.equal(received.length, expected.length);
      const id = (received[0]?.['response'] as { id: string }).id;
      expected.forEach((event, i) => {
        const response = event['response'] as Record<string, unknown> | undefined;
        const want =
          response === undefined
            ? event
            : {
                ...event,
                response: {
                  ...response,
                  id,
                  model: 'svc-reasoner',
                  store: true,
                  ...(event['type'] === 'response.completed'
                    ? { usage: { ...(response['usage'] as object), cost: Number(cost) } }
                    : {}),
                },
              };
        assert.deepEqual(received[i], want, `event ${i} (${String(event['type'])})`);
      });
      assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
      const stored = await openai(key).responses.retrieve(id);
      assert.equal(stored.output_text, 'Hello! How can I assist you today?');
      assert.equal(stored.model, 'svc-reasoner');
    });

    it('a Responses max_output_tokens above the model maximum reaches the upstream fitted, passed through or not, and is said', async () => {
      const { key } = await fx.fund(100_000);
      for (const stream of [false, true]) {
        responsesUp.enqueue({
          sample: stream ? 'openai-responses/stream-reasoning-summary.sse' : 'openai-responses/response-reasoning.json',
        });
        const raw = await openai(key)
          .responses.create({ model: 'svc-reasoner', input: 'Hello!', max_output_tokens: 50000, stream })
          .withResponse();
        if (stream) for await (const _event of raw.data as AsyncIterable<unknown>);
        assert.equal(raw.response.headers.get('x-svc-fitted'), 'max_output_tokens=50000->4000', `stream ${stream}`);
        assert.equal(responsesUp.requests.at(-1)?.body['max_output_tokens'], 4000);
      }
    });

    it('issue 30: a passed-through stream whose upstream reports no usage ends with svc’s count, estimated, as charged', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const frames: string[] = [];
      for await (const data of parseSse(bytes(llmSample('openai-responses/stream-reasoning-summary.sse')))) {
        const event = JSON.parse(data) as Record<string, unknown>;
        const response = event['response'] as Record<string, unknown> | undefined;
        if (response !== undefined) delete response['usage'];
        frames.push(`event: ${String(event['type'])}\ndata: ${JSON.stringify(event)}\n\n`);
      }
      responsesUp.enqueue({ garbage: frames.join(''), contentType: 'text/event-stream' });
      const stream = await openai(key).responses.create({ model: 'svc-reasoner', input: 'Hello!', stream: true });
      let completed: Record<string, unknown> | undefined;
      for await (const event of stream) if (event.type === 'response.completed') completed = event.response as never;
      const usage = completed?.['usage'] as {
        input_tokens: number;
        output_tokens: number;
        cost: number;
        estimated?: boolean;
      };
      assert.equal(usage.estimated, true, JSON.stringify(usage));
      assert.ok(usage.input_tokens > 0 && usage.output_tokens > 0, JSON.stringify(usage));
      assert.equal((await fx.settled(accountId)).balance, 100_000n - BigInt(usage.cost));
    });

    it('/v1/openai Responses with previous_response_id is translated, never forwarded', async () => {
      const { key } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/response-reasoning.json' });
      const first = await openai(key).responses.create({ model: 'svc-reasoner', input: 'How much wood?' });
      responsesUp.enqueue({ sample: 'openai-responses/response-reasoning.json' });
      await openai(key).responses.create({ model: 'svc-reasoner', input: 'And more?', previous_response_id: first.id });
      const sent = responsesUp.requests.at(-1)?.body;
      assert.equal(sent?.['previous_response_id'], undefined);
      assert.deepEqual(
        (sent?.['input'] as { role?: string; type?: string }[]).map((i) => i.role ?? i.type),
        ['user', 'assistant', 'user'],
      );
    });

    it('a passed-through stream that fails mid-way ends in an error and costs nothing', async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ cut: 'openai-responses/stream-reasoning-summary.sse', afterEvents: 16 });
      const stream = await openai(key).responses.create({ model: 'svc-reasoner', input: 'Hello!', stream: true });
      const types: string[] = [];
      await assert.rejects(async () => {
        for await (const event of stream) types.push(event.type);
      });
      assert.ok(types.includes('response.output_text.delta'), types.join(','));
      assert.ok(!types.includes('response.completed'));
      assert.equal((await fx.settled(accountId)).balance, 100_000n);

      anthropicUp.enqueue({ sample: 'anthropic/stream-error-overloaded.sse' });
      await assert.rejects(
        fx
          .anthropic(key)
          .messages.stream({ model: 'svc-claude', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
          .finalMessage(),
      );
      assert.equal((await fx.settled(accountId)).balance, 100_000n);
    });

    it('/v1/anthropic, streamed, over the Responses upstream', async () => {
      const { key, accountId } = await fx.fund(100_000);
      responsesUp.enqueue({ sample: 'openai-responses/stream-text.sse' });
      const final = await fx
        .anthropic(key)
        .messages.stream({ model: 'svc-reasoner', max_tokens: 100, messages: [{ role: 'user', content: 'Say hello' }] })
        .finalMessage();
      assert.deepEqual(
        final.content.map((b) => (b.type === 'text' ? b.text : b.type)),
        ['Hello world'],
      );
      assert.equal(final.usage.output_tokens, 2);
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(10, 2));
    });

    it("a request the Responses API cannot carry (stop) is the client's 400, nothing charged or sent", async () => {
      const { key, accountId } = await fx.fund(100_000);
      const before = responsesUp.requests.length;
      await assert.rejects(
        openai(key).chat.completions.create({
          model: 'svc-reasoner',
          messages: [{ role: 'user', content: 'hi' }],
          stop: ['END'],
        }),
        (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'stop',
      );
      // Streamed, the refusal comes as the first thing too, and the hold is released.
      await assert.rejects(
        (async () => {
          const stream = await openai(key).chat.completions.create({
            model: 'svc-reasoner',
            messages: [{ role: 'user', content: 'hi' }],
            stop: ['END'],
            stream: true,
          });
          for await (const _ of stream) {
            // Nothing is produced.
          }
        })(),
        (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'stop',
      );
      assert.equal(responsesUp.requests.length, before);
      assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
    });
  });
});
