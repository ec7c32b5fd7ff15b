import assert from 'node:assert/strict';
import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import OpenAI from 'openai';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { assertSchema } from '../helpers/openapi';
import { expectedCost, MAX_OUTPUT, startOpenAiFixture, type OpenAiFixture } from './fixture';

describe('OpenAI API: chat completions', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('answers a non-streaming completion, passes parameters through and charges the exact price', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'Paris is the capital.',
      usage: { prompt_tokens: 123, completion_tokens: 457 },
    });
    const raw = await fx
      .client(key)
      .chat.completions.create({
        model: 'svc-pro',
        messages: [
          { role: 'developer', content: 'Be brief.' },
          { role: 'user', content: 'Capital of France?' },
        ],
        temperature: 0.2,
        top_p: 0.9,
        stop: ['\n\n'],
        seed: 7,
        user: 'u-1',
        max_completion_tokens: MAX_OUTPUT,
        response_format: { type: 'text' },
        logprobs: false,
      })
      .withResponse();
    const completion = raw.data;
    assertSchema('CreateChatCompletionResponse', completion);
    assert.equal(completion.model, 'svc-pro');
    assert.equal(completion.choices[0]?.message.content, 'Paris is the capital.');
    assert.equal(completion.choices[0]?.finish_reason, 'stop');
    assert.deepEqual([completion.usage?.prompt_tokens, completion.usage?.completion_tokens], [123, 457]);
    const cost = expectedCost(123, 457);
    assert.equal(cost, 293n);
    assert.equal((completion.usage as unknown as { cost: number }).cost, Number(cost));
    assert.match(raw.response.headers.get('x-request-id') ?? '', /^req_/);

    const sent = fx.upstream.requests[0]?.body;
    assert.ok(sent);
    assert.equal(sent['model'], 'fake-model-1');
    assert.equal(sent['max_completion_tokens'], MAX_OUTPUT, 'the limit goes as the client named it');
    assert.equal(sent['max_tokens'], undefined);
    assert.equal(sent['temperature'], 0.2);
    assert.equal(sent['top_p'], 0.9);
    assert.deepEqual(sent['stop'], ['\n\n']);
    assert.equal(sent['seed'], 7);
    assert.equal(sent['user'], 'u-1');
    assert.equal(sent['logprobs'], false);
    assert.deepEqual(sent['response_format'], { type: 'text' });
    assert.equal(sent['stream'], undefined);
    assert.deepEqual(
      (sent['messages'] as { role: string }[]).map((m) => m.role),
      ['system', 'user'],
    );
    assert.equal(fx.upstream.requests[0]?.headers['authorization'], 'Bearer test-upstream-secret');

    assert.equal(await fx.balance(accountId), 100_000n - cost);
    const ledger = await fx.svc.ledger(accountId);
    const charge = ledger.find((e) => e.kind === 'charge');
    assert.equal(charge?.requestId, raw.response.headers.get('x-request-id'));
  });

  it('streams chunks with include_usage: usage null on every chunk, then one usage chunk with no choices', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({
      kind: 'text',
      text: 'one two three four',
      usage: { prompt_tokens: 40, completion_tokens: 4 },
    });
    const stream = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'count' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      assertSchema('CreateChatCompletionStreamResponse', chunk);
      chunks.push(chunk);
    }
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(text, 'one two three four');
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
    const last = chunks[chunks.length - 1];
    assert.deepEqual(last?.choices, []);
    assert.equal(last?.usage?.prompt_tokens, 40);
    assert.equal(last?.usage?.completion_tokens, 4);
    for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
    assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason === 'stop').length, 1);
    const sent = fx.upstream.requests[0]?.body;
    assert.equal(sent?.['stream'], true);
    assert.deepEqual(sent?.['stream_options'], { include_usage: true });
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(40, 4));
  });

  it('streams without include_usage: no usage chunk for the client, usage still asked upstream and billed', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const stream = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }], stream: true });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      assertSchema('CreateChatCompletionStreamResponse', chunk);
      chunks.push(chunk);
    }
    assert.ok(chunks.every((c) => c.choices.length === 1 && c.usage === undefined));
    assert.deepEqual(fx.upstream.requests[0]?.body['stream_options'], { include_usage: true });
    assert.equal(
      (await fx.settled(accountId)).balance,
      100_000n - expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens),
    );
  });

  it('round-trips a streamed tool call: index on every delta, id/type/name first, finish_reason tool_calls', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Weather of a city',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
      {
        type: 'function',
        function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } },
      },
    ];
    fx.upstream.enqueue(
      {
        kind: 'tool_calls',
        calls: [
          { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Tehran"}' },
          { id: 'call_t1', name: 'get_time', arguments: '{"zone":"Asia/Tehran"}' },
        ],
        usage: { prompt_tokens: 80, completion_tokens: 30 },
      },
      { kind: 'text', text: 'It is sunny in Tehran at noon.', usage: { prompt_tokens: 120, completion_tokens: 9 } },
    );
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'Weather and time in Tehran?' },
    ];
    const stream = await client.chat.completions.create({
      model: 'svc-pro',
      messages,
      tools,
      tool_choice: 'auto',
      parallel_tool_calls: true,
      stream: true,
    });
    const calls: { id: string; name: string; args: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      assertSchema('CreateChatCompletionStreamResponse', chunk);
      const choice = chunk.choices[0];
      for (const delta of choice?.delta.tool_calls ?? []) {
        assert.equal(typeof delta.index, 'number');
        const existing = calls[delta.index];
        if (existing === undefined) {
          assert.ok(delta.id && delta.type === 'function' && delta.function?.name, 'the first delta names the call');
          calls[delta.index] = { id: delta.id, name: delta.function.name, args: delta.function.arguments ?? '' };
        } else {
          assert.equal(delta.id, undefined, 'later deltas carry arguments only');
          existing.args += delta.function?.arguments ?? '';
        }
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    assert.equal(finish, 'tool_calls');
    assert.deepEqual(calls, [
      { id: 'call_w1', name: 'get_weather', args: '{"city":"Tehran"}' },
      { id: 'call_t1', name: 'get_time', args: '{"zone":"Asia/Tehran"}' },
    ]);
    const sent = fx.upstream.requests[0]?.body;
    assert.equal(sent?.['tool_choice'], 'auto');
    assert.equal(sent?.['parallel_tool_calls'], true);
    assert.equal((sent?.['tools'] as unknown[]).length, 2);

    messages.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: 'function' as const,
          function: { name: c.name, arguments: c.args },
        })),
      },
      { role: 'tool', tool_call_id: 'call_w1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'call_t1', content: '12:00' },
    );
    const answer = await client.chat.completions.create({ model: 'svc-pro', messages, tools });
    assertSchema('CreateChatCompletionResponse', answer);
    assert.equal(answer.choices[0]?.message.content, 'It is sunny in Tehran at noon.');
    const second = fx.upstream.requests[1]?.body['messages'] as {
      role: string;
      tool_call_id?: string;
      tool_calls?: unknown[];
    }[];
    assert.deepEqual(
      second.map((m) => m.role),
      ['user', 'assistant', 'tool', 'tool'],
    );
    assert.equal(second[1]?.tool_calls?.length, 2);
    assert.equal(second[3]?.tool_call_id, 'call_t1');
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(80, 30) - expectedCost(120, 9));
  });

  it('returns non-streamed tool calls with finish_reason tool_calls', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'tool_calls', calls: [{ id: 'call_1', name: 'lookup', arguments: '{"q":"x"}' }] });
    const completion = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'look it up' }],
      tools: [
        {
          type: 'function',
          function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'lookup' } },
    });
    assertSchema('CreateChatCompletionResponse', completion);
    assert.equal(completion.choices[0]?.finish_reason, 'tool_calls');
    assert.equal(completion.choices[0]?.message.content, null);
    const call = completion.choices[0]?.message.tool_calls?.[0];
    assert.ok(call?.type === 'function');
    assert.deepEqual([call.id, call.function.name, call.function.arguments], ['call_1', 'lookup', '{"q":"x"}']);
    assert.deepEqual(fx.upstream.requests[0]?.body['tool_choice'], { type: 'function', function: { name: 'lookup' } });
  });

  it('issue 30: an upstream answer without usage is served and charged from svc’s own count, marked usage.estimated (streamed and not)', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    // svc's own count, computed here with the same tokenizer: 3 per request, 4 per message, the text.
    const prompt = 3 + 4 + countTokens('xxxx');
    const completionTokens = countTokens('abcdefgh');
    const cost = expectedCost(prompt, completionTokens);
    const estimatedBefore = await estimatedCount();

    fx.upstream.enqueue({ kind: 'text', text: 'abcdefgh', usage: 'omit' });
    const { data: done, response } = await client.chat.completions
      .create({ model: 'svc-pro', messages: [{ role: 'user', content: 'xxxx' }] })
      .withResponse();
    assert.equal(done.choices[0]?.message.content, 'abcdefgh');
    const usage = done.usage as unknown as { prompt_tokens: number; completion_tokens: number; cost: number; estimated?: boolean };
    assert.deepEqual(
      [usage.prompt_tokens, usage.completion_tokens, usage.cost, usage.estimated],
      [prompt, completionTokens, Number(cost), true],
    );
    assert.equal(response.headers.get('x-svc-cost'), String(cost));
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n - cost, held: 0n });

    fx.upstream.enqueue({ kind: 'text', text: 'abcdefgh', usage: 'omit' });
    const stream = await client.chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'xxxx' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let streamed: { cost?: number; estimated?: boolean; completion_tokens?: number } | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) streamed = chunk.usage as unknown as typeof streamed;
    }
    assert.equal(text, 'abcdefgh');
    assert.deepEqual([streamed?.completion_tokens, streamed?.cost, streamed?.estimated], [completionTokens, Number(cost), true]);
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n - 2n * cost, held: 0n });

    // Responses over the same upstream says so too.
    fx.upstream.enqueue({ kind: 'text', text: 'abcdefgh', usage: 'omit' });
    const r = await client.responses.create({ model: 'svc-pro', input: 'xxxx', store: false });
    assert.equal(r.output_text, 'abcdefgh');
    const ru = r.usage as unknown as { output_tokens: number; cost: number; estimated?: boolean };
    assert.deepEqual([ru.output_tokens, ru.estimated], [completionTokens, true]);
    const after = await fx.settled(accountId);
    assert.equal(after.balance, 100_000n - 2n * cost - BigInt(ru.cost), 'the wallet charged exactly the cost shown');

    // The usage records are marked by nothing but their costs; the counter per upstream counts them.
    assert.equal((await estimatedCount()) - estimatedBefore, 3);
    // A usage that was reported is not an estimate.
    fx.upstream.enqueue({ kind: 'text', text: 'abcdefgh' });
    const reported = await client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'xxxx' }] });
    assert.equal((reported.usage as unknown as { estimated?: boolean }).estimated, undefined);
    assert.equal((await estimatedCount()) - estimatedBefore, 3);
  });

  /** svc_usage_estimated_total for the test upstream (provider openai). */
  async function estimatedCount(): Promise<number> {
    const text = await fx.svc.core.metrics.registry.render();
    let sum = 0;
    for (const line of text.split('\n'))
      if (line.startsWith('svc_usage_estimated_total{') && line.includes('provider="openai"'))
        sum += Number(line.split(' ').at(-1));
    return sum;
  }

  it('serves the offline sandbox model, labelled as such', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const completion = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-sandbox', messages: [{ role: 'user', content: 'hello sandbox' }] });
    assertSchema('CreateChatCompletionResponse', completion);
    assert.match(completion.choices[0]?.message.content ?? '', /^\[sandbox\].*hello sandbox/);
    assert.equal(completion.system_fingerprint, 'fp_svc_sandbox');
    assert.equal(fx.upstream.requests.length, 0);
    const usage = completion.usage;
    assert.equal(
      await fx.balance(accountId),
      100_000n - expectedCost(usage?.prompt_tokens ?? 0, usage?.completion_tokens ?? 0),
    );
  });

  it('honours Idempotency-Key: a repeat returns the first result, reports cost 0 and the balance now; another body is a 409 sent once', async () => {
    const { key, accountId } = await fx.fund(100_000);
    // Every attempt the client makes, counted on its own side of the wire.
    let attempts = 0;
    const client = fx.client(key, {
      maxRetries: 2,
      fetch: (url: string | URL | Request, init?: RequestInit) => {
        attempts += 1;
        return fetch(url, init);
      },
    });
    const body = { model: 'svc-pro', messages: [{ role: 'user' as const, content: 'once only' }] };
    const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    const first = await client.chat.completions
      .create(body, { headers: { 'Idempotency-Key': 'idem-1' } })
      .withResponse();
    assert.equal((first.data.usage as unknown as { cost: number }).cost, Number(cost));
    assert.equal(first.response.headers.get('x-svc-cost'), String(cost));
    assert.equal(first.response.headers.get('x-svc-balance'), String(100_000n - cost));
    // The wallet moves between the two: the replay must report the balance now, not the first one's.
    await client.chat.completions.create({ ...body, messages: [{ role: 'user', content: 'another call' }] });
    const now = await fx.balance(accountId);
    assert.equal(now, 100_000n - 2n * cost);

    const again = await client.chat.completions
      .create(body, { headers: { 'Idempotency-Key': 'idem-1' } })
      .withResponse();
    assert.deepEqual(again.data.choices, first.data.choices);
    assert.equal(again.data.id, first.data.id);
    assert.equal((again.data.usage as unknown as { cost: number }).cost, 0, 'the replay charged nothing');
    assert.equal(again.data.usage?.completion_tokens, DEFAULT_USAGE.completion_tokens);
    assert.equal(again.response.headers.get('x-svc-cost'), '0');
    assert.equal(again.response.headers.get('x-svc-balance'), String(now));
    assert.equal(fx.upstream.requests.length, 2);
    assert.equal(await fx.balance(accountId), now);

    attempts = 0;
    const conflict = await client.chat.completions
      .create(
        { ...body, messages: [{ role: 'user', content: 'something else' }] },
        { headers: { 'Idempotency-Key': 'idem-1' } },
      )
      .catch((e: unknown) => e);
    assert.ok(conflict instanceof OpenAI.ConflictError, String(conflict));
    assert.equal(conflict.status, 409);
    assert.equal(conflict.code, 'idempotency_key_reused');
    assert.equal(conflict.headers?.get('x-should-retry'), 'false');
    assert.equal(attempts, 1, 'the client sent the refused request once');
    assert.equal(fx.upstream.requests.length, 2);
    assert.equal(await fx.balance(accountId), now);
    assert.equal((await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge').length, 2);
  });

  it('replays an idempotent stream without calling the upstream or charging again, reporting cost 0', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    const read = async (): Promise<{ text: string; cost: unknown }> => {
      const stream = await client.chat.completions.create(
        {
          model: 'svc-pro',
          messages: [{ role: 'user', content: 'stream once' }],
          stream: true,
          stream_options: { include_usage: true },
        },
        { headers: { 'Idempotency-Key': 'idem-stream' } },
      );
      let text = '';
      let cost: unknown;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        if (chunk.usage) cost = (chunk.usage as unknown as { cost: number }).cost;
      }
      return { text, cost };
    };
    const price = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    const first = await read();
    assert.equal(first.cost, Number(price));
    await fx.settled(accountId);
    assert.deepEqual(await read(), { text: first.text, cost: 0 });
    assert.equal(fx.upstream.requests.length, 1);
    assert.equal(await fx.balance(accountId), 100_000n - price);
  });
});

