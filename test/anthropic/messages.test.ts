import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { assertAnthropicShape } from '../helpers/anthropic-shapes';
import { expectedCost, MAX_OUTPUT } from '../openai/fixture';
import { startAnthropicFixture, type AnthropicFixture } from './fixture';

type Obj = Record<string, unknown>;

describe('Anthropic API: messages, count_tokens, models (official SDK)', function () {
  let fx: AnthropicFixture;

  before(async () => {
    fx = await startAnthropicFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('answers a non-streaming message: system blocks, stop_sequences, metadata.user_id, the exact price in x-svc-cost', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Paris.',
      usage: { prompt_tokens: 123, completion_tokens: 457, cached_tokens: 20 },
    });
    const raw = await fx
      .anthropic(key)
      .messages.create(
        {
          model: 'svc-pro',
          max_tokens: 32000,
          system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
          messages: [{ role: 'user', content: 'Capital of France?' }],
          stop_sequences: ['\n\nHuman:'],
          // Older fields this SDK version no longer declares; Anthropic's API still takes them.
          ...({ temperature: 0.2, top_p: 0.9 } as Obj),
          metadata: { user_id: 'user-42' },
          thinking: { type: 'enabled', budget_tokens: 2000 },
        },
        { timeout: 60_000 },
      )
      .withResponse();
    const message = raw.data;
    assertAnthropicShape('Message', message);
    assert.equal(message.model, 'svc-pro');
    assert.deepEqual(message.content, [{ type: 'text', text: 'Paris.', citations: null }]);
    assert.equal(message.stop_reason, 'end_turn');
    assert.deepEqual(
      [message.usage.input_tokens, message.usage.cache_read_input_tokens, message.usage.output_tokens],
      [103, 20, 457],
    );
    const cost = expectedCost(123, 457);
    assert.equal(raw.response.headers.get('x-svc-cost'), String(cost));
    assert.equal(raw.response.headers.get('x-svc-balance'), String(100_000n - cost));
    assert.match(raw.request_id ?? '', /^req_/);
    assert.equal(raw.response.headers.get('x-svc-ignored-fields'), 'thinking');
    assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);

    const sent = fx.upstream.requests[0]?.body;
    assert.ok(sent);
    assert.equal(sent['max_tokens'], MAX_OUTPUT, 'a limit above the model maximum is clamped');
    assert.deepEqual(sent['stop'], ['\n\nHuman:']);
    assert.equal(sent['user'], 'user-42');
    assert.equal(sent['temperature'], 0.2);
    assert.equal(sent['top_p'], 0.9);
    assert.deepEqual(sent['messages'], [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Capital of France?' },
    ]);
  });

  it('streams the exact event sequence; every event has the SDK shape; usage arrives in message_delta', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'Hello there, friend.' });
    const stream = fx.anthropic(key).messages.stream({
      model: 'svc-pro',
      max_tokens: 200,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    const events: Obj[] = [];
    for await (const event of stream) {
      assertAnthropicShape('RawMessageStreamEvent', event);
      events.push(event as unknown as Obj);
    }
    const final = await stream.finalMessage();
    // The SDK's accumulated message adds its own `parsed_output`; the rest is the wire Message.
    const { parsed_output: _parsed, ...wire } = final as unknown as Obj;
    assertAnthropicShape('Message', wire);
    const types = events.map((e) => e['type']);
    const deltas = types.filter((t) => t === 'content_block_delta').length;
    assert.ok(deltas >= 1);
    assert.deepEqual(types, [
      'message_start',
      'content_block_start',
      ...Array<string>(deltas).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const text = events
      .filter((e) => e['type'] === 'content_block_delta')
      .map((e) => (e['delta'] as { text: string }).text)
      .join('');
    assert.equal(text, 'Hello there, friend.');
    assert.deepEqual(final.content, [{ type: 'text', text: 'Hello there, friend.', citations: null }]);
    const delta = events.find((e) => e['type'] === 'message_delta') as { usage: Obj; delta: Obj };
    assert.equal(delta.delta['stop_reason'], 'end_turn');
    assert.equal(delta.usage['input_tokens'], DEFAULT_USAGE.prompt_tokens);
    assert.equal(delta.usage['output_tokens'], DEFAULT_USAGE.completion_tokens);
    const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);
    const reported = (await fx.reportedCosts()).filter((c) => c.url.includes('/v1/messages'));
    assert.equal(reported.at(-1)?.cost, cost, 'the stream reports its cost in its closing comment');
  });

  it('issue 30: an upstream without usage is served, charged from svc’s count, and usage says estimated (streamed and not)', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.anthropic(key);
    fx.upstream.enqueue({ kind: 'text', text: 'counted here', usage: 'omit' });
    const raw = await client.messages
      .create({ model: 'svc-pro', max_tokens: 100, messages: [{ role: 'user', content: 'count me' }] })
      .withResponse();
    // Anthropic's shape, plus the one extra field svc adds (the SDK carries it through untouched).
    const { estimated: _estimated, ...declared } = raw.data.usage as unknown as Obj;
    assertAnthropicShape('Message', { ...raw.data, usage: declared });
    assert.deepEqual(raw.data.content, [{ type: 'text', text: 'counted here', citations: null }]);
    const usage = raw.data.usage as unknown as { input_tokens: number; output_tokens: number; estimated?: boolean };
    assert.equal(usage.estimated, true);
    assert.ok(usage.input_tokens > 0 && usage.output_tokens > 0);
    const cost = BigInt(raw.response.headers.get('x-svc-cost') ?? '-1');
    assert.equal(cost, expectedCost(usage.input_tokens, usage.output_tokens));
    assert.equal((await fx.settled(accountId)).balance, 100_000n - cost);

    fx.upstream.enqueue({ kind: 'text', text: 'counted here', usage: 'omit' });
    const stream = client.messages.stream({
      model: 'svc-pro',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'count me' }],
    });
    let delta: Obj | undefined;
    for await (const event of stream) if (event.type === 'message_delta') delta = event.usage as unknown as Obj;
    const final = await stream.finalMessage();
    assert.deepEqual(final.content, [{ type: 'text', text: 'counted here', citations: null }]);
    assert.equal(delta?.['estimated'], true);
    assert.equal(delta?.['output_tokens'], usage.output_tokens);
    const after = await fx.settled(accountId);
    assert.equal(after.balance, 100_000n - 2n * cost);
  });

  it('sends real SSE event names, with a ping after message_start and the cost as a closing comment', async () => {
    const { key } = await fx.fund(100_000);
    // A usage the hold covers (the prompt "x" and 50 output tokens): SPEC §6 never charges above it.
    const usage = { prompt_tokens: 8, completion_tokens: 50 };
    fx.upstream.enqueue({ kind: 'text', text: 'ok', usage });
    const response = await fetch(`${fx.anthropicURL}/v1/messages?beta=true`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'svc-pro',
        max_tokens: 50,
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
      }),
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('request-id') ?? '', /^req_/);
    const text = await response.text();
    const names = [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
    assert.deepEqual(names.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
    assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
    for (const m of text.matchAll(/^data: (.*)$/gm)) {
      const event = JSON.parse(m[1] ?? '') as Obj;
      // The SDK drops pings before they reach its types.
      if (event['type'] === 'ping') assert.deepEqual(event, { type: 'ping' });
      else assertAnthropicShape('RawMessageStreamEvent', event);
    }
    const cost = expectedCost(usage.prompt_tokens, usage.completion_tokens);
    assert.match(text, new RegExp(`^: svc-cost ${cost} balance ${100_000n - cost}$`, 'm'));
  });

  it("the upstream's reasoning text becomes thinking blocks (thinking_delta when streamed), billed as output", async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.anthropic(key);
    fx.upstream.enqueue({ kind: 'text', text: '42.', reasoning: 'Six times seven is 42.' });
    const message = await client.messages.create({
      model: 'svc-pro',
      max_tokens: 100,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: '6*7?' }],
    });
    assertAnthropicShape('Message', message);
    assert.deepEqual(message.content, [
      { type: 'thinking', thinking: 'Six times seven is 42.', signature: '' },
      { type: 'text', text: '42.', citations: null },
    ]);

    fx.upstream.enqueue({ kind: 'text', text: '42.', reasoning: 'Six times seven is 42.' });
    const stream = client.messages.stream({
      model: 'svc-pro',
      max_tokens: 100,
      messages: [
        { role: 'user', content: '6*7?' },
        { role: 'assistant', content: message.content },
        { role: 'user', content: 'Again?' },
      ],
    });
    const events: Obj[] = [];
    for await (const event of stream) {
      assertAnthropicShape('RawMessageStreamEvent', event);
      events.push(event as unknown as Obj);
    }
    const deltas = events
      .filter((e) => e['type'] === 'content_block_delta')
      .map((e) => [e['index'], (e['delta'] as Obj)['type']]);
    assert.deepEqual([...new Set(deltas.map((d) => JSON.stringify(d)))], ['[0,"thinking_delta"]', '[1,"text_delta"]']);
    const final = await stream.finalMessage();
    assert.deepEqual(
      final.content.map((b) => (b.type === 'thinking' ? b.thinking : b.type === 'text' ? b.text : b.type)),
      ['Six times seven is 42.', '42.'],
    );
    // Earlier thinking is not sent back upstream (chat takes no reasoning as input).
    const sent = fx.upstream.requests[1]?.body as { messages: Obj[] };
    assert.deepEqual(sent.messages[1], { role: 'assistant', content: '42.' });
    const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.equal((await fx.settled(accountId)).balance, 100_000n - 2n * cost);
  });

  const weather = {
    name: 'get_weather',
    description: 'Weather of a city',
    input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
  };

  it('tools: tool_choice any → required; tool_use out; tool_result back as a tool message; billed once per turn', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.anthropic(key);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      calls: [{ id: 'call_abc', name: 'get_weather', arguments: '{"city":"Paris"}' }],
      usage: { prompt_tokens: 40, completion_tokens: 10 },
    });
    const first = await client.messages.create({
      model: 'svc-pro',
      max_tokens: 100,
      tools: [{ ...weather, cache_control: { type: 'ephemeral' } }],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    });
    assertAnthropicShape('Message', first);
    assert.equal(first.stop_reason, 'tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    assert.ok(use && use.type === 'tool_use');
    assert.deepEqual([use.id, use.name, use.input], ['call_abc', 'get_weather', { city: 'Paris' }]);
    const sent1 = fx.upstream.requests[0]?.body as Obj;
    assert.equal(sent1['tool_choice'], 'required');
    assert.equal(sent1['parallel_tool_calls'], false);
    assert.deepEqual(sent1['tools'], [
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather of a city', parameters: weather.input_schema },
      },
    ]);

    fx.upstream.enqueue({ kind: 'text', text: 'Sunny.', usage: { prompt_tokens: 60, completion_tokens: 5 } });
    const second = await client.messages.create({
      model: 'svc-pro',
      max_tokens: 100,
      tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: use.id, content: '18°C, sunny', cache_control: { type: 'ephemeral' } },
            { type: 'text', text: 'Thanks' },
          ],
        },
      ],
    });
    assert.deepEqual(second.content, [{ type: 'text', text: 'Sunny.', citations: null }]);
    const sent2 = fx.upstream.requests[1]?.body as Obj;
    assert.deepEqual(sent2['tool_choice'], { type: 'function', function: { name: 'get_weather' } });
    assert.deepEqual(sent2['messages'], [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_abc', content: '18°C, sunny' },
      { role: 'user', content: 'Thanks' },
    ]);
    const total = expectedCost(40, 10) + expectedCost(60, 5);
    assert.equal((await fx.settled(accountId)).balance, 100_000n - total);
  });

  it('streams a tool call as tool_use with input_json_delta', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'tool_calls',
      text: 'Let me look.',
      calls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Rome"}' }],
    });
    const stream = fx.anthropic(key).messages.stream({
      model: 'svc-pro',
      max_tokens: 100,
      tools: [weather],
      messages: [{ role: 'user', content: 'Weather in Rome?' }],
    });
    const events: Obj[] = [];
    for await (const event of stream) {
      assertAnthropicShape('RawMessageStreamEvent', event);
      events.push(event as unknown as Obj);
    }
    const final = await stream.finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    assert.deepEqual(
      final.content.map((b) => b.type),
      ['text', 'tool_use'],
    );
    const use = final.content[1];
    assert.ok(use?.type === 'tool_use');
    assert.deepEqual([use.id, use.name, use.input], ['call_1', 'get_weather', { city: 'Rome' }]);
    const kinds = events.filter((e) => e['type'] === 'content_block_delta').map((e) => (e['delta'] as Obj)['type']);
    assert.ok(kinds.includes('text_delta') && kinds.includes('input_json_delta'));
    const starts = events.filter((e) => e['type'] === 'content_block_start').map((e) => e['index']);
    const stops = events.filter((e) => e['type'] === 'content_block_stop').map((e) => e['index']);
    assert.deepEqual(
      [starts, stops],
      [
        [0, 1],
        [0, 1],
      ],
    );
  });

  it('images as content blocks (base64 and url) reach the upstream as image parts', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'A cat.' });
    await fx.anthropic(key).messages.create({
      model: 'svc-pro',
      max_tokens: 50,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
    });
    const sent = fx.upstream.requests[0]?.body as { messages: Obj[] };
    assert.deepEqual(sent.messages[0], {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
        { type: 'text', text: 'What is this?' },
      ],
    });
  });

  it('count_tokens: counts without calling the upstream or charging', async () => {
    const { key, accountId } = await fx.fund(1_000);
    const client = fx.anthropic(key);
    const small = await client.messages.countTokens({ model: 'svc-pro', messages: [{ role: 'user', content: 'Hi' }] });
    assertAnthropicShape('MessageTokensCount', small);
    const big = await client.messages.countTokens({
      model: 'svc-pro',
      system: 'You are a helpful assistant. '.repeat(20),
      tools: [weather],
      messages: [{ role: 'user', content: 'Hi there, how is the weather in Paris today?' }],
    });
    assert.ok(small.input_tokens > 0 && big.input_tokens > small.input_tokens + 50, JSON.stringify([small, big]));
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 1_000n);
    await assert.rejects(
      client.messages.countTokens({ model: 'nope', messages: [{ role: 'user', content: 'Hi' }] }),
      (e: unknown) => e instanceof Anthropic.NotFoundError && e.type === 'not_found_error',
    );
  });

  it('models: list and retrieve, in the SDK shape', async () => {
    const { key } = await fx.fund(1_000);
    const client = fx.anthropic(key);
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      assertAnthropicShape('ModelInfo', model);
      ids.push(model.id);
    }
    assert.ok(ids.includes('svc-pro') && ids.includes('svc-sandbox'), ids.join());
    const pro = await client.models.retrieve('svc-pro');
    assertAnthropicShape('ModelInfo', pro);
    assert.equal(pro.max_tokens, MAX_OUTPUT);
  });

  it("models: Claude Code's gateway discovery, paged with limit, after_id and before_id (SPEC §13)", async () => {
    const { key } = await fx.fund(1_000);
    const get = async (query: string): Promise<{ status: number; json: Obj }> => {
      // Claude Code's discovery: GET {ANTHROPIC_BASE_URL}/v1/models, the key in x-api-key.
      const response = await fetch(`${fx.anthropicURL}/v1/models${query}`, {
        headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
      });
      return { status: response.status, json: (await response.json()) as Obj };
    };
    const all = (await get('')).json;
    const ids = (all['data'] as Obj[]).map((m) => String(m['id']));
    assert.ok(ids.length >= 3, ids.join());
    for (const model of all['data'] as Obj[]) {
      assert.equal(model['type'], 'model');
      assert.equal(model['display_name'], model['id']);
      assert.match(String(model['created_at']), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    }
    assert.deepEqual([all['has_more'], all['first_id'], all['last_id']], [false, ids[0], ids.at(-1)]);

    const first = (await get('?limit=1')).json;
    assert.deepEqual(
      [(first['data'] as Obj[]).map((m) => m['id']), first['has_more'], first['first_id'], first['last_id']],
      [[ids[0]], true, ids[0], ids[0]],
    );
    const second = (await get(`?limit=1&after_id=${ids[0]}`)).json;
    assert.deepEqual(
      (second['data'] as Obj[]).map((m) => m['id']),
      [ids[1]],
    );
    const last = (await get(`?after_id=${ids.at(-2)}`)).json;
    assert.deepEqual([(last['data'] as Obj[]).map((m) => m['id']), last['has_more']], [[ids.at(-1)], false]);
    const before = (await get(`?limit=1&before_id=${ids[2]}`)).json;
    assert.deepEqual([(before['data'] as Obj[]).map((m) => m['id']), before['has_more']], [[ids[1]], true]);

    // The SDK's auto-pagination walks the same list a page at a time.
    const walked: string[] = [];
    for await (const model of fx.anthropic(key).models.list({ limit: 1 })) walked.push(model.id);
    assert.deepEqual(walked, ids);

    for (const bad of ['?limit=0', '?limit=1001', '?limit=x', '?after_id=no-such-model']) {
      const { status, json } = await get(bad);
      assert.equal(status, 400, bad);
      assert.equal((json['error'] as Obj)['type'], 'invalid_request_error');
    }
    const one = await fetch(`${fx.anthropicURL}/v1/models/${ids[0]}`, { headers: { 'x-api-key': key } });
    assert.equal(((await one.json()) as Obj)['id'], ids[0]);
  });

  it('the key may come as Authorization: Bearer (ANTHROPIC_AUTH_TOKEN)', async () => {
    const { key } = await fx.fund(100_000);
    const client = new Anthropic({ baseURL: fx.anthropicURL, apiKey: null, authToken: key, maxRetries: 0 });
    const message = await client.messages.create({
      model: 'svc-pro',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x' }],
    });
    assert.equal(message.type, 'message');
  });

  it('the wallet equals the sum of the reported costs', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.anthropic(key);
    const before = (await fx.reportedCosts()).length;
    await client.messages.create({ model: 'svc-pro', max_tokens: 10, messages: [{ role: 'user', content: 'a' }] });
    const s = client.messages.stream({ model: 'svc-pro', max_tokens: 10, messages: [{ role: 'user', content: 'b' }] });
    await s.finalMessage();
    await client.messages.countTokens({ model: 'svc-pro', messages: [{ role: 'user', content: 'c' }] });
    const after = await fx.settled(accountId);
    const reported = (await fx.reportedCosts()).slice(before).reduce((sum, c) => sum + c.cost, 0n);
    assert.ok(reported > 0n);
    assert.equal(after.balance, 100_000n - reported);
  });
});
