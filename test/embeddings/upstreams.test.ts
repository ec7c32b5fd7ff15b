import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { parseConfig } from '../../core/config/load';
import { startSvc, type TestSvc } from '../helpers/harness';
import { fakeTokens, startFakeEmbeddingsUpstream, type FakeEmbeddingsUpstream } from '../fakes/embeddings-upstream';

const INPUT_PER_1M = 1_000_003n;

/** SPEC §7c, computed apart from the code under test: ceil(tokens × input_per_1m / 1e6), at least 1. */
function expectedCost(tokens: number): bigint {
  const cost = (BigInt(tokens) * INPUT_PER_1M + 999_999n) / 1_000_000n;
  return cost < 1n ? 1n : cost;
}

/*
 * An embedding model with several upstreams is routed like a chat model (SPEC §4): by priority,
 * moving on after a 5xx before anything reached the client, each upstream asked for its own
 * upstream_model with its own headers, and the call held and settled once.
 */
describe('embeddings: a model with several upstreams', function () {
  this.timeout(30_000);
  let primary: FakeEmbeddingsUpstream;
  let fallback: FakeEmbeddingsUpstream;
  let svc: TestSvc;

  before(async () => {
    primary = await startFakeEmbeddingsUpstream();
    fallback = await startFakeEmbeddingsUpstream();
    svc = await startSvc({
      config: `models:
  svc-embed-ha:
    kind: embedding
    price: { input_per_1m: ${INPUT_PER_1M} }
    upstreams:
      - provider: openai
        base_url: ${primary.baseUrl}
        api_key: key-a
        upstream_model: emb-a
        headers: { X-Proxy-Route: primary }
      - provider: openai
        base_url: ${fallback.baseUrl}
        api_key: key-b
        upstream_model: emb-b
        priority: 2
  svc-chat:
    provider: sandbox
    price: { input_per_1m: 1, output_per_1m: 1 }
`,
    });
  });
  after(async () => {
    await svc.close();
    await primary.close();
    await fallback.close();
  });

  it('asks each upstream for its own model with its own headers and key', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    const before = fallback.requests.length;
    const res = await client.embeddings.create({ model: 'svc-embed-ha', input: 'one two', encoding_format: 'float' });
    assert.equal(res.model, 'svc-embed-ha');
    const seen = primary.requests.at(-1);
    assert.equal(seen?.body['model'], 'emb-a');
    assert.equal(seen?.authorization, 'Bearer key-a');
    assert.equal(seen?.headers['x-proxy-route'], 'primary');
    assert.equal(fallback.requests.length, before, 'the second priority is not asked while the first answers');
    assert.equal((await svc.wallet(accountId)).balance, 1_000_000n - expectedCost(fakeTokens('one two')));
  });

  it('moves on to the next priority after a 5xx, and charges once from the answering upstream', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    primary.failNext(503, JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } }));
    const tried = primary.requests.length;
    // Inputs whose bytes cover the fake's token count (3 + words): a charge is never above the hold.
    const res = await client.embeddings.create({ model: 'svc-embed-ha', input: ['alpha beta gamma', 'delta'] });
    assert.equal(res.data.length, 2);
    assert.equal(primary.requests.length, tried + 1);
    const seen = fallback.requests.at(-1);
    assert.equal(seen?.body['model'], 'emb-b');
    assert.equal(seen?.authorization, 'Bearer key-b');
    assert.equal(seen?.headers['x-proxy-route'], undefined);
    const tokens = fakeTokens('alpha beta gamma') + fakeTokens('delta');
    assert.equal(res.usage.prompt_tokens, tokens);
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n - expectedCost(tokens));
    assert.equal(wallet.held, 0n);
  });

  it('does not move on after the upstream refuses the request itself (a 400), and charges nothing', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    primary.failNext(400, JSON.stringify({ error: { message: 'bad input', type: 'invalid_request_error' } }));
    const asked = fallback.requests.length;
    const refused = await client.embeddings.create({ model: 'svc-embed-ha', input: 'x' }).catch((e: unknown) => e);
    assert.ok(refused instanceof OpenAI.BadRequestError);
    assert.equal(fallback.requests.length, asked);
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, 1_000_000n);
    assert.equal(wallet.held, 0n);
  });

  it('refuses at start an embedding upstream whose provider has no embeddings API', () => {
    assert.throws(
      () =>
        parseConfig(
          'models:\n  e:\n    kind: embedding\n    price: { input_per_1m: 1 }\n    upstreams:\n      - provider: sandbox\n      - provider: anthropic\n        base_url: https://a.example\n        upstream_model: m\n',
          {},
          't',
        ),
      {
        message:
          "config models.e.upstreams.1.provider: anthropic serves no embeddings (an embedding model's upstreams are openai, gemini, sandbox)",
      },
    );
  });
});
