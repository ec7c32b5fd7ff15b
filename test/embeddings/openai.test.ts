import assert from 'node:assert/strict';
import { encode } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import OpenAI from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import {
  FAKE_DEFAULT_DIMENSIONS,
  fakeTokens,
  fakeVector,
  startFakeEmbeddingsUpstream,
  type FakeEmbeddingsUpstream,
} from '../fakes/embeddings-upstream';

/** Credits per 1M input tokens of the test embedding model: odd, so rounding shows. */
const INPUT_PER_1M = 1_234_567n;
/** Tokens per input of the test embedding model (its context_window). */
const PER_INPUT = 40;

/** SPEC §7c, computed apart from the code under test: ceil(tokens × input_per_1m / 1e6), at least 1. */
function expectedCost(tokens: number): bigint {
  const cost = (BigInt(tokens) * INPUT_PER_1M + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

function config(upstream: string): string {
  return `models:
  svc-embed-up:
    provider: openai
    kind: embedding
    base_url: ${upstream}
    api_key: test-upstream-secret
    upstream_model: fake-embed-1
    dimensions: [${FAKE_DEFAULT_DIMENSIONS}, 4]
    context_window: ${PER_INPUT}
    price: { input_per_1m: ${INPUT_PER_1M} }
  svc-chat:
    provider: sandbox
    price: { input_per_1m: 150000, output_per_1m: 600000 }
  svc-embed:
    provider: sandbox
    kind: embedding
    dimensions: [16]
    price: { input_per_1m: 20000 }
`;
}

describe('embeddings: POST /v1/openai/embeddings', function () {
  this.timeout(30_000);
  let upstream: FakeEmbeddingsUpstream;
  let svc: TestSvc;
  let baseURL: string;

  before(async () => {
    upstream = await startFakeEmbeddingsUpstream();
    svc = await startSvc({ config: config(upstream.baseUrl) });
    baseURL = `${svc.baseUrl}/v1/openai`;
  });
  after(async () => {
    await svc.close();
    await upstream.close();
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });

  async function post(key: string, body: unknown): Promise<Response> {
    return fetch(`${baseURL}/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  /** A 400 naming `param` in OpenAI's shape, with nothing charged and no hold left. */
  async function refused(body: unknown, param: string, status = 400): Promise<void> {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const calls = upstream.requests.length;
    const res = await post(key, body);
    const json = (await res.json()) as { error: { param: string | null; type: string; message: string } };
    assert.equal(res.status, status, JSON.stringify(json));
    assertSchema('ErrorResponse', json);
    assert.equal(json.error.param, param, json.error.message);
    assert.equal(upstream.requests.length, calls, 'the upstream was not called');
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n);
    assert.equal(wallet.held, 0n);
  }

  it('embeds a string with the SDK (float): the upstream vector, charged exactly once at the input price', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const text = 'the quick brown fox';
    const result = await client(key).embeddings.create({
      model: 'svc-embed-up',
      input: text,
      encoding_format: 'float',
      user: 'user-42',
    });
    assert.equal(result.object, 'list');
    assert.equal(result.model, 'svc-embed-up');
    assert.deepEqual(result.data[0]?.embedding, fakeVector(text, FAKE_DEFAULT_DIMENSIONS));
    assert.equal(result.usage.prompt_tokens, fakeTokens(text));
    const seen = upstream.requests.at(-1);
    assert.equal(seen?.body['model'], 'fake-embed-1');
    assert.equal(seen?.body['user'], 'user-42');
    assert.equal(seen?.body['encoding_format'], 'float');
    assert.equal(seen?.authorization, 'Bearer test-upstream-secret');
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n - expectedCost(fakeTokens(text)));
    assert.equal(wallet.held, 0n);
    const charges = (await svc.ledger(accountId)).filter((e) => e.amount < 0n);
    assert.equal(charges.length, 1);
  });

  it('issue 30: an upstream that reports no usage is served, charged from svc’s cl100k count, usage.estimated', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const texts = ['the quick brown fox', 'jumps over the lazy dog, twice'];
    upstream.omitUsageNext();
    const res = await post(key, { model: 'svc-embed-up', input: texts });
    const json = (await res.json()) as { usage: { prompt_tokens: number; total_tokens: number; estimated?: boolean } };
    assert.equal(res.status, 200, JSON.stringify(json));
    const counted = texts.reduce((sum, t) => sum + encode(t).length, 0);
    assert.deepEqual(json.usage, { prompt_tokens: counted, total_tokens: counted, estimated: true });
    assert.equal(res.headers.get('x-svc-cost'), String(expectedCost(counted)));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - expectedCost(counted));
    // A reported usage is not an estimate.
    const plain = await client(key).embeddings.create({ model: 'svc-embed-up', input: texts[0] ?? '' });
    assert.equal((plain.usage as { estimated?: boolean }).estimated, undefined);
  });

  it('answers CreateEmbeddingResponse with x-svc-cost and x-svc-balance, for an array of strings in order', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const texts = ['alpha', 'beta gamma', 'delta epsilon zeta'];
    const res = await post(key, { model: 'svc-embed-up', input: texts });
    assert.equal(res.status, 200);
    const json = (await res.json()) as {
      data: { index: number; embedding: number[] }[];
      usage: { prompt_tokens: number };
    };
    assertSchema('CreateEmbeddingResponse', json);
    assert.deepEqual(
      json.data.map((d) => d.index),
      [0, 1, 2],
    );
    texts.forEach((t, i) => assert.deepEqual(json.data[i]?.embedding, fakeVector(t, FAKE_DEFAULT_DIMENSIONS)));
    const tokens = texts.reduce((s, t) => s + fakeTokens(t), 0);
    assert.equal(json.usage.prompt_tokens, tokens);
    const cost = expectedCost(tokens);
    assert.equal(res.headers.get('x-svc-cost'), String(cost));
    assert.equal(res.headers.get('x-svc-balance'), String(1_000_000n - cost));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost);
  });

  it('takes token ids and arrays of token ids, passed upstream as ids', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const one = await client(key).embeddings.create({
      model: 'svc-embed-up',
      input: [1820, 4062, 14198],
      encoding_format: 'float',
    });
    assert.deepEqual(upstream.requests.at(-1)?.body['input'], [[1820, 4062, 14198]]);
    assert.deepEqual(one.data[0]?.embedding, fakeVector([1820, 4062, 14198], FAKE_DEFAULT_DIMENSIONS));
    const many = await client(key).embeddings.create({
      model: 'svc-embed-up',
      input: [[15339], [15339, 1917]],
      encoding_format: 'float',
    });
    assert.equal(many.data.length, 2);
    assert.deepEqual(many.data[1]?.embedding, fakeVector([15339, 1917], FAKE_DEFAULT_DIMENSIONS));
    assert.equal(many.usage.prompt_tokens, 3);
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - expectedCost(3) - expectedCost(3));
  });

  it('answers base64 (little-endian float32) that the SDK decodes by default', async () => {
    const { key } = await svc.createFundedKey(1_000_000);
    const decoded = await client(key).embeddings.create({ model: 'svc-embed-up', input: ['one', 'two'] });
    assert.equal(upstream.requests.at(-1)?.body['encoding_format'], 'float', 'svc asks the upstream for floats');
    assert.deepEqual(
      decoded.data[1]?.embedding,
      fakeVector('two', FAKE_DEFAULT_DIMENSIONS).map((v) => Math.fround(v)),
    );
    const res = await post(key, { model: 'svc-embed-up', input: 'one', encoding_format: 'base64' });
    const json = (await res.json()) as { data: { embedding: string }[] };
    // OpenAI's schema knows only the float form; the base64 one differs in that field alone.
    assert.equal(typeof json.data[0]?.embedding, 'string');
    assertSchema('CreateEmbeddingResponse', { ...json, data: json.data.map((d) => ({ ...d, embedding: [0] })) });
    const raw = Buffer.from(json.data[0]?.embedding ?? '', 'base64');
    assert.equal(raw.length, FAKE_DEFAULT_DIMENSIONS * 4);
    assert.equal(raw.readFloatLE(4), Math.fround(fakeVector('one', FAKE_DEFAULT_DIMENSIONS)[1] ?? NaN));
  });

  it('passes an offered dimensions upstream and refuses one the model does not offer', async () => {
    const { key } = await svc.createFundedKey(1_000_000);
    const result = await client(key).embeddings.create({
      model: 'svc-embed-up',
      input: 'short',
      dimensions: 4,
      encoding_format: 'float',
    });
    assert.equal(upstream.requests.at(-1)?.body['dimensions'], 4);
    assert.equal(result.data[0]?.embedding.length, 4);
    await refused({ model: 'svc-embed-up', input: 'short', dimensions: 5 }, 'dimensions');
    await refused({ model: 'svc-embed-up', input: 'short', dimensions: 0 }, 'dimensions');
  });

  it('refuses bad input with a 400 naming the field, never truncating, and charges nothing', async () => {
    await refused({ model: 'svc-embed-up', input: '' }, 'input[0]');
    await refused({ model: 'svc-embed-up', input: ['ok', ''] }, 'input[1]');
    await refused({ model: 'svc-embed-up', input: [] }, 'input');
    await refused({ model: 'svc-embed-up', input: [[1, 2], [-1]] }, 'input[1]');
    await refused({ model: 'svc-embed-up', input: [100_277] }, 'input[0]');
    await refused({ model: 'svc-embed-up', input: ['ok', 'word '.repeat(PER_INPUT + 1)] }, 'input[1]');
    await refused({ model: 'svc-embed-up', input: Array.from({ length: 2049 }, () => 'x') }, 'input');
    // One unbroken run of letters (a quadratic case for a BPE tokenizer) is refused like any other.
    await refused({ model: 'svc-embed-up', input: ['ok', 'a'.repeat(200_000)] }, 'input[1]');
    await refused({ model: 'svc-embed-up', input: [1, 'mixed'] }, 'input[0]');
    await refused({ model: 'svc-embed-up', input: 'x', encoding_format: 'int8' }, 'encoding_format');
    await refused({ model: 'svc-embed-up', input: 'x', extra: true }, 'extra');
    await refused({ model: 'svc-embed-up' }, 'input');
    await refused({ input: 'x' }, 'model');
  });

  it('refuses a chat model on the embeddings route, and an embedding model on chat and Responses (400 naming model)', async () => {
    await refused({ model: 'svc-chat', input: 'hello' }, 'model');
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const chat = await client(key)
      .chat.completions.create({ model: 'svc-embed-up', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    assert.ok(chat instanceof OpenAI.BadRequestError);
    assert.equal(chat.param, 'model');
    const responses = await client(key)
      .responses.create({ model: 'svc-embed', input: 'hi' })
      .catch((e: unknown) => e);
    assert.ok(responses instanceof OpenAI.BadRequestError);
    assert.equal(responses.param, 'model');
    const anthropic = await fetch(`${svc.baseUrl}/v1/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'svc-embed', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(anthropic.status, 400);
    const anthropicError = (await anthropic.json()) as { error: { type: string; message: string } };
    assert.equal(anthropicError.error.type, 'invalid_request_error');
    assert.match(anthropicError.error.message, /embedding model/);
    const missing = await client(key)
      .embeddings.create({ model: 'no-such-model', input: 'x' })
      .catch((e: unknown) => e);
    assert.ok(missing instanceof OpenAI.NotFoundError);
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n);
  });

  it('charges nothing when the upstream fails or refuses, and refuses a wallet that cannot cover the hold', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    upstream.failNext(500, JSON.stringify({ error: { message: 'boom', type: 'server_error' } }));
    const failed = await client(key)
      .embeddings.create({ model: 'svc-embed-up', input: 'x' })
      .catch((e: unknown) => e);
    assert.ok(failed instanceof OpenAI.APIError);
    assert.equal(failed.status, 502);
    upstream.failNext(
      400,
      JSON.stringify({ error: { message: 'bad input', type: 'invalid_request_error', param: 'input' } }),
    );
    const bad = await client(key)
      .embeddings.create({ model: 'svc-embed-up', input: 'x' })
      .catch((e: unknown) => e);
    assert.ok(bad instanceof OpenAI.BadRequestError);
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n);
    assert.equal(wallet.held, 0n);

    const poor = await svc.createFundedKey(1);
    const calls = upstream.requests.length;
    const refusedHold = await client(poor.key)
      .embeddings.create({ model: 'svc-embed-up', input: 'word '.repeat(30) })
      .catch((e: unknown) => e);
    assert.ok(refusedHold instanceof OpenAI.RateLimitError);
    assert.equal(refusedHold.code, 'insufficient_quota');
    assert.equal(upstream.requests.length, calls);
    assert.equal((await svc.wallet(poor.accountId)).balance, 1n);

    const anonymous = await fetch(`${baseURL}/embeddings`, { method: 'POST', body: '{}' });
    assert.equal(anonymous.status, 401);
  });

  it('honours Idempotency-Key: a retry returns the first vectors without a second charge', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const send = (input: string): Promise<Response> =>
      fetch(`${baseURL}/embeddings`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'idempotency-key': 'embed-once-1',
        },
        body: JSON.stringify({ model: 'svc-embed-up', input }),
      });
    const calls = upstream.requests.length;
    const first = await send('index this once');
    const again = await send('index this once');
    assert.equal(first.status, 200);
    assert.equal(again.status, 200);
    assert.deepEqual(await again.json(), await first.json());
    const cost = expectedCost(fakeTokens('index this once'));
    assert.equal(first.headers.get('x-svc-cost'), String(cost));
    assert.equal(again.headers.get('x-svc-cost'), '0');
    assert.equal(upstream.requests.length, calls + 1);
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost);
    const other = await send('another body');
    assert.equal(other.status, 409);
  });

  it('serves the sandbox embedding model offline, deterministic and labelled', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const a = await post(key, { model: 'svc-embed', input: ['the red car', 'the red car'], encoding_format: 'float' });
    assert.equal(a.status, 200);
    assert.equal(a.headers.get('x-svc-sandbox'), 'true');
    const json = (await a.json()) as { data: { embedding: number[] }[]; usage: { prompt_tokens: number } };
    assertSchema('CreateEmbeddingResponse', json);
    assert.equal(json.data[0]?.embedding.length, 16);
    assert.deepEqual(json.data[0]?.embedding, json.data[1]?.embedding);
    const norm = Math.sqrt((json.data[0]?.embedding ?? []).reduce((s, v) => s + v * v, 0));
    assert.ok(Math.abs(norm - 1) < 1e-9);
    assert.ok(json.usage.prompt_tokens > 0);
    const cost = (BigInt(json.usage.prompt_tokens) * 20_000n + 999_999n) / 1_000_000n;
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - (cost < 1n ? 1n : cost));
  });
});

describe('embeddings: the built-in configuration', function () {
  this.timeout(30_000);
  it('serves svc-embed on the sandbox with no configuration file', async () => {
    const svc = await startSvc();
    try {
      const { key } = await svc.createFundedKey(1_000_000);
      const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
      const result = await openai.embeddings.create({ model: 'svc-embed', input: 'hello' });
      assert.equal(result.data[0]?.embedding.length, 768);
      const small = await openai.embeddings.create({ model: 'svc-embed', input: 'hello', dimensions: 256 });
      assert.equal(small.data[0]?.embedding.length, 256);
    } finally {
      await svc.close();
    }
  });
});
