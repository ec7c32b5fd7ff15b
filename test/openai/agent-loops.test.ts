import assert from 'node:assert/strict';
import type OpenAI from 'openai';
import { startFakeToolProviders, type FakeToolProviders } from '../fakes/providers';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { assertEvent, assertSchema } from '../helpers/openapi';
import { configB } from '../mcp/helpers';
import { expectedCost, MAX_OUTPUT, startOpenAiFixture, type OpenAiFixture } from './fixture';

type Json = Record<string, unknown>;

const SEARCH_PRICE = 150n;

/** A model turn that asks for `n` web searches. */
const searching = (n: number, usage = { prompt_tokens: 50, completion_tokens: 10 }): FakeBehavior => ({
  kind: 'tool_calls',
  calls: Array.from({ length: n }, (_, i) => ({
    id: `call_${i}`,
    name: 'web_search',
    arguments: JSON.stringify({ query: `query ${i}` }),
  })),
  usage,
});

const answer = (usage = { prompt_tokens: 300, completion_tokens: 20 }): FakeBehavior => ({
  kind: 'text',
  text: 'Here is what I found.',
  usage,
});

/**
 * SPEC §6, agent loops (issue 30): a hosted search loop is bounded, held once for its whole
 * bound before the first step, settled once for the steps that ran; a step that fails after work
 * returns that work as an incomplete answer charged what it carries; "nothing was charged" only
 * when nothing was. And small wallets (no client limit) are served with a fitted limit.
 */
