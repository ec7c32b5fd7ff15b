import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { expectedCost, startRoutingFixture, type RoutingFixture } from './fixture';

const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
const name = (fx: RoutingFixture, which: 'a' | 'b' | 'c'): string =>
  `routed#${{ a: 1, b: 2, c: 3 }[which]}:openai@${new URL(fx[which].baseUrl).host}`;

/**
 * Ways an upstream fails before its first byte that let a call move on (SPEC §4), each the same
 * for a stream and a plain call (the scripted request may be either).
 */
const FAILURES: FakeBehavior[] = [
  { kind: 'http_error', status: 500 },
  { kind: 'http_error', status: 503 },
  { kind: 'http_error', status: 429, headers: { 'retry-after': '1' } },
  { kind: 'garbage' },
];

describe('upstream routing: fallback, breakers, one charge (issue 15)', function () {
  this.timeout(120_000);
  let fx: RoutingFixture;

  beforeEach(async () => {
    fx = await startRoutingFixture({ breaker: '{ failures: 5, open_s: 30 }' });
  });
  afterEach(async () => {
    await fx.close();
  });

  it('1,000 calls with the first upstream failing a third of the time: all answered, each charged once at the model price', async () => {
    const CALLS = 1000;
    const { key, accountId } = await fx.fund(1_000_000);
    const client = fx.client(key);
    // a fails every third request (one of FAILURES in turn) before its first byte; b and c answer.
    const script: FakeBehavior[] = [];
    let scriptedFailures = 0;
    for (let i = 0; i < CALLS; i += 1) {
      if (i % 3 === 2) {
        script.push(FAILURES[scriptedFailures % FAILURES.length] as FakeBehavior);
        scriptedFailures += 1;
      } else script.push({ kind: 'text', text: 'from a' });
    }
    fx.a.enqueue(...script);
    const answers: string[] = [];
    // Eight at a time, half of them streamed.
    for (let start = 0; start < CALLS; start += 8) {
      const batch = Array.from({ length: Math.min(8, CALLS - start) }, async (_, j) => {
        if ((start + j) % 2 === 0) {
          const c = await client.chat.completions.create({ model: 'routed', messages });
          assert.equal(c.model, 'routed');
          assert.equal(c.usage?.prompt_tokens, 100);
          return c.choices[0]?.message.content ?? '';
        }
        const stream = await client.chat.completions.create({
          model: 'routed',
          messages,
          stream: true,
          stream_options: { include_usage: true },
        });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
        return text;
      });
      answers.push(...(await Promise.all(batch)));
    }
    assert.equal(answers.length, CALLS);
    assert.ok(
      answers.every((t) => t === 'from a' || t.startsWith('Hello from upstream')),
      'every call answered',
    );
    const fromA = answers.filter((t) => t === 'from a').length;
    const failed = fx.a.requests.length - fromA;
    // A failure never reaches five in a row, so the breaker never opened and a saw every call.
    assert.equal(fx.a.requests.length, CALLS);
    assert.equal(failed, scriptedFailures);
    assert.equal(fx.b.requests.length + fx.c.requests.length, failed, 'each failure moved on once');
    assert.ok(fx.b.requests.length > 0 && fx.c.requests.length > 0, 'spread over b and c');
    // Each upstream got its own model name and key.
    assert.equal(fx.b.requests[0]?.body['model'], 'model-b');
    assert.equal(fx.c.requests[0]?.headers['authorization'], 'Bearer key-c-0123456789');

    const { balance, held } = await fx.settled(accountId);
    assert.equal(held, 0n);
    const charges = await fx.svc.store.db
      .selectFrom('ledger_entries')
      .select(['amount', 'request_id'])
      .where('account_id', '=', accountId)
      .where('kind', '=', 'charge')
      .execute();
    assert.equal(charges.length, CALLS, 'exactly one charge per call');
    assert.equal(new Set(charges.map((e) => e.request_id)).size, CALLS);
    assert.ok(charges.every((e) => -BigInt(e.amount) === expectedCost(100, 50)));
    assert.equal(balance, 1_000_000n - BigInt(CALLS) * expectedCost(100, 50));
    const rows = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['cost', 'status'])
      .where('account_id', '=', accountId)
      .execute();
    assert.equal(rows.length, CALLS);
    assert.equal(
      rows.reduce((sum, r) => sum + BigInt(r.cost), 0n),
      1_000_000n - balance,
      'the wallet equals the usage',
    );
    assert.equal(await fx.metric('svc_upstream_attempts_total', { upstream: name(fx, 'a'), outcome: 'ok' }), fromA);
    assert.equal(await fx.metric('svc_upstream_fallbacks_total', { model: 'routed', upstream: name(fx, 'a') }), failed);
    assert.equal(await fx.metric('svc_upstream_breaker_open', { upstream: name(fx, 'a') }), 0);
  });

  it('the breaker opens after `failures` in a row, skips the upstream, probes it after open_s and closes', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    const call = async (): Promise<void> => {
      const c = await client.chat.completions.create({ model: 'routed', messages });
      assert.equal(c.choices[0]?.finish_reason, 'stop');
    };
    fx.a.enqueue(...Array.from({ length: 5 }, (): FakeBehavior => ({ kind: 'http_error', status: 502 })));
    for (let i = 0; i < 5; i += 1) await call();
    assert.equal(fx.a.requests.length, 5);
    assert.equal(await fx.metric('svc_upstream_breaker_open', { upstream: name(fx, 'a') }), 1);
    // Open: a is skipped, b/c answer at once.
    for (let i = 0; i < 3; i += 1) await call();
    assert.equal(fx.a.requests.length, 5);
    assert.equal(
      await fx.metric('svc_upstream_attempts_total', { upstream: name(fx, 'a'), outcome: 'skipped_open' }),
      3,
    );
    // After open_s one call probes a; it fails, so a is open again.
    fx.advance(30_001);
    fx.a.enqueue({ kind: 'hang' });
    await call();
    assert.equal(fx.a.requests.length, 6);
    await call();
    assert.equal(fx.a.requests.length, 6, 'a failed probe opens it again');
    // The next probe succeeds and closes it: a serves again.
    fx.advance(30_001);
    await call();
    await call();
    assert.equal(fx.a.requests.length, 8);
    assert.equal(await fx.metric('svc_upstream_breaker_open', { upstream: name(fx, 'a') }), 0);
    const { balance } = await fx.settled(accountId);
    assert.equal(balance, 100_000n - 12n * expectedCost(100, 50), 'twelve calls, twelve charges');
  });

  it('a stream that fails after its first chunk is not retried and costs nothing (an error frame)', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.a.enqueue({ kind: 'cut', afterPieces: 3 });
    const stream = await fx.client(key).chat.completions.create({ model: 'routed', messages, stream: true });
    let text = '';
    await assert.rejects(async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    });
    assert.equal(text, 'one two three ');
    assert.equal(fx.b.requests.length + fx.c.requests.length, 0, 'never retried');
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
    const rows = await fx.svc.store.db
      .selectFrom('usage_records')
      .selectAll()
      .where('account_id', '=', accountId)
      .execute();
    assert.deepEqual(
      rows.map((r) => [r.status, BigInt(r.cost)]),
      [['error', 0n]],
    );
  });

  it("a 4xx other than 429 is the client's own error: returned as is, never retried", async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.a.enqueue({
      kind: 'http_error',
      status: 400,
      body: JSON.stringify({
        error: { message: 'bad temperature', type: 'invalid_request_error', param: 'temperature', code: null },
      }),
    });
    await assert.rejects(
      fx.client(key).chat.completions.create({ model: 'routed', messages }),
      (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === 'temperature',
    );
    assert.equal(fx.b.requests.length + fx.c.requests.length, 0);
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n, held: 0n });
  });

  it('garbage (invalid JSON, a stream that never sends) moves on; no usage is served as an estimate; when every upstream fails: 502, nothing charged', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    fx.a.enqueue({ kind: 'garbage' }, { kind: 'hang' });
    for (let i = 0; i < 2; i += 1) {
      const c = await client.chat.completions.create({ model: 'routed', messages });
      assert.match(c.choices[0]?.message.content ?? '', /^Hello from upstream/);
    }
    // An error frame in place of the first chunk: nothing reached the client, so the call moves on.
    fx.a.enqueue({
      kind: 'error_frame',
      afterPieces: -1,
      error: { message: 'overloaded', type: 'server_error', code: null },
    });
    let first = '';
    const moved = await client.chat.completions.create({ model: 'routed', messages, stream: true });
    for await (const chunk of moved) first += chunk.choices[0]?.delta.content ?? '';
    assert.match(first, /^Hello from upstream/);
    // Issue 30: a stream without usage is served whole, charged from svc's own count (usage.estimated).
    fx.a.enqueue({ kind: 'text', usage: 'omit' });
    const stream = await client.chat.completions.create({
      model: 'routed',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let estimate: { cost: number; estimated?: boolean } | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) estimate = chunk.usage as unknown as typeof estimate;
    }
    assert.match(text, /^Hello from upstream/);
    assert.equal(estimate?.estimated, true);
    const paid = 3n * expectedCost(100, 50) + BigInt(estimate?.cost ?? 0);
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n - paid, held: 0n });

    // Everything down: the last failure, a clean 502 with nothing charged.
    fx.a.enqueue({ kind: 'garbage' });
    fx.b.enqueue({ kind: 'garbage' });
    fx.c.enqueue({ kind: 'garbage' });
    await assert.rejects(
      client.chat.completions.create({ model: 'routed', messages }),
      (error: unknown) =>
        error instanceof OpenAI.APIError && error.status === 502 && !/127\.0\.0\.1|model-/.test(error.message),
    );
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n - paid, held: 0n });
  });

  it('an alias reaches the model (answers carry its id); GET /models lists both with their limits', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    const c = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
    assert.equal(c.model, 'routed');
    const ids = new Map<string, Record<string, unknown>>();
    for await (const m of client.models.list()) ids.set(m.id, m as unknown as Record<string, unknown>);
    assert.deepEqual([...ids.keys()], ['routed', 'gpt-4o-mini']);
    assert.equal(ids.get('gpt-4o-mini')?.['context_window'], 128000);
    assert.equal(ids.get('routed')?.['max_output_tokens'], 1000);
    assert.equal((await client.models.retrieve('gpt-4o-mini')).id, 'gpt-4o-mini');
  });

  it('prices cached tokens at cached_input_per_1m and records the parts on the usage record', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.a.enqueue({ kind: 'text', usage: { prompt_tokens: 10_000, completion_tokens: 100, cached_tokens: 8_000 } });
    const c = await fx.client(key).chat.completions.create({ model: 'routed', messages });
    assert.equal(c.usage?.prompt_tokens_details?.cached_tokens, 8000);
    const cost = expectedCost(10_000, 100, 8_000);
    assert.equal((c.usage as unknown as { cost: number }).cost, Number(cost));
    assert.equal(cost, 480n, '(2000×150000 + 8000×15000 + 100×600000) / 1e6');
    assert.deepEqual(await fx.settled(accountId), { balance: 100_000n - cost, held: 0n });
    const row = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['input_tokens', 'cached_tokens', 'cache_write_tokens', 'cost'])
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      [row.input_tokens, row.cached_tokens, row.cache_write_tokens, row.cost].map((v) => BigInt(v)),
      [10_000n, 8_000n, 0n, cost],
    );
  });
});
