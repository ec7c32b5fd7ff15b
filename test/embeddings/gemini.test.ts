import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError, GoogleGenAI } from '@google/genai';
import Koa from 'koa';
import pino from 'pino';
import { createGeminiEmbeddings, isGeminiEmbeddingMethod } from '../../adapters/gemini/embeddings';
import { requestIdMiddleware } from '../../adapters/http/request';
import { startSvc, type TestSvc } from '../helpers/harness';
import {
  FAKE_DEFAULT_DIMENSIONS,
  fakeTokens,
  fakeVector,
  startFakeEmbeddingsUpstream,
  type FakeEmbeddingsUpstream,
} from '../fakes/embeddings-upstream';

const INPUT_PER_1M = 1_234_567n;

function expectedCost(tokens: number): bigint {
  const cost = (BigInt(tokens) * INPUT_PER_1M + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

/**
 * The Gemini embedding routes mounted as the Gemini adapter mounts them, at
 * /v1/gemini/{v1beta,v1}/models/{model}:{method}, over the running core.
 */
async function mountGeminiRoutes(svc: TestSvc): Promise<{ url: string; close(): Promise<void> }> {
  const routes = createGeminiEmbeddings({
    core: svc.connection.clients,
    logger: pino({ level: 'silent' }),
    maxBodyBytes: 1_048_576,
  });
  const app = new Koa();
  app.use(requestIdMiddleware);
  app.use(async (ctx) => {
    const match = /^\/v1\/gemini\/(?:v1beta|v1)\/models\/([^:/]+):(\w+)$/.exec(ctx.path);
    if (ctx.method === 'POST' && match !== null && isGeminiEmbeddingMethod(match[2] ?? ''))
      return routes.handle(ctx, decodeURIComponent(match[1] ?? ''), match[2] as 'embedContent');
    ctx.status = 404;
  });
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/gemini`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('embeddings: Gemini embedContent and batchEmbedContents', function () {
  this.timeout(30_000);
  let upstream: FakeEmbeddingsUpstream;
  let svc: TestSvc;
  let gemini: { url: string; close(): Promise<void> };

  before(async () => {
    upstream = await startFakeEmbeddingsUpstream();
    svc = await startSvc({
      config: `models:
  svc-embed-up:
    provider: openai
    kind: embedding
    base_url: ${upstream.baseUrl}
    upstream_model: fake-embed-1
    dimensions: [${FAKE_DEFAULT_DIMENSIONS}, 4]
    context_window: 40
    price: { input_per_1m: ${INPUT_PER_1M} }
  svc-chat:
    provider: sandbox
    price: { input_per_1m: 150000, output_per_1m: 600000 }
`,
    });
    gemini = await mountGeminiRoutes(svc);
  });
  after(async () => {
    await gemini.close();
    await svc.close();
    await upstream.close();
  });

  const sdk = (key: string): GoogleGenAI => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: gemini.url } });

  async function post(key: string, path: string, body: unknown): Promise<Response> {
    return fetch(`${gemini.url}/v1beta/models/${path}`, {
      method: 'POST',
      headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  it('serves @google/genai models.embedContent with the upstream vectors, charged exactly', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const texts = ['What is the meaning of life?', 'How does the brain work?'];
    const result = await sdk(key).models.embedContent({ model: 'svc-embed-up', contents: texts });
    assert.deepEqual(
      result.embeddings?.map((e) => e.values),
      texts.map((t) => fakeVector(t, FAKE_DEFAULT_DIMENSIONS)),
    );
    const tokens = texts.reduce((s, t) => s + fakeTokens(t), 0);
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - expectedCost(tokens));

    await sdk(key).models.embedContent({
      model: 'svc-embed-up',
      contents: 'short',
      config: { outputDimensionality: 4, taskType: 'RETRIEVAL_DOCUMENT' },
    });
    assert.equal(upstream.requests.at(-1)?.body['dimensions'], 4);
  });

  it('answers :embedContent as {embedding}, with x-svc-cost and x-svc-balance, the key also as ?key=', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const res = await fetch(`${gemini.url}/v1/models/svc-embed-up:embedContent?key=${key}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ content: { parts: [{ text: 'hello' }, { text: 'world' }] } }),
    });
    assert.equal(res.status, 200);
    const json = (await res.json()) as { embedding: { values: number[] } };
    assert.deepEqual(json.embedding.values, fakeVector('hello\nworld', FAKE_DEFAULT_DIMENSIONS));
    const cost = expectedCost(fakeTokens('hello\nworld'));
    assert.equal(res.headers.get('x-svc-cost'), String(cost));
    assert.equal(res.headers.get('x-svc-balance'), String(1_000_000n - cost));
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - cost);
  });

  it("answers each bad request with Google's error and status, naming the field, and charges nothing", async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const calls = upstream.requests.length;
    const error = async (
      path: string,
      body: unknown,
      k = key,
    ): Promise<{
      status: number;
      json: {
        error: {
          code: number;
          status: string;
          message: string;
          details: { reason?: string; fieldViolations?: { field: string }[] }[];
        };
      };
    }> => {
      const res = await post(k, path, body);
      return { status: res.status, json: (await res.json()) as never };
    };
    const batch = (content: unknown, extra: object = {}): unknown => ({
      requests: [{ model: 'models/svc-embed-up', content, ...extra }],
    });
    const empty = await error('svc-embed-up:batchEmbedContents', batch({ parts: [{ text: '' }] }));
    assert.equal(empty.status, 400);
    assert.equal(empty.json.error.status, 'INVALID_ARGUMENT');
    assert.equal(empty.json.error.details.at(-1)?.fieldViolations?.[0]?.field, 'requests[0].content');
    const long = await error('svc-embed-up:embedContent', { content: { parts: [{ text: 'word '.repeat(41) }] } });
    assert.equal(long.status, 400);
    assert.match(long.json.error.message, /'content'/);
    const dims = await error(
      'svc-embed-up:batchEmbedContents',
      batch({ parts: [{ text: 'x' }] }, { outputDimensionality: 3 }),
    );
    assert.equal(dims.status, 400);
    const image = await error('svc-embed-up:embedContent', {
      content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'AA==' } }] },
    });
    assert.equal(image.status, 400);
    assert.equal(image.json.error.details.at(-1)?.fieldViolations?.[0]?.field, 'content.parts[0]');
    const chat = await error('svc-chat:embedContent', { content: { parts: [{ text: 'x' }] } });
    assert.equal(chat.status, 400);
    assert.equal(chat.json.error.details.at(-1)?.fieldViolations?.[0]?.field, 'model');
    const missing = await error('nope:embedContent', { content: { parts: [{ text: 'x' }] } });
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.status, 'NOT_FOUND');
    const badKey = await error('svc-embed-up:embedContent', { content: { parts: [{ text: 'x' }] } }, 'svc_sk_nope');
    assert.equal(badKey.status, 400);
    assert.equal(badKey.json.error.details[0]?.reason, 'API_KEY_INVALID');
    assert.equal(upstream.requests.length, calls);
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n);

    const poor = await svc.createFundedKey(0);
    const broke = await sdk(poor.key)
      .models.embedContent({ model: 'svc-embed-up', contents: 'hello' })
      .catch((e: unknown) => e);
    assert.ok(broke instanceof ApiError);
    assert.equal(broke.status, 429);
    assert.match(broke.message, /RESOURCE_EXHAUSTED/);
    const sdkBad = await sdk('svc_sk_invalid')
      .models.embedContent({ model: 'svc-embed-up', contents: 'hello' })
      .catch((e: unknown) => e);
    assert.ok(sdkBad instanceof ApiError);
    assert.equal(sdkBad.status, 400);
    assert.equal(upstream.requests.length, calls);
  });
});
