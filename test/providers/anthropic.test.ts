import assert from 'node:assert/strict';
import { createAnthropicProvider, messagesUrl } from '../../core/providers/llm/anthropic/provider';
import { toAnthropicRequest } from '../../core/providers/llm/anthropic/request';
import {
  createAnthropicStreamReader,
  readAnthropicMessage,
  readAnthropicUsage,
  type StreamStep,
} from '../../core/providers/llm/anthropic/response';
import { parseSse } from '../../core/providers/llm/openai/sse';
import type { Agent } from 'undici';
import { createUpstreamAgent } from '../../core/providers/http';
import type { ChatProvider, WireChatRequest, WireChunk } from '../../core/providers/llm/types';
import { isSvcError } from '../../core/errors';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import { llmSample } from '../fakes/sample-replay';

async function* bytes(text: string): AsyncGenerator<Uint8Array> {
  yield Buffer.from(text, 'utf8');
}

/** Every step the reader makes of a recorded stream sample. */
async function readSample(
  name: string,
): Promise<{ steps: StreamStep[]; reader: ReturnType<typeof createAnthropicStreamReader> }> {
  const reader = createAnthropicStreamReader('fallback', 1_700_000_000_000);
  const steps: StreamStep[] = [];
  for await (const data of parseSse(bytes(llmSample(name)))) steps.push(reader.read(JSON.parse(data)));
  return { steps, reader };
}

/** What the chunks of a stream add up to, as a chat client would assemble them. */
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

const chunksOf = (steps: readonly StreamStep[]): WireChunk[] =>
  steps.flatMap((s) => (s.kind === 'chunks' ? s.chunks : []));

const base: WireChatRequest = { model: 'claude-x', messages: [{ role: 'user', content: 'hi' }] };