describe('OpenAI API: concurrent requests against one wallet', function () {
  let fx: OpenAiFixture;
  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });

  it('admits only the requests whose holds the balance covers, and never goes below zero', async () => {
    const start = 2_000n;
    const { key, accountId } = await fx.fund(start);
    const client = fx.client(key);
    const release = fx.upstream.pause();
    const calls = Array.from({ length: 12 }, () =>
      client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'race' }] }).then(
        () => 'ok' as const,
        (e: unknown) => e,
      ),
    );
    // Wait until every request was either admitted (its hold placed, waiting on the upstream) or refused.
    let refused: unknown[] = [];
    for (let i = 0; i < 500; i += 1) {
      const settled = await Promise.all(calls.map((c) => Promise.race([c, Promise.resolve('pending' as const)])));
      refused = settled.filter((s) => s !== 'pending' && s !== 'ok');
      if (refused.length + fx.upstream.requests.length === calls.length) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const admitted = fx.upstream.requests.length;
    const during = await fx.svc.wallet(accountId);
    assert.ok(admitted >= 1 && admitted < calls.length, `${admitted} admitted`);
    assert.ok(during.held <= during.balance, `held ${during.held} exceeds balance ${during.balance}`);
    for (const e of refused) assert.equal((e as { code?: string }).code, 'insufficient_quota');
    release();
    const results = await Promise.all(calls);
    assert.equal(results.filter((r) => r === 'ok').length, admitted);
    const after = await fx.svc.wallet(accountId);
    const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.deepEqual([after.balance, after.held], [start - BigInt(admitted) * cost, 0n]);
    const ledger = await fx.svc.ledger(accountId);
    assert.equal(ledger.filter((e) => e.kind === 'charge').length, admitted);
  });
});
