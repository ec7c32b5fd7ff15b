import assert from 'node:assert/strict';
import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

async function until<T>(read: () => Promise<T> | T, ok: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 500; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition never became true');
}

/**
 * A chat stream (plain HTTP) whose client leaves as soon as the upstream has the request, before
 * the upstream sent a chunk; resolves once the core has dropped the upstream request.
 */
async function leaveBeforeFirstChunk(fx: OpenAiFixture, key: string, upstream: FakeBehavior): Promise<void> {
  fx.upstream.enqueue(upstream);
  const controller = new AbortController();
  const opened = fx.upstream.nextRequestOpen();
  const answer = fetch(`${fx.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'count slowly' }], stream: true }),
    signal: controller.signal,
  }).then(
    (response) => response.text(),
    (error: unknown) => String(error),
  );
  await opened;
  controller.abort();
  await answer;
  await until(
    () => fx.upstream.aborted,
    (n) => n === 1,
  );
}

/** Nothing charged or held, and one usage record of a cancelled call that cost nothing. */
async function assertNotCharged(fx: OpenAiFixture, accountId: string, balance: bigint): Promise<void> {
  assert.deepEqual(await fx.settled(accountId), { balance, held: 0n });
  const ledger = await fx.svc.ledger(accountId);
  assert.deepEqual(
    ledger.filter((e) => e.kind === 'charge'),
    [],
  );
  const usage = await fx.svc.store.db
    .selectFrom('usage_records')
    .select(['status', 'cost'])
    .where('account_id', '=', accountId)
    .execute();
  assert.deepEqual(usage, [{ status: 'cancelled', cost: 0n }]);
}

describe('OpenAI API: client disconnects mid-stream', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('aborts the upstream request and charges the prompt plus the tokens produced so far', async () => {
    const { key, accountId } = await fx.fund(100_000);
    // The upstream sends three words, then keeps the stream open with nothing more.
    fx.upstream.enqueue({ kind: 'stall', afterPieces: 3 });
    const stream = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'count slowly' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (text === 'one two three ') break;
    }
    assert.equal(text, 'one two three ');

    await until(
      () => fx.upstream.aborted,
      (n) => n === 1,
    );
    const wallet = await fx.settled(accountId);
    // svc's tokenizer (cl100k_base): 3 + 4 + the prompt's text, and the text the client was handed.
    const prompt = 3 + 4 + countTokens('count slowly');
    const output = countTokens('one two three ');
    const cost = expectedCost(prompt, output);
    assert.equal(wallet.balance, 100_000n - cost);
    const usage = await fx.svc.store.db
      .selectFrom('usage_records')
      .selectAll()
      .where('account_id', '=', accountId)
      .execute();
    assert.equal(usage.length, 1);
    assert.deepEqual(
      [usage[0]?.status, usage[0]?.cost, usage[0]?.input_tokens, usage[0]?.output_tokens],
      ['cancelled', cost, BigInt(prompt), BigInt(output)],
    );
    const ledger = await fx.svc.ledger(accountId);
    assert.equal(ledger.filter((e) => e.kind === 'charge').length, 1);
  });

  // Fault test, issue 8 (seed 8, req_fault_8_811): a stream left before the upstream sent anything
  // was charged the estimated prompt, even when the upstream had failed.
  it('charges nothing when the client leaves before the upstream answered', async () => {
    const { key, accountId } = await fx.fund(100_000);
    await leaveBeforeFirstChunk(fx, key, { kind: 'hang' });
    await assertNotCharged(fx, accountId, 100_000n);
  });

  it('charges nothing when the client leaves while the upstream fails', async () => {
    const { key, accountId } = await fx.fund(100_000);
    // The upstream answers 500 and stalls in the middle of the error body: the core is reading
    // the failure when the client goes away.
    await leaveBeforeFirstChunk(fx, key, { kind: 'http_error', status: 500, stallBody: true });
    await assertNotCharged(fx, accountId, 100_000n);
  });

  it('a Responses stream left early is charged the same way', async () => {
    const { key, accountId } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'stall', afterPieces: 2 });
    const stream = await fx.client(key).responses.create({ model: 'svc-pro', input: 'count slowly', stream: true });
    let text = '';
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (text === 'one two ') break;
    }
    await until(
      () => fx.upstream.aborted,
      (n) => n === 1,
    );
    const wallet = await fx.settled(accountId);
    // The same prompt, and the two words it was handed.
    assert.equal(wallet.balance, 100_000n - expectedCost(3 + 4 + countTokens('count slowly'), countTokens('one two ')));
  });
});
