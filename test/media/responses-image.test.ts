import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { startFakeMediaUpstream, type FakeMediaUpstream } from '../fakes/media-upstream';
import { assertEvent, assertSchema } from '../helpers/openapi';
import { runSvc } from '../cli/run-svc';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

/*
 * SPEC §14, the other wires: the Responses API's hosted image_generation tool, served by
 * `responses.image_generation_model` (here `gpt-image-1` at a fake of OpenAI's images wire). The
 * chat model (a fake of OpenAI's chat wire) calls it; svc makes the image between turns, held
 * before the first turn and billed as that image call (its own charge and usage record of kind
 * image), plus the chat turns. The real openai client, the wallet to the credit.
 */

type Json = Record<string, unknown>;

const MEDIUM = 700n;
const HIGH = 1700n;

/** A model turn that calls the image tool once. */
const drawing = (prompt: string, usage = { prompt_tokens: 50, completion_tokens: 10 }): FakeBehavior => ({
  kind: 'tool_calls',
  calls: [{ id: 'call_img', name: 'image_generation', arguments: JSON.stringify({ prompt }) }],
  usage,
});

const answer = (usage = { prompt_tokens: 300, completion_tokens: 20 }): FakeBehavior => ({
  kind: 'text',
  text: 'Here is your picture of a fox.',
  usage,
});

const TURNS = expectedCost(50, 10) + expectedCost(300, 20);

