import assert from 'node:assert/strict';
import type OpenAI from 'openai';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { assertEvent, assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

type Obj = Record<string, unknown>;

async function post(fx: OpenAiFixture, path: string, key: string, body: unknown): Promise<Response> {
  return fetch(`${fx.baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function errorOf(response: Response): Promise<{ status: number; error: Obj }> {
  const json = (await response.json()) as { error: Obj };
  assert.deepEqual(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
  return { status: response.status, error: json.error };
}

/** The data frames of an SSE body, parsed. */
function frames(text: string): Obj[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as Obj);
}

const hi = [{ role: 'user', content: 'hi' }];

describe('OpenAI API: fidelity (nothing charged unseen, nothing dropped silently)', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({
      // A vLLM-like upstream that takes top_k and min_p, and a model with a small context window.
      extraConfig: (base) => `
  svc-vllm:
    provider: openai
    base_url: ${base}
    upstream_model: fake-model-2
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    extra_params: [top_k, min_p]
  svc-small:
    provider: openai
    base_url: ${base}
    upstream_model: fake-model-3
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 200
    max_output_tokens: 50
`,
    });
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('every answer carries openai-version: 2020-10-01 and openai-processing-ms, as OpenAI sends them', async () => {
    const { key } = await fx.fund(100_000);
    const answers = [
      await post(fx, '/chat/completions', key, { model: 'svc-pro', messages: hi }),
      await post(fx, '/chat/completions', key, { model: 'svc-pro', messages: hi, stream: true }),
      await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi' }),
      await post(fx, '/chat/completions', key, { model: 'no-such-model', messages: hi }),
      await fetch(`${fx.baseURL}/models`, { headers: { authorization: `Bearer ${key}` } }),
      await fetch(`${fx.baseURL}/models`),
    ];
    for (const [i, response] of answers.entries()) {
      await response.text();
      assert.equal(response.headers.get('openai-version'), '2020-10-01', `answer ${i}`);
      assert.match(response.headers.get('openai-processing-ms') ?? '', /^\d+$/, `answer ${i}`);
    }
    // The official SDK reads them as headers.
    const raw = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    assert.equal(raw.response.headers.get('openai-version'), '2020-10-01');
  });

  describe('the cost of a stream', () => {
    it('ends a chat stream without include_usage with a cost comment before [DONE]', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const response = await post(fx, '/chat/completions', key, {
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      assert.equal(response.status, 200);
      const text = await response.text();
      const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
      const { balance } = await fx.settled(accountId);
      assert.equal(balance, 100_000n - cost);
      assert.match(text, new RegExp(`\\n: svc-cost ${cost} balance ${balance}\\n\\ndata: \\[DONE\\]\\n\\n$`));
    });

    it('ends a Responses stream with the same cost comment', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const response = await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi', stream: true });
      assert.equal(response.status, 200);
      const text = await response.text();
      const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
      const { balance } = await fx.settled(accountId);
      assert.match(
        text,
        new RegExp(`event: response.completed\\ndata: .*\\n\\n: svc-cost ${cost} balance ${balance}\\n\\n$`),
      );
    });
  });
  describe('chat completions: what the upstream adds comes back', () => {
    it('passes logprobs through (non-stream)', async () => {
      const { key } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'Hello there' });
      const completion = await fx.client(key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        logprobs: true,
        top_logprobs: 2,
      });
      assertSchema('CreateChatCompletionResponse', completion);
      assert.equal(fx.upstream.requests[0]?.body['logprobs'], true);
      assert.equal(fx.upstream.requests[0]?.body['top_logprobs'], 2);
      const tokens = completion.choices[0]?.logprobs?.content ?? [];
      assert.deepEqual(
        tokens.map((t) => [t.token, t.logprob, t.top_logprobs.length]),
        [
          ['Hello ', -0.25, 2],
          ['there', -0.5, 2],
        ],
      );
    });

    it('passes logprobs through (stream), chunk by chunk', async () => {
      const { key } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'Hello there' });
      const stream = await fx.client(key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        logprobs: true,
        top_logprobs: 1,
        stream: true,
      });
      const tokens: string[] = [];
      for await (const chunk of stream) {
        assertSchema('CreateChatCompletionStreamResponse', chunk);
        for (const t of chunk.choices[0]?.logprobs?.content ?? []) tokens.push(t.token);
      }
      assert.deepEqual(tokens, ['Hello ', 'there']);
    });

    it('reports cached and reasoning tokens as the upstream counted them (chat and Responses)', async () => {
      const { key } = await fx.fund(100_000);
      const usage = { prompt_tokens: 100, completion_tokens: 50, cached_tokens: 64, reasoning_tokens: 20 };
      fx.upstream.enqueue({ kind: 'text', usage }, { kind: 'text', usage }, { kind: 'text', usage });
      const client = fx.client(key);
      const completion = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
      });
      assert.equal(completion.usage?.prompt_tokens_details?.cached_tokens, 64);
      assert.equal(completion.usage?.completion_tokens_details?.reasoning_tokens, 20);
      const stream = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let last: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) last = chunk.usage ?? last;
      assert.equal(last?.prompt_tokens_details?.cached_tokens, 64);
      assert.equal(last?.completion_tokens_details?.reasoning_tokens, 20);
      const response = await client.responses.create({ model: 'svc-pro', input: 'hi' });
      assert.equal(response.usage?.input_tokens_details.cached_tokens, 64);
      assert.equal(response.usage?.output_tokens_details.reasoning_tokens, 20);
    });

    it('passes message.annotations, message.audio and the service tier through', async () => {
      const { key } = await fx.fund(100_000);
      const annotations = [
        {
          type: 'url_citation',
          url_citation: { url: 'https://example.com', title: 'Ex', start_index: 0, end_index: 5 },
        },
      ];
      const audio = { id: 'audio_1', data: 'UklGRg==', expires_at: 1_800_000_000, transcript: 'Hello' };
      fx.upstream.enqueue(
        { kind: 'text', text: 'Hello', annotations, audio, serviceTier: 'flex' },
        { kind: 'text', text: 'Hello', serviceTier: 'flex' },
      );
      const client = fx.client(key);
      const completion = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        modalities: ['text', 'audio'],
        audio: { voice: 'alloy', format: 'wav' },
        service_tier: 'flex',
      });
      assertSchema('CreateChatCompletionResponse', completion);
      assert.deepEqual(fx.upstream.requests[0]?.body['audio'], { voice: 'alloy', format: 'wav' });
      assert.equal(fx.upstream.requests[0]?.body['service_tier'], 'flex');
      assert.deepEqual(completion.choices[0]?.message.annotations, annotations);
      assert.deepEqual(completion.choices[0]?.message.audio, audio);
      assert.equal(completion.service_tier, 'flex');
      const stream = await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const tiers = new Set<string | null | undefined>();
      for await (const chunk of stream) tiers.add(chunk.service_tier);
      assert.deepEqual([...tiers], ['flex']);
    });
  });

  describe('chat completions: parameters OpenAI does not document are refused, not forwarded', () => {
    for (const name of ['best_of', 'min_tokens', 'ignore_eos', 'top_k']) {
      it(`refuses ${name} with 400 unknown_parameter, nothing sent upstream or charged`, async () => {
        const { key, accountId } = await fx.fund(10_000);
        const { status, error } = await errorOf(
          await post(fx, '/chat/completions', key, { model: 'svc-pro', messages: hi, [name]: 2 }),
        );
        assert.equal(status, 400);
        assert.deepEqual(error, {
          message: `Unrecognized request argument supplied: ${name}`,
          type: 'invalid_request_error',
          param: name,
          code: 'unknown_parameter',
        });
        assert.equal(fx.upstream.requests.length, 0);
        assert.equal(await fx.balance(accountId), 10_000n);
      });
    }

    it('refuses an unknown key inside a function tool with 400 unknown_parameter naming it, nothing sent or charged', async () => {
      const { key, accountId } = await fx.fund(10_000);
      const fn = { name: 'f', parameters: { type: 'object', properties: {} }, examples: ['x'] };
      const { status, error } = await errorOf(
        await post(fx, '/chat/completions', key, {
          model: 'svc-pro',
          messages: hi,
          tools: [{ type: 'function', function: fn }],
        }),
      );
      assert.equal(status, 400);
      assert.deepEqual(error, {
        message: "Unknown parameter: 'tools[0].function.examples'.",
        type: 'invalid_request_error',
        param: 'tools[0].function.examples',
        code: 'unknown_parameter',
      });
      assert.equal(fx.upstream.requests.length, 0);
      assert.equal(await fx.balance(accountId), 10_000n);
    });

    it('refuses the deprecated functions / function_call with 400 unsupported_parameter', async () => {
      const { key } = await fx.fund(10_000);
      const fn = { name: 'f', parameters: { type: 'object', properties: {} } };
      for (const [param, body] of [
        ['functions', { functions: [fn] }],
        ['function_call', { function_call: 'auto' }],
      ] as const) {
        const { status, error } = await errorOf(
          await post(fx, '/chat/completions', key, { model: 'svc-pro', messages: hi, ...body }),
        );
        assert.equal(status, 400);
        assert.equal(error['code'], 'unsupported_parameter');
        assert.equal(error['param'], param);
      }
      assert.equal(fx.upstream.requests.length, 0);
    });

    it("passes a model's configured extra_params through, and only for that model", async () => {
      const { key } = await fx.fund(100_000);
      const ok = await post(fx, '/chat/completions', key, { model: 'svc-vllm', messages: hi, top_k: 40, min_p: 0.05 });
      assert.equal(ok.status, 200);
      assert.equal(fx.upstream.requests[0]?.body['top_k'], 40);
      assert.equal(fx.upstream.requests[0]?.body['min_p'], 0.05);
      const other = await post(fx, '/chat/completions', key, { model: 'svc-vllm', messages: hi, best_of: 2 });
      assert.equal((await errorOf(other)).error['param'], 'best_of');
      const elsewhere = await post(fx, '/chat/completions', key, { model: 'svc-pro', messages: hi, min_p: 0.05 });
      assert.equal((await errorOf(elsewhere)).error['code'], 'unknown_parameter');
      assert.equal(fx.upstream.requests.length, 1);
    });
  });

  describe('Responses: every parameter honoured or refused', () => {
    it('streams a refusal as refusal events and a refusal content part, not as output_text', async () => {
      const { key } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', refusal: "I can't help with that." });
      const response = await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi', stream: true });
      const events = frames(await response.text());
      for (const event of events) assertEvent(event);
      const types = events.map((e) => e['type']);
      assert.ok(!types.includes('response.output_text.delta'), types.join());
      assert.ok(types.includes('response.refusal.delta'), types.join());
      const done = events.find((e) => e['type'] === 'response.refusal.done');
      assert.equal(done?.['refusal'], "I can't help with that.");
      const completed = events.find((e) => e['type'] === 'response.completed')?.['response'] as Obj;
      assert.deepEqual((completed['output'] as Obj[])[0]?.['content'], [
        { type: 'refusal', refusal: "I can't help with that." },
      ]);
    });

    it('refuses background, stored prompts and conversations with 400 unsupported_parameter', async () => {
      const { key, accountId } = await fx.fund(10_000);
      for (const [param, extra] of [
        ['background', { background: true }],
        ['prompt', { prompt: { id: 'pmpt_1' } }],
        ['conversation', { conversation: 'conv_1' }],
      ] as const) {
        const { status, error } = await errorOf(
          await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi', ...extra }),
        );
        assert.equal(status, 400);
        assert.equal(error['code'], 'unsupported_parameter');
        assert.equal(error['param'], param);
      }
      assert.equal(fx.upstream.requests.length, 0);
      assert.equal(await fx.balance(accountId), 10_000n);
    });

    it('echoes truncation exactly as the client sent it, "disabled" by default, streamed and stored too', async () => {
      const { key } = await fx.fund(100_000);
      const client = fx.client(key);
      for (const truncation of ['auto', 'disabled', undefined] as const) {
        const response = await client.responses.create({
          model: 'svc-pro',
          input: 'hi',
          ...(truncation === undefined ? {} : { truncation }),
        });
        assertSchema('Response', response);
        assert.equal(response.truncation, truncation ?? 'disabled');
        assert.equal((await client.responses.retrieve(response.id)).truncation, truncation ?? 'disabled');
      }
      const stream = await client.responses.create({ model: 'svc-pro', input: 'hi', truncation: 'auto', stream: true });
      const seen: unknown[] = [];
      for await (const event of stream) if ('response' in event) seen.push(event.response.truncation);
      assert.ok(seen.length >= 2);
      assert.ok(
        seen.every((t) => t === 'auto'),
        JSON.stringify(seen),
      );
    });

    it('passes reasoning effort, text verbosity and the prompt cache settings upstream, and echoes them', async () => {
      const { key } = await fx.fund(100_000);
      const response = await fx.client(key).responses.create({
        model: 'svc-pro',
        input: 'hi',
        reasoning: { effort: 'high', summary: 'auto' },
        text: { verbosity: 'low' },
        prompt_cache_key: 'thread-7',
        prompt_cache_retention: '24h',
        truncation: 'disabled',
        background: false,
      });
      assertSchema('Response', response);
      const sent = fx.upstream.requests[0]?.body;
      assert.equal(sent?.['reasoning_effort'], 'high');
      assert.equal(sent?.['verbosity'], 'low');
      assert.equal(sent?.['prompt_cache_key'], 'thread-7');
      assert.equal(sent?.['prompt_cache_retention'], '24h');
      assert.deepEqual(response.reasoning, { effort: 'high', summary: 'auto' });
      assert.equal(response.text?.verbosity, 'low');
      assert.equal(response.prompt_cache_key, 'thread-7');
    });

    it('include message.output_text.logprobs with top_logprobs: logprobs in the output text (and stream)', async () => {
      const { key } = await fx.fund(100_000);
      fx.upstream.enqueue({ kind: 'text', text: 'Hello there' }, { kind: 'text', text: 'Hello there' });
      const body: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
        model: 'svc-pro',
        input: 'hi',
        include: ['message.output_text.logprobs'],
        top_logprobs: 2,
      };
      const response = await fx.client(key).responses.create(body);
      assertSchema('Response', response);
      assert.equal(fx.upstream.requests[0]?.body['logprobs'], true);
      assert.equal(fx.upstream.requests[0]?.body['top_logprobs'], 2);
      assert.equal(response.top_logprobs, 2);
      const part = (response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0];
      assert.ok(part?.type === 'output_text');
      assert.deepEqual(
        part.logprobs?.map((l) => [l.token, l.top_logprobs.length]),
        [
          ['Hello ', 2],
          ['there', 2],
        ],
      );
      const streamed = frames(await (await post(fx, '/responses', key, { ...body, stream: true })).text());
      for (const event of streamed) assertEvent(event);
      const deltas = streamed.filter((e) => e['type'] === 'response.output_text.delta');
      assert.deepEqual(
        deltas.map((d) => (d['logprobs'] as Obj[]).map((l) => l['token'])),
        [['Hello '], ['there']],
      );
    });

    it('refuses an include value OpenAI does not document', async () => {
      const { key } = await fx.fund(10_000);
      const { status, error } = await errorOf(
        await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi', include: ['everything'] }),
      );
      assert.equal(status, 400);
      assert.equal(error['param'], 'include[0]');
    });
  });

  describe('error codes as OpenAI sends them', () => {
    const cases: [string, string, unknown, number, Obj][] = [
      [
        'a parameter of the wrong type',
        '/chat/completions',
        { model: 'svc-pro', messages: hi, temperature: 'hot' },
        400,
        { code: 'invalid_type', param: 'temperature' },
      ],
      [
        'a decimal above its maximum',
        '/chat/completions',
        { model: 'svc-pro', messages: hi, temperature: 3 },
        400,
        { code: 'decimal_above_max_value', param: 'temperature' },
      ],
      [
        'a decimal below its minimum',
        '/responses',
        { model: 'svc-pro', input: 'hi', top_p: -1 },
        400,
        { code: 'decimal_below_min_value', param: 'top_p' },
      ],
      [
        'an integer below its minimum',
        '/chat/completions',
        { model: 'svc-pro', messages: hi, max_tokens: 0 },
        400,
        { code: 'integer_below_min_value', param: 'max_tokens' },
      ],
      [
        'an input longer than the context window',
        '/chat/completions',
        { model: 'svc-small', messages: [{ role: 'user', content: 'word '.repeat(400) }] },
        400,
        { code: 'context_length_exceeded', param: 'messages' },
      ],
      [
        'a Responses input longer than the context window',
        '/responses',
        { model: 'svc-small', input: 'word '.repeat(400) },
        400,
        { code: 'context_length_exceeded', param: 'input' },
      ],
      ['invalid JSON', '/chat/completions', '{"model": "svc-pro",', 400, { code: null, param: null }],
      [
        'an unknown model',
        '/chat/completions',
        { model: 'gpt-nope', messages: hi },
        404,
        { code: 'model_not_found', param: null },
      ],
    ];
    for (const [name, path, body, status, expected] of cases) {
      it(`${name}: ${status} ${String(expected['code'])}`, async () => {
        const { key } = await fx.fund(10_000);
        const got = await errorOf(await post(fx, path, key, body));
        assert.equal(got.status, status);
        assert.deepEqual({ code: got.error['code'], param: got.error['param'] }, expected);
        assert.equal(got.error['type'], 'invalid_request_error');
      });
    }

    it('checks the key before the body: a bad key with a bad body is 401', async () => {
      for (const [path, body] of [
        ['/chat/completions', '{not json'],
        ['/chat/completions', { model: 'svc-pro', messages: 'nope' }],
        ['/responses', { model: 'svc-pro', input: 'hi', stream: 'yes' }],
        ['/responses', '[1]'],
      ] as const) {
        const got = await errorOf(await post(fx, path, 'svc_sk_not_a_real_key', body));
        assert.equal(got.status, 401, `${path} ${JSON.stringify(body)}`);
        assert.equal(got.error['code'], 'invalid_api_key');
      }
    });
  });
});