describe('anthropic provider', function () {
  describe('chat request → Messages request', () => {
    it('moves system and developer messages to `system` and sends the model limit when none was set', () => {
      const body = toAnthropicRequest(
        {
          model: 'claude-x',
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
            { role: 'user', content: 'Bonjour' },
          ],
        },
        4096,
      );
      assert.deepEqual(body, {
        model: 'claude-x',
        max_tokens: 4096,
        system: [
          { type: 'text', text: 'Be brief.' },
          { type: 'text', text: 'Answer in French.' },
        ],
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Bonjour' }] }],
      });
    });

    it('turns tool calls into tool_use, tool messages into tool_result of one user turn, images into image blocks', () => {
      const body = toAnthropicRequest(
        {
          model: 'claude-x',
          max_tokens: 300,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'Weather here?' },
                { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
                { type: 'image_url', image_url: { url: 'https://example.com/a.jpg' } },
              ],
            },
            {
              role: 'assistant',
              content: 'Checking.',
              tool_calls: [
                {
                  id: 'toolu_1',
                  type: 'function',
                  function: { name: 'get_weather', arguments: '{"location":"Paris"}' },
                },
                { id: 'toolu_2', type: 'function', function: { name: 'get_time', arguments: '' } },
              ],
            },
            { role: 'tool', tool_call_id: 'toolu_1', content: '18°C' },
            { role: 'tool', tool_call_id: 'toolu_2', content: '12:00' },
            { role: 'user', content: 'Thanks' },
          ],
          tools: [
            {
              type: 'function',
              function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object' } },
            },
            { type: 'function', function: { name: 'get_time' } },
          ],
          tool_choice: { type: 'function', function: { name: 'get_weather' } },
          parallel_tool_calls: false,
          stop: ['END'],
          temperature: 0.2,
          top_p: 0.9,
          user: 'user-7',
        },
        4096,
      );
      assert.deepEqual(body['messages'], [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Weather here?' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/a.jpg' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } },
            { type: 'tool_use', id: 'toolu_2', name: 'get_time', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: '18°C' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: '12:00' },
            { type: 'text', text: 'Thanks' },
          ],
        },
      ]);
      assert.deepEqual(body['tools'], [
        { name: 'get_weather', description: 'Weather', input_schema: { type: 'object' } },
        { name: 'get_time', input_schema: { type: 'object', properties: {} } },
      ]);
      assert.deepEqual(body['tool_choice'], { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true });
      assert.deepEqual(body['stop_sequences'], ['END']);
      assert.equal(body['max_tokens'], 300);
      assert.equal(body['temperature'], 0.2);
      assert.equal(body['top_p'], 0.9);
      assert.deepEqual(body['metadata'], { user_id: 'user-7' });
      assert.equal(body['stop'], undefined);
      assert.equal(body['user'], undefined);
      assert.equal(body['parallel_tool_calls'], undefined);
    });

    it('maps the tool_choice modes', () => {
      const choice = (c: string): unknown => toAnthropicRequest({ ...base, tool_choice: c }, 100)['tool_choice'];
      assert.deepEqual(choice('auto'), { type: 'auto' });
      assert.deepEqual(choice('required'), { type: 'any' });
      assert.deepEqual(choice('none'), { type: 'none' });
    });

    it('turns reasoning_effort into a thinking budget below max_tokens, without sampling changes', () => {
      const body = toAnthropicRequest(
        { ...base, reasoning_effort: 'medium', temperature: 0.5, max_tokens: 20000 },
        64000,
      );
      assert.deepEqual(body['thinking'], { type: 'enabled', budget_tokens: 8192 });
      assert.equal(body['temperature'], undefined);
      assert.equal(body['reasoning_effort'], undefined);
      const capped = toAnthropicRequest({ ...base, reasoning_effort: 'high', max_tokens: 5000 }, 64000);
      assert.deepEqual(capped['thinking'], { type: 'enabled', budget_tokens: 4999 });
      // Anthropic's minimum budget does not fit: no thinking rather than a refused request.
      const small = toAnthropicRequest(
        { ...base, reasoning_effort: 'high', max_tokens: 1000, temperature: 0.5 },
        64000,
      );
      assert.equal(small['thinking'], undefined);
      assert.equal(small['temperature'], 0.5);
      // A forced tool cannot be combined with thinking.
      const forced = toAnthropicRequest(
        {
          ...base,
          reasoning_effort: 'high',
          tools: [{ type: 'function', function: { name: 'f' } }],
          tool_choice: 'required',
        },
        64000,
      );
      assert.equal(forced['thinking'], undefined);
    });

    it('refuses what the Messages API cannot carry, naming the parameter; passes operator extras through', () => {
      for (const [param, value] of [
        ['n', 2],
        ['logprobs', true],
        ['seed', 7],
        ['response_format', { type: 'json_schema', json_schema: { name: 'x', schema: {} } }],
      ] as const) {
        assert.throws(
          () => toAnthropicRequest({ ...base, [param]: value }, 100),
          (e: unknown) => isSvcError(e) && e.code === 'invalid_argument' && e.param === param,
          param,
        );
      }
      assert.throws(
        () =>
          toAnthropicRequest(
            { ...base, messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] },
            100,
          ),
        (e: unknown) => isSvcError(e) && e.param === 'messages[0].content[0].type',
      );
      assert.throws(
        () =>
          toAnthropicRequest(
            {
              ...base,
              messages: [
                {
                  role: 'assistant',
                  tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '[1]' } }],
                },
              ],
            },
            100,
          ),
        (e: unknown) => isSvcError(e) && e.param === 'messages[0].tool_calls[0].function.arguments',
      );
      const body = toAnthropicRequest({ ...base, n: 1, top_k: 5, prompt_cache_key: 'k', service_tier: 'auto' }, 100);
      assert.equal(body['top_k'], 5);
      assert.equal(body['n'], undefined);
      assert.equal(body['prompt_cache_key'], undefined);
      assert.equal(body['service_tier'], undefined);
    });
  });

  describe('Messages answers → chat (recorded samples)', () => {
    it('message-tool-use.json: text, one tool call, finish tool_calls, null usage fields read as 0', () => {
      const m = readAnthropicMessage(JSON.parse(llmSample('anthropic/message-tool-use.json')), 1_700_000_000_000);
      assert.ok(m);
      const choice = m.choices[0];
      assert.equal(choice?.message.content, "I'll check the current weather in Paris for you.");
      assert.deepEqual(choice?.message.tool_calls, [
        {
          id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn',
          type: 'function',
          function: { name: 'get_weather', arguments: '{"location":"Paris"}' },
        },
      ]);
      assert.equal(choice?.finish_reason, 'tool_calls');
      assert.deepEqual(m.usage, {
        prompt_tokens: 10,
        completion_tokens: 20,
        total_tokens: 30,
        prompt_tokens_details: { cached_tokens: 0 },
      });
      assert.equal(m.id, 'msg_0');
      assert.equal(m.created, 1_700_000_000);
    });

    it('message-thinking-cache.json: thinking as reasoning_content, cache reads and writes inside prompt_tokens', () => {
      const m = readAnthropicMessage(JSON.parse(llmSample('anthropic/message-thinking-cache.json')), 0);
      assert.ok(m);
      assert.equal(m.choices[0]?.message.content, '27 × 453 = 12,231.');
      assert.equal(m.choices[0]?.message.reasoning_content, 'The user asks for 27 * 453. 27 * 453 = 12231.');
      assert.equal(m.choices[0]?.finish_reason, 'stop');
      assert.deepEqual(m.usage, {
        prompt_tokens: 21 + 1800 + 188,
        completion_tokens: 120,
        total_tokens: 21 + 1800 + 188 + 120,
        prompt_tokens_details: { cached_tokens: 1800, cache_write_tokens: 188 },
      });
    });

    it('message-cache-tiers.json: one-hour writes apart from five-minute ones (cache_creation), all five-minute without it', () => {
      const m = readAnthropicMessage(JSON.parse(llmSample('anthropic/message-cache-tiers.json')), 0);
      assert.deepEqual(m?.usage?.prompt_tokens_details, {
        cached_tokens: 1800,
        cache_write_tokens: 188 + 8611,
        cache_write_1h_tokens: 8611,
      });
      assert.equal(m?.usage?.prompt_tokens, 4 + 1800 + 188 + 8611);
      // Without cache_creation (older API versions, Anthropic-compatible hosts) every write is a five-minute write.
      assert.deepEqual(
        readAnthropicUsage({ input_tokens: 4, output_tokens: 1, cache_creation_input_tokens: 99 })
          ?.prompt_tokens_details,
        { cached_tokens: 0, cache_write_tokens: 99 },
      );
    });

    it('refuses what is not a Message', () => {
      assert.equal(readAnthropicMessage({ type: 'error', error: {} }, 0), undefined);
      assert.equal(readAnthropicMessage({ type: 'message', content: [{ type: 'tool_use', input: {} }] }, 0), undefined);
    });

    it('stream-basic.sse: the text, finish stop, usage from message_start and message_delta', async () => {
      const { steps, reader } = await readSample('anthropic/stream-basic.sse');
      const out = assemble(chunksOf(steps));
      assert.equal(out.content, 'Hello there!');
      assert.equal(out.finish, 'stop');
      assert.equal(steps.at(-1)?.kind, 'stop');
      assert.equal(chunksOf(steps)[0]?.choices[0]?.delta.role, 'assistant');
      assert.equal(chunksOf(steps)[0]?.id, 'msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK');
      assert.deepEqual(reader.usage(), {
        prompt_tokens: 11,
        completion_tokens: 6,
        total_tokens: 17,
        prompt_tokens_details: { cached_tokens: 0 },
      });
    });

    it('stream-tool-use.sse: the tool call with id and name first, then its JSON pieces', async () => {
      const { steps, reader } = await readSample('anthropic/stream-tool-use.sse');
      const chunks = chunksOf(steps);
      const out = assemble(chunks);
      assert.equal(out.content, "I'll check the current weather in Paris for you.");
      assert.deepEqual(out.calls, [
        { id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn', name: 'get_weather', arguments: '{"location": "Paris"}' },
      ]);
      assert.equal(out.finish, 'tool_calls');
      const first = chunks.find((c) => c.choices[0]?.delta.tool_calls !== undefined);
      assert.deepEqual(first?.choices[0]?.delta.tool_calls, [
        {
          index: 0,
          id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn',
          type: 'function',
          function: { name: 'get_weather', arguments: '' },
        },
      ]);
      assert.equal(reader.usage()?.prompt_tokens, 377);
      assert.equal(reader.usage()?.completion_tokens, 65);
    });

    it('stream-thinking-refusal.sse: thinking deltas as reasoning_content, refusal as content_filter, thinking tokens as reasoning', async () => {
      const { steps, reader } = await readSample('anthropic/stream-thinking-refusal.sse');
      const out = assemble(chunksOf(steps));
      assert.ok(out.reasoning.startsWith('Simple educational question about what a solar eclipse is.'));
      assert.ok(out.reasoning.endsWith('roll with it politely.'));
      assert.equal(out.content, 'Hi');
      assert.equal(out.finish, 'content_filter');
      assert.deepEqual(reader.usage(), {
        prompt_tokens: 28,
        completion_tokens: 106,
        total_tokens: 134,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 67 },
      });
    });

    it('stream-cache-usage.sse: message_delta usage replaces message_start usage (cache read 8, write 7)', async () => {
      const { reader } = await readSample('anthropic/stream-cache-usage.sse');
      assert.deepEqual(reader.usage(), {
        prompt_tokens: 42 + 8 + 7,
        completion_tokens: 99,
        total_tokens: 42 + 8 + 7 + 99,
        prompt_tokens_details: { cached_tokens: 8, cache_write_tokens: 7 },
        completion_tokens_details: { reasoning_tokens: 30 },
      });
    });

    it('stream-usage-kept.sse: fields message_delta omits keep message_start values', async () => {
      const { reader } = await readSample('anthropic/stream-usage-kept.sse');
      assert.deepEqual(reader.usage(), {
        prompt_tokens: 10 + 3 + 2,
        completion_tokens: 12,
        total_tokens: 27,
        prompt_tokens_details: { cached_tokens: 3, cache_write_tokens: 2 },
      });
    });

    it('stream-error-overloaded.sse: the error event is an error step', async () => {
      const { steps } = await readSample('anthropic/stream-error-overloaded.sse');
      assert.deepEqual(steps.at(-1), { kind: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    });
  });

  describe('over HTTP (fake Messages API replaying the samples)', () => {
    let fake: FakeAnthropicUpstream;
    let agent: Agent;
    let provider: ChatProvider;
    const make = (extra: { apiKey?: string; baseUrl?: string; timeoutMs?: number } = {}): ChatProvider =>
      createAnthropicProvider({
        baseUrl: extra.baseUrl ?? fake.baseUrl,
        apiKey: extra.apiKey ?? FAKE_ANTHROPIC_KEY,
        timeoutMs: extra.timeoutMs ?? 5000,
        dispatcher: agent,
        modelId: 'svc-claude',
        upstreamModel: 'claude-opus-4-8',
        maxOutputTokens: 2048,
        headers: { 'anthropic-beta': 'interleaved-thinking-2025-05-14', 'x-api-key': 'cannot-override' },
      });

    before(async () => {
      fake = await startFakeAnthropicUpstream();
      agent = createUpstreamAgent();
      provider = make();
    });
    after(async () => {
      await agent.close();
      await fake.close();
    });

    const request: WireChatRequest = { model: 'claude-opus-4-8', messages: [{ role: 'user', content: 'Hello' }] };
    const signal = (): AbortSignal => new AbortController().signal;
    async function collect(p: ChatProvider): Promise<WireChunk[]> {
      const out: WireChunk[] = [];
      for await (const c of p.stream(request, signal())) out.push(c);
      return out;
    }
    async function failure(run: () => Promise<unknown>): Promise<{ code: string; message: string; param?: string }> {
      try {
        await run();
      } catch (error) {
        assert.ok(isSvcError(error), String(error));
        return {
          code: error.code,
          message: error.message,
          ...(error.param !== undefined ? { param: error.param } : {}),
        };
      }
      assert.fail('expected a failure');
    }

    it('posts to {base}/v1/messages with x-api-key, anthropic-version and the extra headers', async () => {
      fake.enqueue({ sample: 'anthropic/message-thinking-cache.json' });
      const completion = await provider.complete(request, signal());
      const sent = fake.requests.at(-1);
      assert.equal(sent?.path, '/v1/messages');
      assert.equal(sent?.headers['x-api-key'], FAKE_ANTHROPIC_KEY);
      assert.equal(sent?.headers['anthropic-version'], '2023-06-01');
      assert.equal(sent?.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14');
      assert.equal(sent?.headers['authorization'], undefined);
      // svc's cache breakpoint on the last user turn (SPEC §13, cache.breakpoints: auto).
      assert.deepEqual(sent?.body, {
        model: 'claude-opus-4-8',
        max_tokens: 2048,
        messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello', cache_control: { type: 'ephemeral' } }] }],
      });
      assert.equal(completion.usage.prompt_tokens, 2009);
      assert.equal(completion.usage.prompt_tokens_details?.cached_tokens, 1800);
      assert.equal(completion.choices[0]?.message.reasoning_content, 'The user asks for 27 * 453. 27 * 453 = 12231.');
    });

    it('accepts a base URL that already ends in /v1', () => {
      assert.equal(messagesUrl('https://api.anthropic.com').href, 'https://api.anthropic.com/v1/messages');
      assert.equal(messagesUrl('https://api.anthropic.com/').href, 'https://api.anthropic.com/v1/messages');
      assert.equal(
        messagesUrl('https://proxy.example/anthropic/v1').href,
        'https://proxy.example/anthropic/v1/messages',
      );
    });

    it('streams a recorded tool-use stream and ends with one usage chunk', async () => {
      fake.enqueue({ sample: 'anthropic/stream-tool-use.sse' });
      const chunks = await collect(provider);
      assert.equal(fake.requests.at(-1)?.body['stream'], true);
      const out = assemble(chunks);
      assert.deepEqual(out.calls, [
        { id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn', name: 'get_weather', arguments: '{"location": "Paris"}' },
      ]);
      const last = chunks.at(-1);
      assert.deepEqual(last?.choices, []);
      assert.equal(last?.usage?.prompt_tokens, 377);
      assert.equal(last?.usage?.completion_tokens, 65);
      assert.equal(chunks.filter((c) => c.usage !== undefined).length, 1);
    });

    it('maps Anthropic errors: 529 overloaded, 400 refusal with its message, 404 model, wrong key', async () => {
      fake.enqueue({ sample: 'anthropic/error-overloaded.json', status: 529 });
      assert.equal((await failure(() => provider.complete(request, signal()))).code, 'upstream_unavailable');
      fake.enqueue({ sample: 'anthropic/error-invalid-request.json', status: 400 });
      assert.deepEqual(await failure(() => provider.complete(request, signal())), {
        code: 'upstream_invalid_request',
        message: 'messages: text content blocks must be non-empty',
      });
      fake.enqueue({ sample: 'anthropic/error-not-found-model.json', status: 404 });
      const notFound = await failure(() => provider.complete(request, signal()));
      assert.equal(notFound.code, 'upstream_not_found');
      assert.equal(notFound.param, 'model');
      fake.enqueue({ sample: 'anthropic/error-overloaded.json', status: 429, headers: { 'retry-after': '7' } });
      const limited = await failure(() => provider.complete(request, signal()));
      assert.equal(limited.code, 'upstream_rate_limited');
      assert.match(limited.message, /retry after 7 s/);
      // svc's own key refused: the client learns nothing about it.
      const wrongKey = await failure(() => make({ apiKey: 'sk-ant-wrong' }).complete(request, signal()));
      assert.deepEqual(wrongKey, { code: 'upstream_error', message: 'The model provider failed' });
    });

    it('an error event mid-stream, a cut stream and garbage are upstream failures', async () => {
      fake.enqueue({ sample: 'anthropic/stream-error-overloaded.sse' });
      assert.equal((await failure(() => collect(provider))).code, 'upstream_unavailable');
      // The connection dropped mid-body, as a transport failure.
      fake.enqueue({ cut: 'anthropic/stream-basic.sse', afterEvents: 4 });
      assert.equal((await failure(() => collect(provider))).code, 'upstream_unavailable');
      // The body ends cleanly before message_delta and message_stop: a stream that never finished.
      fake.enqueue({ cut: 'anthropic/stream-basic.sse', afterEvents: 6, cleanEnd: true });
      assert.equal((await failure(() => collect(provider))).code, 'upstream_error');
      fake.enqueue({ garbage: '<html>gateway</html>', contentType: 'text/html' });
      assert.deepEqual(await failure(() => provider.complete(request, signal())), {
        code: 'upstream_error',
        message: 'The model provider returned an invalid response',
      });
      fake.enqueue({ garbage: '{"type":"message","content":"nope"}' });
      assert.equal((await failure(() => provider.complete(request, signal()))).code, 'upstream_error');
    });

    it('issue 30: an answer or a stream without usage is served, with svc’s own count marked estimated', async () => {
      const message = JSON.parse(llmSample('anthropic/message-tool-use.json')) as Record<string, unknown>;
      delete message['usage'];
      fake.enqueue({ garbage: JSON.stringify(message), contentType: 'application/json' });
      const done = await provider.complete(request, signal());
      assert.equal(done.usage.estimated, true);
      assert.ok(done.usage.prompt_tokens > 0 && done.usage.completion_tokens > 0, JSON.stringify(done.usage));
      const withoutUsage = llmSample('anthropic/stream-basic.sse')
        .split(/(?<=\n\n)/)
        .map((event) => event.replace(/,"usage":\{[^}]*\}/g, ''))
        .join('');
      assert.doesNotMatch(withoutUsage, /"usage"/);
      fake.enqueue({ garbage: withoutUsage, contentType: 'text/event-stream' });
      const chunks = await collect(provider);
      const last = chunks.at(-1);
      assert.equal(last?.usage?.estimated, true);
      assert.ok((last?.usage?.completion_tokens ?? 0) > 0);
      // Natively, the message_delta the client gets carries the same count, marked estimated.
      fake.enqueue({ garbage: withoutUsage, contentType: 'text/event-stream' });
      const native: WireChunk[] = [];
      for await (const c of provider.native!.stream(
        { messages: [{ role: 'user', content: 'Hello' }] },
        request,
        signal(),
      ))
        native.push(c);
      const delta = native.flatMap((c) => c.native ?? []).find((e) => e['type'] === 'message_delta');
      const billed = native.at(-1)?.usage;
      assert.deepEqual(delta?.['usage'], {
        input_tokens: billed?.prompt_tokens,
        output_tokens: billed?.completion_tokens,
        estimated: true,
      });
      assert.equal(billed?.estimated, true);
    });

    it('a request the translation refuses never reaches the upstream', async () => {
      const before = fake.requests.length;
      const refused = await failure(() => provider.complete({ ...request, n: 3 }, signal()));
      assert.deepEqual(refused.param, 'n');
      assert.equal(fake.requests.length, before);
    });
  });
});
