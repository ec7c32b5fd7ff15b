import assert from 'node:assert/strict';
import fc from 'fast-check';
import OpenAI from 'openai';
import { fuzzParams } from '../fuzz/fuzz-kit';
import { MAX_TOKENS_UNSUPPORTED } from '../fakes/openai-upstream';
import { expectedCost, MAX_OUTPUT, startOpenAiFixture, type OpenAiFixture } from './fixture';

const user = (content: string): OpenAI.Chat.Completions.ChatCompletionMessageParam[] => [{ role: 'user', content }];

/** Issue 13, points 2 and 5: the hold covers n choices, the charge is the usage's price, the output limit is the client's. */
describe('OpenAI API: hold, charge and output limit', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({
      // A reasoning model upstream: the limit must travel as max_completion_tokens.
      extraModels: (url) => `
  svc-reasoning:
    provider: openai
    base_url: ${url}
    api_key: test-upstream-secret
    upstream_model: fake-reasoning-1
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 128000
    max_output_tokens: ${MAX_OUTPUT}
    max_tokens_field: max_completion_tokens
`,
    });
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  /** The wallet's `held` while the upstream holds the call's answer back. */
  async function heldDuring(accountId: string, call: () => Promise<unknown>): Promise<bigint> {
    const release = fx.upstream.pause();
    const open = fx.upstream.nextRequestOpen();
    const pending = call();
    await open;
    const held = (await fx.svc.wallet(accountId)).held;
    release();
    await pending;
    return held;
  }

  async function chargesOf(accountId: string): Promise<bigint[]> {
    return (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge').map((e) => -e.amount);
  }

  it('n=5 with max_tokens=10: the hold covers five answers and the charge is the price of the usage', async () => {
    const { key, accountId } = await fx.fund(100_000);
    // Five choices of 10 tokens each, as an upstream that honours n reports them.
    const usage = { prompt_tokens: 20, completion_tokens: 50 };
    fx.upstream.enqueue({ kind: 'text', text: 'ten tokens', usage });
    const client = fx.client(key);
    const held = await heldDuring(accountId, () =>
      client.chat.completions.create({ model: 'svc-pro', messages: user('hi'), n: 5, max_tokens: 10 }),
    );
    assert.ok(held >= expectedCost(0, 50), `the hold ${held} must cover 5 × 10 output tokens`);
    const sent = fx.upstream.requests[0]?.body;
    assert.deepEqual([sent?.['n'], sent?.['max_tokens']], [5, 10]);
    assert.deepEqual(await chargesOf(accountId), [expectedCost(20, 50)]);
    assert.equal(await fx.balance(accountId), 100_000n - expectedCost(20, 50));

    // The same through a stream, with the five choices streamed.
    fx.upstream.enqueue({ kind: 'text', text: 'ten tokens', usage });
    const stream = await client.chat.completions.create({
      model: 'svc-pro',
      messages: user('hi'),
      n: 5,
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    });
    const indexes = new Set<number>();
    let cost: unknown;
    for await (const chunk of stream) {
      for (const c of chunk.choices) indexes.add(c.index);
      if (chunk.usage) cost = (chunk.usage as unknown as { cost: number }).cost;
    }
    assert.deepEqual([...indexes].sort(), [0, 1, 2, 3, 4]);
    assert.equal(cost, Number(expectedCost(20, 50)));
    await fx.settled(accountId);
    assert.deepEqual(await chargesOf(accountId), [expectedCost(20, 50), expectedCost(20, 50)]);
  });

  it('a wallet that covers one answer but not n is refused before the upstream, and told why', async () => {
    // A prompt bound of a few tokens plus 10 output tokens fits in 20 credits; 5 × 10 do not.
    const { key, accountId } = await fx.fund(20);
    const e = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-pro', messages: user('hi'), n: 5, max_tokens: 10 })
      .then(
        () => assert.fail('expected a refusal'),
        (error: unknown) => error,
      );
    assert.ok(e instanceof OpenAI.RateLimitError, String(e));
    assert.match(e.message, /plus 50 \(5 choices of 10\) output tokens/);
    assert.equal(fx.upstream.requests.length, 0);
    fx.upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt_tokens: 5, completion_tokens: 3 } });
    await fx.client(key).chat.completions.create({ model: 'svc-pro', messages: user('hi'), max_tokens: 10 });
    assert.equal(await fx.balance(accountId), 20n - expectedCost(5, 3));
  });

  /** The amount of the hold the wallet placed for a request, by the request id the answer names. */
  async function holdOf(requestId: string): Promise<bigint> {
    const row = await fx.svc.store.db
      .selectFrom('holds')
      .select('amount')
      .where('request_id', '=', requestId)
      .executeTakeFirstOrThrow();
    return BigInt(row.amount);
  }

  /** A counter of the core's metrics, summed over the series whose labels include `labels`. */
  async function counter(name: string, labels: Record<string, string>): Promise<number> {
    const text = await fx.svc.core.metrics.registry.render();
    let sum = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`)) continue;
      if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.split(' ').at(-1));
    }
    return sum;
  }

  it('issue 30: an upstream reporting 10^7 output tokens on a capped key (cap_total 500, max_tokens 10) is charged the hold, and the cap is never passed', async () => {
    const account = await fx.svc.core.accounts.create('capped');
    await fx.svc.core.deps.wallet.topUp({ accountId: account.id, amount: 10_000_000n, reference: 'test funding' });
    const { key, secret } = await fx.svc.core.keys.create({ accountId: account.id, name: 'capped', capTotal: 500n });
    const client = fx.client(secret);
    const overBefore = await counter('svc_usage_over_hold_total', { model: 'svc-pro', provider: 'openai' });
    const absurd = { prompt_tokens: 10, completion_tokens: 10_000_000 };
    let spent = 0n;
    for (const stream of [false, true, false, true, false]) {
      fx.upstream.enqueue({ kind: 'text', text: 'long', usage: absurd });
      const params = { model: 'svc-pro', messages: user('hi'), max_tokens: 10 };
      let cost: number | undefined;
      let requestId: string | null;
      if (stream) {
        const { data, response } = await client.chat.completions
          .create({ ...params, stream: true, stream_options: { include_usage: true } })
          .withResponse();
        requestId = response.headers.get('x-request-id');
        for await (const chunk of data) if (chunk.usage) cost = (chunk.usage as unknown as { cost: number }).cost;
        await fx.settled(account.id);
      } else {
        const { data, response } = await client.chat.completions.create(params).withResponse();
        requestId = response.headers.get('x-request-id');
        cost = (data.usage as unknown as { cost: number }).cost;
        assert.equal(response.headers.get('x-svc-cost'), String(cost), 'x-svc-cost is what was charged');
        // The tokens the upstream reported are shown as they were.
        assert.equal(data.usage?.completion_tokens, 10_000_000);
      }
      assert.ok(requestId !== null);
      const hold = await holdOf(requestId);
      // Charged the hold (the most a call can cost), not the 10^7 tokens' price.
      assert.ok(expectedCost(10, 10_000_000) > hold);
      assert.equal(BigInt(cost ?? -1), hold, 'the cost shown is the hold');
      const record = await fx.svc.store.db
        .selectFrom('usage_records')
        .select('cost')
        .where('request_id', '=', requestId)
        .executeTakeFirstOrThrow();
      assert.equal(BigInt(record.cost), hold, 'the usage record says what was charged');
      spent += hold;
    }
    const w = await fx.svc.wallet(account.id);
    assert.deepEqual([w.balance, w.held], [10_000_000n - spent, 0n]);
    const lineage = await fx.svc.store.db
      .selectFrom('key_spend')
      .select(['spent', 'held'])
      .where('lineage_id', '=', key.lineageId)
      .where('period', '=', 't:all')
      .executeTakeFirstOrThrow();
    assert.equal(BigInt(lineage.spent), spent);
    assert.ok(BigInt(lineage.spent) <= 500n, `the lineage spent ${lineage.spent} of its 500 cap`);
    assert.equal(
      (await counter('svc_usage_over_hold_total', { model: 'svc-pro', provider: 'openai' })) - overBefore,
      5,
      'each overrun is counted',
    );
  });

  it('an upstream that overruns the limit is charged at the hold, never more, and never below zero', async () => {
    const { key, accountId } = await fx.fund(45);
    // 50 output tokens against a limit of 5: 2 + 30 credits, well above the hold of about 12.
    fx.upstream.enqueue({ kind: 'text', text: 'long', usage: { prompt_tokens: 10, completion_tokens: 50 } });
    const { data: done, response } = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-pro', messages: user('hi'), max_tokens: 5 })
      .withResponse();
    const hold = await holdOf(response.headers.get('x-request-id') ?? '');
    assert.ok(hold < expectedCost(10, 50));
    assert.equal((done.usage as unknown as { cost: number }).cost, Number(hold));
    assert.equal(await fx.balance(accountId), 45n - hold);
    const w = await fx.svc.wallet(accountId);
    assert.equal(w.held, 0n);
  });

  it('property: over random n, max_tokens and upstream usage, every charge is the price of its usage, at most the hold', async () => {
    const { key, accountId } = await fx.fund(10_000_000_000);
    const client = fx.client(key);
    let calls = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        // Above the model maximum is a 400 (SPEC §7d), tested in nothing-dropped.test.ts.
        fc.option(fc.integer({ min: 1, max: MAX_OUTPUT }), { nil: undefined }),
        fc.integer({ min: 1, max: 50_000 }),
        // Up to half again the most the call allows: an overrun is charged at the hold.
        fc.double({ min: 0, max: 1.5, noNaN: true }),
        fc.boolean(),
        async (n, maxTokens, promptTokens, share, stream) => {
          fx.upstream.reset();
          const limit = Math.min(maxTokens ?? MAX_OUTPUT, MAX_OUTPUT);
          const completionTokens = Math.floor(share * n * limit);
          fx.upstream.enqueue({
            kind: 'text',
            text: 'answer',
            usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens },
          });
          const before = await fx.balance(accountId);
          const params = {
            model: 'svc-pro',
            messages: user('question'),
            n,
            ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
          };
          let reported: number | undefined;
          let requestId: string | null;
          if (stream) {
            const { data: s, response } = await client.chat.completions
              .create({
                ...params,
                stream: true,
                stream_options: { include_usage: true },
              })
              .withResponse();
            requestId = response.headers.get('x-request-id');
            for await (const chunk of s) if (chunk.usage) reported = (chunk.usage as unknown as { cost: number }).cost;
            await fx.settled(accountId);
          } else {
            const { data: done, response } = await client.chat.completions.create(params).withResponse();
            requestId = response.headers.get('x-request-id');
            reported = (done.usage as unknown as { cost: number }).cost;
          }
          calls += 1;
          const hold = await holdOf(requestId ?? '');
          const full = expectedCost(promptTokens, completionTokens);
          const price = full < hold ? full : hold;
          assert.equal(reported, Number(price), 'the usage reports the price, at most the hold');
          assert.equal(before - (await fx.balance(accountId)), price, 'the wallet moved by the price, at most the hold');
          const sent = fx.upstream.requests[0]?.body;
          assert.equal(sent?.['n'], n > 1 ? n : undefined);
          assert.equal(sent?.['max_tokens'], maxTokens === undefined ? undefined : limit);
        },
      ),
      fuzzParams(25),
    );
    const records = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['cost', 'input_tokens', 'output_tokens', 'request_id'])
      .where('account_id', '=', accountId)
      .execute();
    assert.equal(records.length, calls);
    for (const r of records) {
      const full = expectedCost(Number(r.input_tokens), Number(r.output_tokens));
      const hold = await holdOf(r.request_id);
      assert.equal(r.cost, full < hold ? full : hold, 'each record is priced, at most its hold');
    }
    assert.equal((await fx.svc.wallet(accountId)).held, 0n);
  });

  it('no limit from the client: none goes upstream, and the hold is bounded by max_output_tokens', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    const held = await heldDuring(accountId, () =>
      client.chat.completions.create({ model: 'svc-pro', messages: user('hi') }),
    );
    assert.ok(held >= expectedCost(0, MAX_OUTPUT), `the hold ${held} must cover ${MAX_OUTPUT} output tokens`);
    const heldResponses = await heldDuring(accountId, () => client.responses.create({ model: 'svc-pro', input: 'hi' }));
    assert.ok(heldResponses >= expectedCost(0, MAX_OUTPUT));
    for (const r of fx.upstream.requests) {
      assert.equal(r.body['max_tokens'], undefined);
      assert.equal(r.body['max_completion_tokens'], undefined);
    }
    assert.equal(fx.upstream.requests.length, 2);
  });

  it('a limit from the client reaches the upstream under the same name; above the model maximum it is fitted', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    const fitted = await client.chat.completions
      .create({ model: 'svc-pro', messages: user('hi'), max_completion_tokens: 5000 })
      .withResponse();
    assert.equal(fitted.response.headers.get('x-svc-fitted'), `max_completion_tokens=5000->${MAX_OUTPUT}`);
    await client.chat.completions.create({ model: 'svc-pro', messages: user('hi'), max_completion_tokens: MAX_OUTPUT });
    await client.chat.completions.create({ model: 'svc-pro', messages: user('hi'), max_completion_tokens: 7 });
    await client.chat.completions.create({ model: 'svc-pro', messages: user('hi'), max_tokens: 9 });
    await client.responses.create({ model: 'svc-pro', input: 'hi', max_output_tokens: 200 });
    const limits = fx.upstream.requests.map((r) => [r.body['max_tokens'], r.body['max_completion_tokens']]);
    assert.deepEqual(limits, [
      [undefined, MAX_OUTPUT],
      [undefined, MAX_OUTPUT],
      [undefined, 7],
      [9, undefined],
      [200, undefined],
    ]);
  });

  it('a reasoning upstream that refuses max_tokens: the client may send either field, and calls succeed', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.rejectMaxTokens();
    const client = fx.client(key);
    // Without the option the upstream's own refusal reaches the client as OpenAI's 400.
    const refused = await client.chat.completions
      .create({ model: 'svc-pro', messages: user('hi'), max_tokens: 50 })
      .then(
        () => assert.fail('expected the upstream to refuse max_tokens'),
        (error: unknown) => error,
      );
    assert.ok(refused instanceof OpenAI.BadRequestError, String(refused));
    assert.deepEqual(
      [refused.code, refused.param, (refused.error as { message: string }).message],
      ['unsupported_parameter', 'max_tokens', MAX_TOKENS_UNSUPPORTED.error.message],
    );
    fx.upstream.requests.length = 0;

    const a = await client.chat.completions.create({ model: 'svc-reasoning', messages: user('hi'), max_tokens: 50 });
    assert.equal(a.choices[0]?.finish_reason, 'stop');
    const s = await client.chat.completions.create({
      model: 'svc-reasoning',
      messages: user('hi'),
      max_tokens: MAX_OUTPUT,
      stream: true,
    });
    for await (const chunk of s) void chunk;
    const r = await client.responses.create({ model: 'svc-reasoning', input: 'hi', max_output_tokens: 64 });
    assert.equal(r.status, 'completed');
    const b = await client.chat.completions.create({
      model: 'svc-pro',
      messages: user('hi'),
      max_completion_tokens: 8,
    });
    assert.equal(b.choices[0]?.finish_reason, 'stop');
    const limits = fx.upstream.requests.map((q) => [q.body['max_tokens'], q.body['max_completion_tokens']]);
    assert.deepEqual(limits, [
      [undefined, 50],
      [undefined, MAX_OUTPUT],
      [undefined, 64],
      [undefined, 8],
    ]);
    await fx.settled(accountId);
    assert.equal((await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge').length, 4);
  });
});
