import assert from 'node:assert/strict';
import { isSvcError } from '../../core/errors';
import { parseSse } from '../../core/providers/llm/openai/sse';
import { createOpenAiResponsesProvider } from '../../core/providers/llm/openai-responses/provider';
import { toResponsesRequest } from '../../core/providers/llm/openai-responses/request';
import {
  createResponsesStreamReader,
  readResponse,
  type ResponsesStep,
} from '../../core/providers/llm/openai-responses/response';
import type { Agent } from 'undici';
import { createUpstreamAgent } from '../../core/providers/http';
import type { ChatProvider, WireChatRequest, WireChunk, WireUsage } from '../../core/providers/llm/types';
import {
  FAKE_RESPONSES_KEY,
  startFakeResponsesUpstream,
  type FakeResponsesUpstream,
} from '../fakes/openai-responses-upstream';
import { llmSample } from '../fakes/sample-replay';

async function* bytes(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text, 'utf8');
}

async function readSample(name: string): Promise<ResponsesStep[]> {
  const reader = createResponsesStreamReader('fallback', 0);
  const steps: ResponsesStep[] = [];
  for await (const data of parseSse(bytes(llmSample(name)))) {
    if (data === '[DONE]') break;
    steps.push(reader.read(JSON.parse(data)));
  }
  return steps;
}

function assemble(chunks: readonly WireChunk[]): {
  content: string;
  reasoning: string;
  calls: { id: string; name: string; arguments: string }[];
  finish: string | null;
} {
  let content = '';
  let reasoning = '';
  let finish: string | null = null;
  const calls: { id: string; name: string; arguments: string }[] = [];
  for (const chunk of chunks) {
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? '';
      reasoning += choice.delta.reasoning_content ?? '';
      for (const call of choice.delta.tool_calls ?? []) {
        const slot = (calls[call.index] ??= { id: '', name: '', arguments: '' });
        if (call.id !== undefined) slot.id = call.id;
        if (call.function?.name !== undefined) slot.name = call.function.name;
        slot.arguments += call.function?.arguments ?? '';
      }
      if (choice.finish_reason !== null) finish = choice.finish_reason;
    }
  }
  return { content, reasoning, calls, finish };
}

const chunksOf = (steps: readonly ResponsesStep[]): WireChunk[] =>
  steps.flatMap((s) => (s.kind === 'chunks' || s.kind === 'done' ? s.chunks : []));
const usageOf = (steps: readonly ResponsesStep[]): WireUsage | undefined => {
  const done = steps.find((s) => s.kind === 'done');
  return done?.kind === 'done' ? done.usage : undefined;
};

const base: WireChatRequest = { model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] };