describe('money at the edges: hosted search loops and small wallets (issue 30)', function () {
  this.timeout(60_000);
  let fakes: FakeToolProviders;
  let fx: OpenAiFixture;

  before(async () => {
    fakes = await startFakeToolProviders();
    fx = await startOpenAiFixture({
      extraConfig: () => configB(fakes),
      // A model with a small context window: a later turn's prompt (the searches' results) overflows it.
      extraModels: (url) => `
  svc-small-context:
    provider: openai
    base_url: ${url}
    api_key: test-upstream-secret
    upstream_model: fake-model-1
    price: { input_per_1m: 150000, output_per_1m: 600000 }
    context_window: 400
    max_output_tokens: 300
`,
    });
  });
  after(async () => {
    await fx.close();
    await fakes.close();
  });
  beforeEach(() => {
    fx.upstream.reset();
    fakes.set('searxng', 'ok');
  });

  /** The books of an account after its calls: one charge per request, equal to what was shown. */
  async function books(accountId: string): Promise<{ charged: bigint; charges: bigint[]; held: bigint }> {
    const { balance, held } = await fx.settled(accountId);
    const charges = (await fx.svc.ledger(accountId, 1000)).filter((e) => e.kind === 'charge').map((e) => -e.amount);
    const topups = (await fx.svc.ledger(accountId, 1000))
      .filter((e) => e.kind === 'topup')
      .reduce((sum, e) => sum + e.amount, 0n);
    return { charged: topups - balance, charges, held };
  }

  const searchCount = (): number => fakes.requestsTo('searxng').length;

  it('max_tool_calls 1 with a model asking 5 searches a turn: one search runs, it is echoed, and the model answers', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(searching(5), answer());
    const before = searchCount();
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'news?',
      tools: [{ type: 'web_search' }],
      max_tool_calls: 1,
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    assertSchema('Response', response);
    assert.equal(searchCount() - before, 1);
    assert.equal((response as unknown as Json)['max_tool_calls'], 1);
    assert.equal(response.status, 'completed');
    assert.equal(response.output.filter((i) => i.type === 'web_search_call').length, 1);
    // Two turns: the second answers (no tools), told which searches were not run.
    assert.equal(fx.upstream.requests.length, 2);
    const second = fx.upstream.requests[1]?.body;
    assert.equal(second?.['tool_choice'], 'none');
    const tools = (second?.['messages'] as Json[]).filter((m) => m['role'] === 'tool');
    assert.equal(tools.length, 5);
    assert.equal(tools.filter((m) => /^Not run/.test(String(m['content']))).length, 4);
    const cost = SEARCH_PRICE + expectedCost(50, 10) + expectedCost(300, 20);
    assert.equal((response.usage as unknown as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('max_tool_calls 0 offers no search at all: one plain turn', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(answer());
    const before = searchCount();
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'news?',
      tools: [{ type: 'web_search' }],
      max_tool_calls: 0,
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    assert.equal(searchCount() - before, 0);
    assert.equal(fx.upstream.requests[0]?.body['tools'], undefined);
    assert.equal((response as unknown as Json)['max_tool_calls'], 0);
    const cost = expectedCost(300, 20);
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  for (const [asked, runs] of [
    [5, 5],
    [undefined, 8],
    [50, 8],
  ] as const) {
    it(`max_tool_calls ${asked ?? 'unset'} with a model that never stops searching: ${runs} searches, at most 4 turns`, async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue(searching(5), searching(5), searching(5), searching(5), searching(5));
      const before = searchCount();
      const response = await fx.client(key).responses.create({
        model: 'svc-pro',
        input: 'dig deep',
        tools: [{ type: 'web_search' }],
        ...(asked === undefined ? {} : { max_tool_calls: asked }),
      } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
      assert.equal(searchCount() - before, runs);
      const turns = fx.upstream.requests.length;
      assert.ok(turns <= 4, `${turns} turns`);
      assert.equal((response as unknown as Json)['max_tool_calls'], asked ?? null);
      const usage = response.usage as unknown as Json;
      const modelCost = Array.from({ length: turns }, () => expectedCost(50, 10)).reduce((a, b) => a + b, 0n);
      const cost = BigInt(runs) * SEARCH_PRICE + modelCost;
      assert.equal(usage['cost'], Number(cost));
      assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
    });
  }

  it('a turn that fails after a search returns the work so far, incomplete, charged exactly what it carries', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(searching(2), { kind: 'http_error', status: 500 });
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'news?',
      tools: [{ type: 'web_search' }],
    });
    assertSchema('Response', response);
    assert.equal(response.status, 'incomplete');
    const details = response.incomplete_details as unknown as Json;
    assert.equal(details['svc_reason'], 'upstream_error');
    assert.equal(response.output.filter((i) => i.type === 'web_search_call').length, 2);
    const cost = 2n * SEARCH_PRICE + expectedCost(50, 10);
    const usage = response.usage as unknown as Json;
    assert.deepEqual([usage['input_tokens'], usage['output_tokens'], usage['cost']], [50, 10, Number(cost)]);
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('streamed, the same failure ends in response.incomplete with the charged usage', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(searching(1), { kind: 'http_error', status: 503 });
    const stream = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'news?',
      tools: [{ type: 'web_search' }],
      stream: true,
    });
    const events: Json[] = [];
    for await (const event of stream) events.push(event as unknown as Json);
    for (const event of events) assertEvent(event);
    const last = events[events.length - 1];
    assert.equal(last?.['type'], 'response.incomplete');
    const cost = SEARCH_PRICE + expectedCost(50, 10);
    const usage = (last?.['response'] as Json)['usage'] as Json;
    assert.equal(usage['cost'], Number(cost));
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('a first turn that fails is the call’s error and costs nothing', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'http_error', status: 500 });
    await assert.rejects(
      fx.client(key).responses.create({ model: 'svc-pro', input: 'news?', tools: [{ type: 'web_search' }] }),
      (e: { status?: number }) => e.status === 502,
    );
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });

  it('a later turn over the context window returns the searches done, incomplete (context_length_exceeded)', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(searching(5), answer());
    const response = await fx.client(key).responses.create({
      model: 'svc-small-context',
      input: 'news?',
      tools: [{ type: 'web_search' }],
    });
    assert.equal(response.status, 'incomplete');
    assert.equal((response.incomplete_details as unknown as Json)['svc_reason'], 'context_length_exceeded');
    assert.equal(fx.upstream.requests.length, 1);
    const cost = 5n * SEARCH_PRICE + expectedCost(50, 10);
    assert.equal((response.usage as unknown as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('a 500-credit wallet is refused up front, nothing charged, and the message says what the loop needs', async () => {
    const { key, accountId } = await fx.fund(500);
    await assert.rejects(
      fx.client(key).responses.create({ model: 'svc-pro', input: 'news?', tools: [{ type: 'web_search' }] }),
      (e: { status?: number; code?: string; message?: string }) =>
        e.status === 429 &&
        e.code === 'insufficient_quota' &&
        /hosted web_search tool reserves/.test(e.message ?? '') &&
        /max_tool_calls/.test(e.message ?? '') &&
        /Nothing was charged/.test(e.message ?? ''),
    );
    assert.equal(fx.upstream.requests.length, 0);
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });

  it('a key capped at 500 is refused up front by its cap; its spend never passes the cap', async () => {
    const funded = await fx.fund(1_000_000);
    const { secret } = await fx.svc.core.keys.create({ accountId: funded.accountId, name: 'capped', capTotal: 500n });
    await assert.rejects(
      fx.client(secret).responses.create({ model: 'svc-pro', input: 'news?', tools: [{ type: 'web_search' }] }),
      (e: { status?: number; message?: string }) => e.status === 429 && /Nothing was charged/.test(e.message ?? ''),
    );
    assert.deepEqual(await books(funded.accountId), { charged: 0n, charges: [], held: 0n });
  });

  it('a client that leaves a non-stream loop stops it and pays only for the steps that ran', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(searching(1), { kind: 'hang' });
    const client = fx.client(key);
    const controller = new AbortController();
    const call = client.responses.create(
      { model: 'svc-pro', input: 'news?', tools: [{ type: 'web_search' }] },
      { signal: controller.signal },
    );
    // Leave once the second turn has reached the upstream (the search and the first turn ran).
    for (let i = 0; i < 500 && fx.upstream.requests.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(fx.upstream.requests.length, 2);
    controller.abort();
    await assert.rejects(call);
    const cost = SEARCH_PRICE + expectedCost(50, 10);
    let b = await books(accountId);
    for (let i = 0; i < 200 && b.charges.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      b = await books(accountId);
    }
    assert.deepEqual(b, { charged: cost, charges: [cost], held: 0n });
  });

  it('a client that leaves a streamed loop after the search pays for the steps that ran', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(searching(1), { kind: 'hang' });
    const stream = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'news?',
      tools: [{ type: 'web_search' }],
      stream: true,
    });
    for await (const event of stream) if (event.type === 'response.web_search_call.completed') break;
    const cost = SEARCH_PRICE + expectedCost(50, 10);
    let b = await books(accountId);
    for (let i = 0; i < 300 && b.charges.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      b = await books(accountId);
    }
    assert.deepEqual(b, { charged: cost, charges: [cost], held: 0n });
  });

  it('a 100-credit wallet with no max_tokens is served with the limit its credit covers', async () => {
    const { key, accountId } = await fx.fund(100);
    fx.upstream.enqueue({ kind: 'text', text: 'Salam!', usage: { prompt_tokens: 10, completion_tokens: 5 } });
    const completion = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'Salam!' }],
    });
    assert.equal(completion.choices[0]?.message.content, 'Salam!');
    const sent = fx.upstream.requests[0]?.body['max_tokens'];
    assert.equal(typeof sent, 'number');
    // The largest limit 100 credits cover at 0.6 credits a token, after the prompt's bound.
    assert.ok((sent as number) >= 16 && (sent as number) < MAX_OUTPUT && (sent as number) <= 166, String(sent));
    const cost = expectedCost(10, 5);
    assert.equal((completion.usage as unknown as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
  });

  it('a wallet rich enough for the model maximum sends no limit, as before', async () => {
    const { key } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt_tokens: 10, completion_tokens: 5 } });
    await fx.client(key).chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(fx.upstream.requests[0]?.body['max_tokens'], undefined);
  });

  it('a 100-credit wallet with a max_tokens it cannot cover is refused, told the smallest call and how to get credit', async () => {
    const { key, accountId } = await fx.fund(100);
    await assert.rejects(
      fx.client(key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'Salam!' }],
        max_tokens: 1000,
      }),
      (e: { status?: number; message?: string }) =>
        e.status === 429 &&
        /a lower max_tokens reserves less/.test(e.message ?? '') &&
        /smallest call with this prompt \(16 output tokens\) needs \d+ credits: top up the wallet/.test(e.message ?? '') &&
        !/maxOutputTokens/.test(e.message ?? ''),
    );
    assert.equal(fx.upstream.requests.length, 0);
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });

  it('a wallet below the smallest call is refused with nothing charged', async () => {
    const { key, accountId } = await fx.fund(1);
    await assert.rejects(
      fx.client(key).chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'Salam!' }] }),
      (e: { status?: number; message?: string }) =>
        e.status === 429 && /smallest call with this prompt/.test(e.message ?? '') && !/a lower max_tokens/.test(e.message ?? ''),
    );
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });
});