describe('the Responses API’s hosted image_generation tool (SPEC §14)', function () {
  this.timeout(60_000);
  let images: FakeMediaUpstream;
  let fx: OpenAiFixture;

  before(async () => {
    images = await startFakeMediaUpstream();
    fx = await startOpenAiFixture({
      extraModels: () => `
  pictures:
    kind: image
    provider: openai
    base_url: ${images.baseUrl}
    api_key: img-secret
    upstream_model: gpt-image-1
    price: { per_image: { "1024x1024/medium": ${MEDIUM}, "1024x1024/high": ${HIGH} } }
`,
      extraConfig: 'responses:\n  image_generation_model: pictures\n',
    });
  });
  after(async () => {
    await fx.close();
    await images.close();
  });
  beforeEach(() => fx.upstream.reset());

  async function books(accountId: string): Promise<{ charged: bigint; charges: bigint[]; held: bigint }> {
    const { balance, held } = await fx.settled(accountId);
    const ledger = await fx.svc.ledger(accountId, 1000);
    const charges = ledger
      .filter((e) => e.kind === 'charge')
      .map((e) => -e.amount)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const topups = ledger.filter((e) => e.kind === 'topup').reduce((sum, e) => sum + e.amount, 0n);
    return { charged: topups - balance, charges, held };
  }

  async function usageOf(
    accountId: string,
  ): Promise<{ kind: string; resource: string; cost: bigint; units: number }[]> {
    const rows = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'resource', 'cost', 'media_units'])
      .where('account_id', '=', accountId)
      .orderBy('kind')
      .execute();
    return rows.map((r) => ({
      kind: r.kind,
      resource: r.resource,
      cost: BigInt(r.cost),
      units: Number(r.media_units),
    }));
  }

  const tools = [{ type: 'image_generation' as const, size: '1024x1024' as const, quality: 'medium' as const }];

  it('responses.create: the model calls the tool, svc makes the image, the output has its image_generation_call; image and turns charged once each', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(drawing('a red fox in the snow'), answer());
    const before = images.requests.length;
    const response = await fx.client(key).responses.create({ model: 'svc-pro', input: 'Draw me a fox', tools });
    assertSchema('Response', response);
    assert.equal(response.status, 'completed');
    const call = response.output.find((i) => i.type === 'image_generation_call');
    assert.ok(call !== undefined && call.type === 'image_generation_call');
    assert.equal(call.status, 'completed');
    const png = Buffer.from(call.result ?? '', 'base64');
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    assert.equal(response.output_text, 'Here is your picture of a fox.');
    assert.deepEqual(
      response.output.map((i) => i.type),
      ['image_generation_call', 'message'],
    );
    // The image model was asked once, as POST /images/generations asks it.
    const seen = images.requests.slice(before);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.path, '/v1/images/generations');
    assert.deepEqual(
      [
        seen[0]?.body['model'],
        seen[0]?.body['prompt'],
        seen[0]?.body['n'],
        seen[0]?.body['size'],
        seen[0]?.body['quality'],
      ],
      ['gpt-image-1', 'a red fox in the snow', 1, '1024x1024', 'medium'],
    );
    assert.equal(seen[0]?.authorization, 'Bearer img-secret');
    // The chat model saw the tool as a function, and its answer in the second turn.
    const first = fx.upstream.requests[0]?.body;
    assert.deepEqual(
      (first?.['tools'] as Json[]).map((t) => (t['function'] as Json)['name']),
      ['image_generation'],
    );
    const toolAnswer = (fx.upstream.requests[1]?.body['messages'] as Json[]).find((m) => m['role'] === 'tool');
    assert.match(String(toolAnswer?.['content']), /image was generated/);
    const cost = TURNS + MEDIUM;
    assert.equal((response.usage as unknown as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), {
      charged: cost,
      charges: [MEDIUM, TURNS].sort((a, b) => (a < b ? -1 : 1)),
      held: 0n,
    });
    assert.deepEqual(await usageOf(accountId), [
      { kind: 'image', resource: 'pictures', cost: MEDIUM, units: 1 },
      { kind: 'responses', resource: 'svc-pro', cost: TURNS, units: 0 },
    ]);
  });

  it('streamed: the image_generation_call events in order, each valid against the schema; charged the same', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(drawing('a red fox'), answer());
    const stream = await fx
      .client(key)
      .responses.create({ model: 'svc-pro', input: 'Draw me a fox', tools, stream: true });
    const events: Json[] = [];
    for await (const event of stream) {
      assertEvent(event);
      events.push(event as unknown as Json);
    }
    const image = events.filter(
      (e) =>
        String(e['type']).startsWith('response.image_generation_call.') ||
        ((e['type'] === 'response.output_item.added' || e['type'] === 'response.output_item.done') &&
          (e['item'] as Json)['type'] === 'image_generation_call'),
    );
    assert.deepEqual(
      image.map((e) => e['type']),
      [
        'response.output_item.added',
        'response.image_generation_call.in_progress',
        'response.image_generation_call.generating',
        'response.image_generation_call.completed',
        'response.output_item.done',
      ],
    );
    assert.equal((image[0]?.['item'] as Json)['status'], 'in_progress');
    const done = image[4]?.['item'] as Json;
    assert.equal(done['status'], 'completed');
    assert.ok(typeof done['result'] === 'string' && done['result'].length > 0);
    const ids = new Set(image.map((e) => e['item_id'] ?? (e['item'] as Json)['id']));
    assert.equal(ids.size, 1);
    const completed = events.at(-1) as Json;
    assert.equal(completed['type'], 'response.completed');
    const output = (completed['response'] as Json)['output'] as Json[];
    assert.deepEqual(
      output.map((i) => i['type']),
      ['image_generation_call', 'message'],
    );
    const cost = TURNS + MEDIUM;
    assert.equal(((completed['response'] as Json)['usage'] as Json)['cost'], Number(cost));
    assert.deepEqual(await books(accountId), {
      charged: cost,
      charges: [MEDIUM, TURNS].sort((a, b) => (a < b ? -1 : 1)),
      held: 0n,
    });
    assert.deepEqual(await usageOf(accountId), [
      { kind: 'image', resource: 'pictures', cost: MEDIUM, units: 1 },
      { kind: 'responses', resource: 'svc-pro', cost: TURNS, units: 0 },
    ]);
  });

  it('a stored response with an image goes on with previous_response_id: the image stays in the record, not in the chat prompt', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(drawing('a red fox'), answer());
    const first = await fx
      .client(key)
      .responses.create({ model: 'svc-pro', input: 'Draw me a fox', tools, store: true });
    fx.upstream.enqueue(answer({ prompt_tokens: 400, completion_tokens: 20 }));
    const second = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'What colour was it?',
      previous_response_id: first.id,
      tools,
    });
    assert.equal(second.status, 'completed');
    const sent = JSON.stringify(fx.upstream.requests.at(-1)?.body['messages']);
    const image = first.output.find((i) => i.type === 'image_generation_call');
    const result = image?.type === 'image_generation_call' ? (image.result ?? '') : '';
    assert.ok(result.length > 0);
    assert.ok(!sent.includes(result), 'the image is not sent to the chat model');
    // The model is reminded what it drew, in its own turn before its answer.
    assert.deepEqual(fx.upstream.requests.at(-1)?.body['messages'], [
      { role: 'user', content: 'Draw me a fox' },
      {
        role: 'assistant',
        content:
          '[An image was generated and shown to the user, from the prompt: "a red fox"]\nHere is your picture of a fox.',
      },
      { role: 'user', content: 'What colour was it?' },
    ]);
    const items = await fx.client(key).responses.inputItems.list(second.id);
    assert.ok(items.data.some((i) => i.type === 'image_generation_call'));
    const cost = TURNS + MEDIUM + expectedCost(400, 20);
    assert.equal((await books(accountId)).charged, cost);
  });

  it('a prompt the image model refuses: the call is failed, the model told, the image not charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    images.failNext(400, {
      error: {
        code: 'content_policy_violation',
        message: 'Your request was rejected as a result of our safety system.',
        param: null,
        type: 'invalid_request_error',
      },
    });
    fx.upstream.enqueue(drawing('something not allowed'), answer());
    const response = await fx.client(key).responses.create({ model: 'svc-pro', input: 'Draw it', tools });
    assertSchema('Response', response);
    const call = response.output.find((i) => i.type === 'image_generation_call');
    assert.deepEqual(call?.type === 'image_generation_call' ? [call.status, call.result] : undefined, ['failed', null]);
    const toolAnswer = (fx.upstream.requests[1]?.body['messages'] as Json[]).find((m) => m['role'] === 'tool');
    assert.match(String(toolAnswer?.['content']), /not generated: .*safety system/);
    assert.deepEqual(await books(accountId), { charged: TURNS, charges: [TURNS], held: 0n });
  });

  it('a model that never calls the tool: only its turn is charged, and no image record is written', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(answer());
    const response = await fx.client(key).responses.create({ model: 'svc-pro', input: 'Just say hi', tools });
    assert.equal(response.output.filter((i) => i.type === 'image_generation_call').length, 0);
    const cost = expectedCost(300, 20);
    assert.deepEqual(await books(accountId), { charged: cost, charges: [cost], held: 0n });
    assert.deepEqual(
      (await usageOf(accountId)).map((u) => u.kind),
      ['responses'],
    );
  });

  it('a wallet that cannot cover the image hold: OpenAI’s 429 before anything is asked, nothing charged', async () => {
    const { key, accountId } = await fx.fund(1000);
    const before = images.requests.length;
    await assert.rejects(
      fx.client(key).responses.create({ model: 'svc-pro', input: 'Draw me a fox', tools }),
      (e: unknown) =>
        e instanceof OpenAI.RateLimitError && e.code === 'insufficient_quota' && /image_generation/.test(e.message),
    );
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(images.requests.length, before);
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });

  it('a size the image model does not offer is a 400 naming the tool’s field, before anything is held', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    await assert.rejects(
      fx.client(key).responses.create({
        model: 'svc-pro',
        input: 'Draw',
        tools: [{ type: 'image_generation', size: '1536x1024' }],
      }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0].size',
    );
    assert.deepEqual(await books(accountId), { charged: 0n, charges: [], held: 0n });
  });
});

