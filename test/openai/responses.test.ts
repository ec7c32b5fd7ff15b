import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { assertEvent, assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

const weatherTool: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

describe('OpenAI API: Responses', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('creates a response from a string input with instructions, and bills it', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Tehran is the capital of Iran.',
      usage: { prompt_tokens: 31, completion_tokens: 8 },
    });
    const raw = await fx
      .client(key)
      .responses.create({
        model: 'svc-pro',
        input: 'Capital of Iran?',
        instructions: 'Answer in one sentence.',
        temperature: 0.5,
        max_output_tokens: 200,
        metadata: { ticket: 't-1' },
      })
      .withResponse();
    const response = raw.data;
    assertSchema('Response', response);
    assert.equal(response.status, 'completed');
    assert.equal(response.output_text, 'Tehran is the capital of Iran.');
    assert.equal(response.instructions, 'Answer in one sentence.');
    assert.equal(response.model, 'svc-pro');
    assert.deepEqual(response.metadata, { ticket: 't-1' });
    assert.deepEqual([response.usage?.input_tokens, response.usage?.output_tokens], [31, 8]);
    const sent = fx.upstream.requests[0]?.body;
    assert.deepEqual(sent?.['messages'], [
      { role: 'system', content: 'Answer in one sentence.' },
      { role: 'user', content: 'Capital of Iran?' },
    ]);
    assert.equal(sent?.['max_tokens'], 200);
    assert.equal(sent?.['temperature'], 0.5);
    assert.equal(await fx.balance(accountId), 100_000n - expectedCost(31, 8));
    const ledger = await fx.svc.ledger(accountId);
    assert.equal(ledger.find((e) => e.kind === 'charge')?.requestId, raw.response.headers.get('x-request-id'));

    const stored = await fx.client(key).responses.retrieve(response.id);
    assertSchema('Response', stored);
    assert.equal(stored.id, response.id);
    assert.equal(stored.output_text, response.output_text);
  });

  it('translates item arrays: developer/system messages, content parts, function_call and function_call_output', async () => {
    const { key } = await fx.fund(100_000);
    await fx.client(key).responses.create({
      model: 'svc-pro',
      input: [
        { role: 'developer', content: 'Use tools when needed.' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Shiraz?' }] },
        { type: 'function_call', call_id: 'call_9', name: 'get_weather', arguments: '{"city":"Shiraz"}' },
        { type: 'function_call_output', call_id: 'call_9', output: '{"temp":31}' },
        { type: 'reasoning', id: 'rs_1', summary: [] } as unknown as OpenAI.Responses.ResponseInputItem,
      ],
      tools: [weatherTool],
    });
    const sent = fx.upstream.requests[0]?.body;
    // `developer` goes upstream as `system`, which every OpenAI-compatible server accepts.
    assert.deepEqual(sent?.['messages'], [
      { role: 'system', content: 'Use tools when needed.' },
      { role: 'user', content: 'Weather in Shiraz?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_9', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Shiraz"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_9', content: '{"temp":31}' },
    ]);
    assert.deepEqual(sent?.['tools'], [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Current weather of a city',
          parameters: weatherTool.parameters,
          strict: true,
        },
      },
    ]);
  });

  it('refuses hosted tool types svc does not run (local_shell, file_search) with a 400 naming the tool', async () => {
    const { key } = await fx.fund(100_000);
    await assert.rejects(
      fx.client(key).responses.create({
        model: 'svc-pro',
        input: 'hello',
        tools: [weatherTool, { type: 'local_shell' }, { type: 'file_search', vector_store_ids: ['vs_1'] }],
        tool_choice: 'auto',
      }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === 'tools[1].type',
    );
    assert.equal(fx.upstream.requests.length, 0);
  });

  it('round-trips a function call with previous_response_id, statelessly for the client', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_abc', name: 'get_weather', arguments: '{"city":"Tabriz"}' }],
        usage: { prompt_tokens: 50, completion_tokens: 12 },
      },
      { kind: 'text', text: 'It is 12 degrees in Tabriz.', usage: { prompt_tokens: 90, completion_tokens: 10 } },
    );
    const first = await client.responses.create({
      model: 'svc-pro',
      input: 'Weather in Tabriz?',
      tools: [weatherTool],
      instructions: 'Be helpful.',
    });
    assertSchema('Response', first);
    const call = first.output.find((i): i is OpenAI.Responses.ResponseFunctionToolCall => i.type === 'function_call');
    assert.ok(call);
    assert.deepEqual([call.call_id, call.name, call.arguments], ['call_abc', 'get_weather', '{"city":"Tabriz"}']);

    const second = await client.responses.create({
      model: 'svc-pro',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"celsius":12}' }],
      tools: [weatherTool],
    });
    assertSchema('Response', second);
    assert.equal(second.output_text, 'It is 12 degrees in Tabriz.');
    assert.equal(second.previous_response_id, first.id);
    const messages = fx.upstream.requests[1]?.body['messages'] as Record<string, unknown>[];
    assert.deepEqual(
      messages,
      [
        { role: 'user', content: 'Weather in Tabriz?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Tabriz"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_abc', content: '{"celsius":12}' },
      ],
      'the stored conversation comes first; instructions are not carried over',
    );
    assert.equal(await fx.balance(accountId), 100_000n - expectedCost(50, 12) - expectedCost(90, 10));
  });

  it("resolves item_reference items from the caller's stored responses", async () => {
    const { key } = await fx.fund(100_000);
    const other = await fx.fund(100_000);
    const client = fx.client(key);
    fx.upstream.enqueue({ kind: 'text', text: 'I am a stored answer.' });
    const first = await client.responses.create({ model: 'svc-pro', input: 'Say something' });
    const itemId = first.output[0]?.id;
    assert.ok(itemId);
    await client.responses.create({
      model: 'svc-pro',
      input: [
        { type: 'message', role: 'user', content: 'Say something' },
        { type: 'item_reference', id: itemId },
        { type: 'item_reference', id: 'rs_from_another_provider' },
        { type: 'message', role: 'user', content: 'And then?' },
      ],
    });
    assert.deepEqual(fx.upstream.requests[1]?.body['messages'], [
      { role: 'user', content: 'Say something' },
      { role: 'assistant', content: 'I am a stored answer.' },
      { role: 'user', content: 'And then?' },
    ]);
    const foreign = await fx
      .client(other.key)
      .responses.create({ model: 'svc-pro', input: [{ type: 'item_reference', id: itemId }] })
      .catch((e: unknown) => e);
    assert.ok(foreign instanceof OpenAI.NotFoundError);
    assert.equal(foreign.param, 'input[0].id');
    assert.equal(await fx.balance(other.accountId), 100_000n);
  });

  it('keeps stored responses per account: another account cannot read or continue them', async () => {
    const a = await fx.fund(100_000);
    const b = await fx.fund(100_000);
    const mine = await fx.client(a.key).responses.create({ model: 'svc-pro', input: 'secret' });
    const notFound = { status: 404, code: 'not_found' };
    const read = await fx
      .client(b.key)
      .responses.retrieve(mine.id)
      .catch((e: unknown) => e);
    assert.ok(read instanceof OpenAI.NotFoundError);
    assert.deepEqual({ status: read.status, code: read.code }, notFound);
    const cont = await fx
      .client(b.key)
      .responses.create({ model: 'svc-pro', input: 'more', previous_response_id: mine.id })
      .catch((e: unknown) => e);
    assert.ok(cont instanceof OpenAI.NotFoundError);
    assert.equal(cont.param, 'previous_response_id');
    assert.equal(await fx.balance(b.accountId), 100_000n);
  });

  it('store: false keeps nothing', async () => {
    const { key } = await fx.fund(100_000);
    const response = await fx.client(key).responses.create({ model: 'svc-pro', input: 'ephemeral', store: false });
    assert.equal((response as unknown as { store: boolean }).store, false);
    const read = await fx
      .client(key)
      .responses.retrieve(response.id)
      .catch((e: unknown) => e);
    assert.ok(read instanceof OpenAI.NotFoundError);
  });

  it('reports a length stop as status incomplete', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'cut sho', finishReason: 'length' });
    const response = await fx
      .client(key)
      .responses.create({ model: 'svc-pro', input: 'long story', max_output_tokens: 16 });
    assertSchema('Response', response);
    assert.equal(response.status, 'incomplete');
    assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
  });

  it('streams the full event sequence for text, with increasing sequence numbers', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Salam donya, chetori?',
      usage: { prompt_tokens: 20, completion_tokens: 6 },
    });
    const stream = await fx.client(key).responses.create({ model: 'svc-pro', input: 'Greet me', stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) {
      assertEvent(event);
      events.push(event);
    }
    const types = events.map((e) => e.type);
    assert.deepEqual(types.slice(0, 4), [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    assert.deepEqual(types.slice(-4), [
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    assert.ok(types.filter((t) => t === 'response.output_text.delta').length >= 3);
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    assert.equal(deltas, 'Salam donya, chetori?');
    const completed = events[events.length - 1];
    assert.ok(completed?.type === 'response.completed');
    assert.equal(
      completed.response.output_text ??
        completed.response.output
          .flatMap((o) => (o.type === 'message' ? o.content : []))
          .map((c) => (c.type === 'output_text' ? c.text : ''))
          .join(''),
      'Salam donya, chetori?',
    );
    assert.deepEqual([completed.response.usage?.input_tokens, completed.response.usage?.output_tokens], [20, 6]);
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(20, 6));
    const stored = await fx.client(key).responses.retrieve(completed.response.id);
    assert.equal(stored.status, 'completed');
  });

  it('responses.stream() round-trips a streamed function call with previous_response_id', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [{ id: 'call_s1', name: 'get_weather', arguments: '{"city":"Yazd"}' }],
        usage: { prompt_tokens: 44, completion_tokens: 11 },
      },
      { kind: 'text', text: 'Yazd is hot: 38 degrees.', usage: { prompt_tokens: 70, completion_tokens: 9 } },
    );
    const runner = client.responses.stream({ model: 'svc-pro', input: 'Weather in Yazd?', tools: [weatherTool] });
    const types: string[] = [];
    let argDeltas = '';
    for await (const event of runner) {
      assertEvent(event);
      types.push(event.type);
      if (event.type === 'response.function_call_arguments.delta') argDeltas += event.delta;
    }
    const first = await runner.finalResponse();
    assertSchema('Response', first);
    assert.equal(argDeltas, '{"city":"Yazd"}');
    assert.deepEqual(
      types.filter((t) => t.startsWith('response.function_call') || t.startsWith('response.output_item')),
      [
        'response.output_item.added',
        ...Array<string>(types.filter((t) => t === 'response.function_call_arguments.delta').length).fill(
          'response.function_call_arguments.delta',
        ),
        'response.function_call_arguments.done',
        'response.output_item.done',
      ],
    );
    const call = first.output.find((i) => i.type === 'function_call');
    assert.ok(call?.type === 'function_call');
    assert.deepEqual(
      [call.call_id, call?.name, call?.arguments, call?.status],
      ['call_s1', 'get_weather', '{"city":"Yazd"}', 'completed'],
    );

    const follow = client.responses.stream({
      model: 'svc-pro',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: 'call_s1', output: '38C' }],
      tools: [weatherTool],
    });
    for await (const event of follow) assertEvent(event);
    const second = await follow.finalResponse();
    assert.equal(second.output_text, 'Yazd is hot: 38 degrees.');
    const messages = fx.upstream.requests[1]?.body['messages'] as { role: string }[];
    assert.deepEqual(
      messages.map((m) => m.role),
      ['user', 'assistant', 'tool'],
    );
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(44, 11) - expectedCost(70, 9));
  });

  it('ends a stream whose upstream breaks mid-way with response.failed, and charges nothing', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'truncate', afterPieces: 2 });
    const stream = await fx.client(key).responses.create({ model: 'svc-pro', input: 'go', stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) {
      assertEvent(event);
      events.push(event);
    }
    const last = events[events.length - 1];
    assert.equal(last?.type, 'response.failed');
    assert.ok(last?.type === 'response.failed');
    assert.equal(last.response.status, 'failed');
    assert.equal(last.response.error?.code, 'server_error');
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    assert.equal((await fx.settled(accountId)).balance, 100_000n);
  });

  it('streams a length stop as response.incomplete', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'a b c', finishReason: 'length' });
    const stream = await fx.client(key).responses.create({ model: 'svc-pro', input: 'go', stream: true });
    let last: OpenAI.Responses.ResponseStreamEvent | undefined;
    for await (const event of stream) {
      assertEvent(event);
      last = event;
    }
    assert.equal(last?.type, 'response.incomplete');
  });

  it('honours Idempotency-Key on responses: a replay reports cost 0 and charges nothing', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    const a = await client.responses.create(
      { model: 'svc-pro', input: 'once' },
      { headers: { 'Idempotency-Key': 'r-1' } },
    );
    const b = await client.responses.create(
      { model: 'svc-pro', input: 'once' },
      { headers: { 'Idempotency-Key': 'r-1' } },
    );
    assert.equal(b.id, a.id);
    assert.equal((a.usage as unknown as { cost: number }).cost, Number(expectedCost(100, 50)));
    assert.equal((b.usage as unknown as { cost: number }).cost, 0, 'the replay charged nothing');
    assert.equal(fx.upstream.requests.length, 1);
    const streamedCost = async (): Promise<unknown> => {
      const stream = await client.responses.create(
        { model: 'svc-pro', input: 'once, streamed', stream: true },
        { headers: { 'Idempotency-Key': 'r-2' } },
      );
      let cost: unknown;
      for await (const event of stream)
        if (event.type === 'response.completed') cost = (event.response.usage as unknown as { cost: number }).cost;
      return cost;
    };
    assert.equal(await streamedCost(), Number(expectedCost(100, 50)));
    await fx.settled(accountId);
    assert.equal(await streamedCost(), 0);
    assert.equal(fx.upstream.requests.length, 2);
    assert.equal(
      await fx.balance(accountId),
      100_000n - 2n * expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens),
    );
  });

  it('lists and retrieves models', async () => {
    const { key } = await fx.fund(1);
    const client = fx.client(key);
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id).sort();
    assert.deepEqual(ids, ['svc-pro', 'svc-quick-timeout', 'svc-sandbox']);
    const raw = await fetch(`${fx.baseURL}/models`, { headers: { authorization: `Bearer ${key}` } });
    assertSchema('ListModelsResponse', await raw.json());
    const model = await client.models.retrieve('svc-pro');
    assertSchema('Model', model);
    assert.equal(model.id, 'svc-pro');
  });
});