describe('openai-responses provider', function () {
  describe('chat request → Responses request', () => {
    it('turns messages, tool calls and tool results into input items, in order', () => {
      const body = toResponsesRequest({
        model: 'gpt-5.4',
        max_completion_tokens: 500,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'developer', content: 'Use metric units.' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'Weather?' },
              { type: 'image_url', image_url: { url: 'https://example.com/sky.png', detail: 'low' } },
            ],
          },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Boston"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '18°C' },
          { role: 'assistant', content: 'It is 18°C.' },
          { role: 'user', content: 'Thanks' },
        ],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
        temperature: 0.3,
        reasoning_effort: 'high',
        response_format: { type: 'json_schema', json_schema: { name: 'w', schema: { type: 'object' }, strict: true } },
        verbosity: 'low',
        user: 'u-1',
        prompt_cache_key: 'conv-1',
      });
      assert.deepEqual(body, {
        model: 'gpt-5.4',
        store: false,
        max_output_tokens: 500,
        input: [
          { type: 'message', role: 'system', content: 'Be brief.' },
          { type: 'message', role: 'developer', content: 'Use metric units.' },
          {
            type: 'message',
            role: 'user',
            content: [
              { type: 'input_text', text: 'Weather?' },
              { type: 'input_image', image_url: 'https://example.com/sky.png', detail: 'low' },
            ],
          },
          { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Boston"}' },
          { type: 'function_call_output', call_id: 'call_1', output: '18°C' },
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'It is 18°C.' }] },
          { type: 'message', role: 'user', content: 'Thanks' },
        ],
        tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' }, strict: false }],
        tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false,
        temperature: 0.3,
        user: 'u-1',
        reasoning: { effort: 'high', summary: 'auto' },
        text: {
          format: { type: 'json_schema', name: 'w', schema: { type: 'object' }, strict: true },
          verbosity: 'low',
        },
        prompt_cache_key: 'conv-1',
      });
    });

    it('refuses what the Responses API cannot carry, naming the parameter', () => {
      for (const [param, value] of [
        ['stop', ['END']],
        ['n', 2],
        ['logprobs', true],
        ['presence_penalty', 0.5],
      ] as const) {
        assert.throws(
          () => toResponsesRequest({ ...base, [param]: value }),
          (e: unknown) => isSvcError(e) && e.code === 'invalid_argument' && e.param === param,
          param,
        );
      }
    });
  });

  describe('Responses answers → chat (recorded samples)', () => {
    it('response-function-call.json: the call with its call_id, finish tool_calls', () => {
      const c = readResponse(JSON.parse(llmSample('openai-responses/response-function-call.json')));
      assert.ok(c);
      assert.equal(c.choices[0]?.message.content, null);
      assert.deepEqual(c.choices[0]?.message.tool_calls, [
        {
          id: 'call_unLAR8MvFNptuiZK6K6HCy5k',
          type: 'function',
          function: { name: 'get_current_weather', arguments: '{"location":"Boston, MA","unit":"celsius"}' },
        },
      ]);
      assert.equal(c.choices[0]?.finish_reason, 'tool_calls');
      assert.deepEqual(c.usage, {
        prompt_tokens: 291,
        completion_tokens: 23,
        total_tokens: 314,
        completion_tokens_details: { reasoning_tokens: 0 },
      });
      assert.equal(c.created, 1741294021);
    });

    it('response-reasoning.json: the text, reasoning tokens and cached tokens in usage', () => {
      const c = readResponse(JSON.parse(llmSample('openai-responses/response-reasoning.json')));
      assert.ok(c);
      assert.equal(c.choices[0]?.message.content, 'The classic tongue twister...');
      assert.equal(c.choices[0]?.finish_reason, 'stop');
      assert.deepEqual(c.usage, {
        prompt_tokens: 81,
        completion_tokens: 1035,
        total_tokens: 1116,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 832 },
      });
    });

    it('an incomplete Response for the output limit finishes with length; garbage is refused', () => {
      const json = JSON.parse(llmSample('openai-responses/response-reasoning.json')) as Record<string, unknown>;
      const c = readResponse({ ...json, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
      assert.equal(c?.choices[0]?.finish_reason, 'length');
      assert.equal(readResponse({ object: 'chat.completion', choices: [] }), undefined);
      assert.equal(readResponse({ object: 'response', output: [{ type: 'function_call' }] }), undefined);
    });

    it('stream-text.sse: text deltas, finish stop, usage from response.completed', async () => {
      const steps = await readSample('openai-responses/stream-text.sse');
      const out = assemble(chunksOf(steps));
      assert.equal(out.content, 'Hello world');
      assert.equal(out.finish, 'stop');
      assert.equal(chunksOf(steps)[0]?.id, 'resp_test_1');
      assert.equal(chunksOf(steps)[0]?.model, 'gpt-4o-2024-08-06');
      assert.deepEqual(usageOf(steps), {
        prompt_tokens: 10,
        completion_tokens: 2,
        total_tokens: 12,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0 },
      });
    });

    it('stream-reasoning-text.sse: reasoning_text deltas as reasoning_content, reasoning tokens', async () => {
      const steps = await readSample('openai-responses/stream-reasoning-text.sse');
      const out = assemble(chunksOf(steps));
      assert.equal(out.reasoning, 'Chain: Step 1. Step 2.');
      assert.equal(out.content, 'The answer is 42');
      assert.equal(usageOf(steps)?.completion_tokens_details?.reasoning_tokens, 2);
    });

    it('stream-reasoning-summary.sse: summary parts joined by a blank line, cached and reasoning tokens', async () => {
      const steps = await readSample('openai-responses/stream-reasoning-summary.sse');
      const out = assemble(chunksOf(steps));
      assert.equal(
        out.reasoning,
        '**Responding to a greeting**\n\nThe user just said, "Hello!" So, it seems I need to engage.\n\n**Offering help**\n\nI\'ll greet them back and offer help.',
      );
      assert.equal(out.content, 'Hello! How can I assist you today?');
      assert.deepEqual(usageOf(steps), {
        prompt_tokens: 2048,
        completion_tokens: 350,
        total_tokens: 2398,
        prompt_tokens_details: { cached_tokens: 1536 },
        completion_tokens_details: { reasoning_tokens: 320 },
      });
    });

    it('stream-function-call.sse: id and name first, then the argument deltas, finish tool_calls', async () => {
      const steps = await readSample('openai-responses/stream-function-call.sse');
      const chunks = chunksOf(steps);
      const out = assemble(chunks);
      assert.deepEqual(out.calls, [
        {
          id: 'call_unLAR8MvFNptuiZK6K6HCy5k',
          name: 'get_current_weather',
          arguments: '{"location":"Boston, MA","unit":"celsius"}',
        },
      ]);
      assert.equal(out.finish, 'tool_calls');
      assert.equal(usageOf(steps)?.prompt_tokens_details?.cached_tokens, 256);
    });

    it('stream-failed.sse and stream-error-rate-limit.sse end in error steps', async () => {
      assert.deepEqual((await readSample('openai-responses/stream-failed.sse')).at(-1), {
        kind: 'error',
        error: { code: 'server_error', message: 'The model failed to generate a response.' },
      });
      const last = (await readSample('openai-responses/stream-error-rate-limit.sse')).at(-1);
      assert.equal(last?.kind, 'error');
    });
  });

  describe('over HTTP (fake Responses API replaying the samples)', () => {
    let fake: FakeResponsesUpstream;
    let agent: Agent;
    let provider: ChatProvider;
    const make = (apiKey = FAKE_RESPONSES_KEY): ChatProvider =>
      createOpenAiResponsesProvider({
        baseUrl: fake.baseUrl,
        apiKey,
        timeoutMs: 5000,
        dispatcher: agent,
        modelId: 'svc-reasoner',
        upstreamModel: 'gpt-5.4',
      });

    before(async () => {
      fake = await startFakeResponsesUpstream();
      agent = createUpstreamAgent();
      provider = make();
    });
    after(async () => {
      await agent.close();
      await fake.close();
    });

    const request: WireChatRequest = { model: 'gpt-5.4', messages: [{ role: 'user', content: 'Hello' }] };
    const signal = (): AbortSignal => new AbortController().signal;
    async function collect(p: ChatProvider): Promise<WireChunk[]> {
      const out: WireChunk[] = [];
      for await (const c of p.stream(request, signal())) out.push(c);
      return out;
    }
    async function failure(run: () => Promise<unknown>): Promise<{ code: string; message: string }> {
      try {
        await run();
      } catch (error) {
        assert.ok(isSvcError(error), String(error));
        return { code: error.code, message: error.message };
      }
      assert.fail('expected a failure');
    }

    it('posts to {base}/responses with the bearer key', async () => {
      fake.enqueue({ sample: 'openai-responses/response-reasoning.json' });
      const completion = await provider.complete(request, signal());
      const sent = fake.requests.at(-1);
      assert.equal(sent?.path, '/v1/responses');
      assert.equal(sent?.headers['authorization'], `Bearer ${FAKE_RESPONSES_KEY}`);
      assert.deepEqual(sent?.body, {
        model: 'gpt-5.4',
        input: [{ type: 'message', role: 'user', content: 'Hello' }],
        store: false,
      });
      assert.equal(completion.usage.completion_tokens_details?.reasoning_tokens, 832);
    });

    it('streams a recorded stream (data-only framing, [DONE]) and ends with one usage chunk', async () => {
      fake.enqueue({ sample: 'openai-responses/stream-reasoning-summary.sse' });
      const chunks = await collect(provider);
      assert.equal(fake.requests.at(-1)?.body['stream'], true);
      assert.equal(assemble(chunks).content, 'Hello! How can I assist you today?');
      const last = chunks.at(-1);
      assert.deepEqual(last?.choices, []);
      assert.equal(last?.usage?.prompt_tokens_details?.cached_tokens, 1536);
      assert.equal(last?.usage?.completion_tokens_details?.reasoning_tokens, 320);
      fake.enqueue({ sample: 'openai-responses/stream-text.sse' });
      assert.equal(assemble(await collect(provider)).content, 'Hello world');
    });

    it('issue 30: an answer or a stream without usage is served, with svc’s own count marked estimated', async () => {
      const response = JSON.parse(llmSample('openai-responses/response-reasoning.json')) as Record<string, unknown>;
      delete response['usage'];
      fake.enqueue({ garbage: JSON.stringify(response), contentType: 'application/json' });
      const done = await provider.complete(request, signal());
      assert.equal(done.usage.estimated, true);
      assert.ok(done.usage.prompt_tokens > 0 && done.usage.completion_tokens > 0, JSON.stringify(done.usage));
      assert.ok((done.choices[0]?.message.content ?? '').length > 0);
      const withoutUsage = llmSample('openai-responses/stream-text.sse').replace(
        /"usage":\{[^{}]*(\{[^{}]*\}[^{}]*)*\}/g,
        '"usage":null',
      );
      assert.doesNotMatch(withoutUsage, /"input_tokens"/);
      fake.enqueue({ garbage: withoutUsage, contentType: 'text/event-stream' });
      const chunks = await collect(provider);
      assert.equal(assemble(chunks).content, 'Hello world');
      const last = chunks.at(-1);
      assert.equal(last?.usage?.estimated, true);
      assert.ok((last?.usage?.completion_tokens ?? 0) > 0);
    });

    it('maps failures: HTTP 400 keeps its message, response.failed, error events, cut streams, a failed 200, wrong key', async () => {
      fake.enqueue({ sample: 'openai-responses/error-400.json', status: 400 });
      assert.deepEqual(await failure(() => provider.complete(request, signal())), {
        code: 'upstream_invalid_request',
        message: "Invalid type for 'input[0].content': expected one of a string or array of input items.",
      });
      fake.enqueue({ sample: 'openai-responses/stream-failed.sse' });
      assert.equal((await failure(() => collect(provider))).code, 'upstream_error');
      fake.enqueue({ sample: 'openai-responses/stream-error-rate-limit.sse' });
      assert.equal((await failure(() => collect(provider))).code, 'upstream_rate_limited');
      fake.enqueue({ cut: 'openai-responses/stream-text.sse', afterEvents: 4, cleanEnd: true });
      assert.equal((await failure(() => collect(provider))).code, 'upstream_error');
      const failed = JSON.parse(llmSample('openai-responses/stream-failed.sse').split('data: ')[2] ?? '{}') as {
        response: unknown;
      };
      fake.enqueue({ garbage: JSON.stringify(failed.response) });
      assert.equal((await failure(() => provider.complete(request, signal()))).code, 'upstream_error');
      assert.deepEqual(await failure(() => make('sk-wrong').complete(request, signal())), {
        code: 'upstream_error',
        message: 'The model provider failed',
      });
    });
  });
});