describe('the hosted image_generation tool on an image model priced from the dollar (SPEC §14, §15)', function () {
  this.timeout(60_000);
  let images: FakeMediaUpstream;
  let fx: OpenAiFixture;

  before(async () => {
    images = await startFakeMediaUpstream();
    fx = await startOpenAiFixture({
      extraModels: () => `
  dollar-pictures:
    kind: image
    provider: openai
    base_url: ${images.baseUrl}
    api_key: img-secret
    upstream_model: gpt-image-1
    price_usd: { per_image: { "1024x1024/medium": 0.05 } }
`,
      extraConfig: 'pricing: { rate: 100000, margin: 0.2 }\nresponses:\n  image_generation_model: dollar-pictures\n',
      // Every admission reads the stored rate, so the change below is seen at once.
      priceCacheMs: 0,
    });
  });
  after(async () => {
    await fx.close();
    await images.close();
  });

  it('the image is held and charged at the rate in force when the response is admitted, not the file’s', async () => {
    const set = await runSvc(['price', 'rate', 'set', '120000', '--json'], { SVC_DATABASE_URL: fx.svc.databaseUrl });
    assert.equal(set.code, 0, set.stderr);
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue(drawing('a red fox in the snow'), answer());
    const response = await fx.client(key).responses.create({
      model: 'svc-pro',
      input: 'Draw me a fox',
      tools: [{ type: 'image_generation', size: '1024x1024', quality: 'medium' }],
    });
    assert.equal(response.status, 'completed');
    // ceil(0.05 × 120000 × 1.2) = 7200 (the file's rate would make it 6000).
    const image = 7200n;
    assert.equal((response.usage as unknown as Json)['cost'], Number(TURNS + image));
    const record = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['cost', 'pricing'])
      .where('account_id', '=', accountId)
      .where('kind', '=', 'image')
      .executeTakeFirstOrThrow();
    assert.equal(BigInt(record.cost), image);
    const pricing = (typeof record.pricing === 'string' ? JSON.parse(record.pricing) : record.pricing) as Json;
    assert.equal(pricing['rate'], 120000);
    assert.deepEqual(pricing['price'], { per_image: { '1024x1024/medium': 7200 } });
    const { balance } = await fx.settled(accountId);
    assert.equal(balance, 1_000_000n - TURNS - image);
  });
});
