import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

async function expectStatus(promise: Promise<unknown>, status: number, code: string | null): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof OpenAI.APIError, String(error));
    assert.equal(error.status, status);
    assert.equal(error.code ?? null, code);
    return true;
  });
}

describe('OpenAI API: Responses endpoints beside create and get', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('lists the input items of a response, the previous conversation included, page by page', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    const first = await client.responses.create({
      model: 'svc-pro',
      input: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'one' },
      ],
    });
    const second = await client.responses.create({
      model: 'svc-pro',
      previous_response_id: first.id,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'two' }] }],
    });

    const all = await client.responses.inputItems.list(second.id, { order: 'asc' });
    assertSchema('ResponseItemList', rawPage(all));
    const items = all.getPaginatedItems();
    assert.deepEqual(
      items.map((item) => [item.type, 'role' in item ? item.role : undefined]),
      [
        ['message', 'developer'],
        ['message', 'user'],
        ['message', 'assistant'],
        ['message', 'user'],
      ],
    );
    assert.equal(items[2]?.id, first.output[0]?.id, 'an earlier output keeps its id');
    const texts = items.map((item) => (item.type === 'message' ? JSON.stringify(item.content) : ''));
    assert.match(texts[1] ?? '', /"input_text".*"one"/);
    assert.match(texts[3] ?? '', /"two"/);

    // Newest first by default; `after` continues from an id.
    const page = await client.responses.inputItems.list(second.id, { limit: 2 });
    assert.deepEqual(
      page.getPaginatedItems().map((i) => i.id),
      [items[3]?.id, items[2]?.id],
    );
    assertSchema('ResponseItemList', rawPage(page));
    assert.equal(rawPage(page)['has_more'], true);
    const rest = await client.responses.inputItems.list(second.id, { limit: 2, after: items[2]?.id ?? '' });
    assert.deepEqual(
      rest.getPaginatedItems().map((i) => i.id),
      [items[1]?.id, items[0]?.id],
    );
    assert.equal(rawPage(rest)['has_more'], false);
    // The SDK's auto-pagination walks the whole list.
    const walked: string[] = [];
    for await (const item of client.responses.inputItems.list(second.id, { limit: 1 })) walked.push(item.id ?? '');
    assert.deepEqual(walked, items.map((i) => i.id).reverse());
  });

  it('deletes a response: afterwards it is not found, and a second delete is 404', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    const created = await client.responses.create({ model: 'svc-pro', input: 'hi' });
    const res = await fetch(`${fx.baseURL}/responses/${created.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { id: created.id, object: 'response', deleted: true });
    await expectStatus(client.responses.retrieve(created.id), 404, 'not_found');
    await expectStatus(client.responses.delete(created.id), 404, 'not_found');
    await expectStatus(
      client.responses.create({ model: 'svc-pro', input: 'again', previous_response_id: created.id }),
      404,
      'not_found',
    );
  });

  it("keeps accounts apart: B can neither read, list, cancel nor delete A's response", async () => {
    const a = await fx.fund(100_000);
    const b = await fx.fund(100_000);
    const created = await fx.client(a.key).responses.create({ model: 'svc-pro', input: 'mine' });
    const other = fx.client(b.key);
    await expectStatus(other.responses.retrieve(created.id), 404, 'not_found');
    await expectStatus(other.responses.inputItems.list(created.id), 404, 'not_found');
    await expectStatus(other.responses.cancel(created.id), 404, 'not_found');
    await expectStatus(other.responses.delete(created.id), 404, 'not_found');
    // Still there for its owner.
    assert.equal((await fx.client(a.key).responses.retrieve(created.id)).id, created.id);
    await fx.client(a.key).responses.delete(created.id);
  });

  it('cancel: 404 for an unknown id, 400 for a finished (not background) response', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.client(key);
    await expectStatus(client.responses.cancel('resp_0123456789abcdef0123456789abcdef'), 404, 'not_found');
    const created = await client.responses.create({ model: 'svc-pro', input: 'hi' });
    await assert.rejects(client.responses.cancel(created.id), (error: unknown) => {
      assert.ok(error instanceof OpenAI.BadRequestError);
      assert.equal(error.param, 'response_id');
      assert.match(error.message, /background/);
      return true;
    });
  });

  it('counts input tokens without calling the upstream or charging', async () => {
    const { key, accountId } = await fx.fund(100_000);
    const client = fx.client(key);
    const small = await client.responses.inputTokens.count({ model: 'svc-pro', input: 'hi' });
    assertSchema('TokenCountsResource', small);
    const large = await client.responses.inputTokens.count({
      model: 'svc-pro',
      input: 'hi '.repeat(200),
      instructions: 'Answer in one sentence.',
    });
    assert.equal(small.object, 'response.input_tokens');
    assert.ok(small.input_tokens > 0);
    assert.ok(large.input_tokens > small.input_tokens + 100, `${large.input_tokens} vs ${small.input_tokens}`);
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 100_000n);
    await expectStatus(client.responses.inputTokens.count({ model: 'gpt-nope', input: 'x' }), 404, 'model_not_found');
  });

  it("shows the key's wallet at GET /balance, from the core's wallet", async () => {
    const { key, accountId } = await fx.fund(100_000);
    await fx.client(key).chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] });
    const res = await fetch(`${fx.baseURL}/balance`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200);
    const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
    assert.deepEqual(await res.json(), {
      object: 'balance',
      account_id: accountId,
      balance: Number(100_000n - cost),
      held: 0,
      available: Number(100_000n - cost),
      currency: 'toman',
    });
    const bad = await fetch(`${fx.baseURL}/balance`, { headers: { authorization: 'Bearer svc_sk_nope' } });
    assert.equal(bad.status, 401);
  });

  it('checks the key before the query: a bad key with a bad limit is 401, a good one 400 invalid_type', async () => {
    const { key } = await fx.fund(100_000);
    const created = await fx.client(key).responses.create({ model: 'svc-pro', input: 'hi' });
    const url = `${fx.baseURL}/responses/${created.id}/input_items?limit=many`;
    const bad = await fetch(url, { headers: { authorization: 'Bearer svc_sk_nope' } });
    assert.equal(bad.status, 401);
    const good = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(good.status, 400);
    const body = (await good.json()) as { error: { code: string; param: string } };
    assert.deepEqual([body.error.code, body.error.param], ['invalid_type', 'limit']);
  });
});

function rawPage(page: unknown): Record<string, unknown> {
  const body = (page as { body?: unknown }).body;
  assert.ok(typeof body === 'object' && body !== null, 'the page keeps its raw body');
  return body as Record<string, unknown>;
}
