import assert from 'node:assert/strict';
import { ClientError, Metadata, Status } from 'nice-grpc';
import { TEST_ADMIN_TOKEN } from '../helpers/harness';
import { post, toolCall } from '../mcp/helpers';
import { startOpenAiFixture, type OpenAiFixture } from '../openai/fixture';

/*
 * Calls in flight per key and per account (issue 48 point 1, SPEC §4 `limits.concurrent_per_*`):
 * refused before any hold with each wire's rate-limit answer and a retry hint, and each slot given
 * back exactly once when its call ends, however it ends.
 */

const PER_KEY = 2;
const PER_ACCOUNT = 3;

async function until<T>(read: () => Promise<T> | T, ok: (value: T) => boolean): Promise<T> {
  for (let i = 0; i < 500; i += 1) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('condition never became true');
}

const chatBody = (stream: boolean): string =>
  JSON.stringify({ model: 'svc-pro', messages: [{ role: 'user', content: 'count slowly' }], stream });

/** A streamed chat call whose upstream sends two words and then nothing; resolves once its client has the first. */
async function openStream(fx: OpenAiFixture, key: string): Promise<{ leave(): Promise<void> }> {
  fx.upstream.enqueue({ kind: 'stall', afterPieces: 2 });
  const controller = new AbortController();
  const response = await fetch(`${fx.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: chatBody(true),
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  const reader = response.body!.getReader();
  await reader.read();
  return {
    async leave() {
      controller.abort();
      await reader.cancel().catch(() => undefined);
    },
  };
}

interface Refusal {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, unknown>;
}

async function refusal(url: string, init: RequestInit): Promise<Refusal> {
  const response = await fetch(url, init);
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as Record<string, unknown>,
  };
}

describe('Calls in flight per key and per account', function () {
  this.timeout(60_000);
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({
      extraConfig: `limits:\n  concurrent_per_key: ${PER_KEY}\n  concurrent_per_account: ${PER_ACCOUNT}\n`,
    });
  });
  after(async () => {
    await fx?.close();
  });
  beforeEach(() => fx.upstream.reset());

  it("refuses a key's call past its limit on every wire, holds nothing for it, and admits again once a call ends", async () => {
    const { key, accountId } = await fx.fund(100_000);
    const open = [await openStream(fx, key), await openStream(fx, key)];
    const heldBefore = (await fx.svc.wallet(accountId)).held;
    const requestsBefore = fx.upstream.requests.length;

    // OpenAI chat completions and Responses: 429 rate_limit_exceeded with retry-after.
    const chat = await refusal(`${fx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: chatBody(false),
    });
    assert.equal(chat.status, 429);
    assert.equal(chat.headers.get('retry-after'), '1');
    const chatError = chat.body['error'] as Record<string, unknown>;
    assert.equal(chatError['code'], 'rate_limit_exceeded');
    assert.match(String(chatError['message']), /in flight.*2 at once/);

    const responses = await refusal(`${fx.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', input: 'hi' }),
    });
    assert.equal(responses.status, 429);
    assert.equal((responses.body['error'] as Record<string, unknown>)['code'], 'rate_limit_exceeded');

    const embeddings = await refusal(`${fx.baseURL}/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-embed', input: 'hi' }),
    });
    assert.equal(embeddings.status, 429, JSON.stringify(embeddings.body));

    // Anthropic: 429 rate_limit_error with retry-after.
    const anthropic = await refusal(`${fx.svc.baseUrl}/v1/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(anthropic.status, 429);
    assert.equal(anthropic.headers.get('retry-after'), '1');
    assert.equal((anthropic.body['error'] as Record<string, unknown>)['type'], 'rate_limit_error');

    // Gemini: 429 RESOURCE_EXHAUSTED with RetryInfo.
    const gemini = await refusal(`${fx.svc.baseUrl}/v1/gemini/v1beta/models/svc-pro:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    assert.equal(gemini.status, 429);
    const geminiError = gemini.body['error'] as Record<string, unknown>;
    assert.equal(geminiError['status'], 'RESOURCE_EXHAUSTED');
    const details = geminiError['details'] as Record<string, unknown>[];
    assert.ok(
      details.some((d) => d['@type'] === 'type.googleapis.com/google.rpc.RetryInfo' && d['retryDelay'] === '1s'),
    );

    // MCP: a tool call counts too, refused as a JSON-RPC error that says to retry.
    const mcp = await post(fx.svc.baseUrl, toolCall('maps_search_places', { query: 'cafe' }), {
      authorization: `Bearer ${key}`,
    });
    assert.equal(mcp.status, 429);
    assert.equal(mcp.headers.get('retry-after'), '1');
    const mcpError = mcp.message?.['error'] as Record<string, unknown>;
    assert.equal(mcpError['code'], -32029);
    assert.match(String(mcpError['message']), /Retry when one of them has finished/);

    // Nothing was held for, or sent upstream by, any refused call.
    assert.equal((await fx.svc.wallet(accountId)).held, heldBefore);
    assert.equal(fx.upstream.requests.length, requestsBefore);

    // A client that leaves gives its slot back: the next call is admitted.
    await open[0]!.leave();
    const admitted = await until(
      async () => {
        fx.upstream.enqueue({ kind: 'text', text: 'ok' });
        const response = await fetch(`${fx.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: chatBody(false),
        });
        await response.arrayBuffer();
        if (response.status !== 200) fx.upstream.reset();
        return response.status;
      },
      (status) => status === 200,
    );
    assert.equal(admitted, 200);
    await open[1]!.leave();
  });

  it("counts every key of an account against the account's limit", async () => {
    const first = await fx.fund(100_000);
    const { secret: second } = await fx.svc.core.keys.create({ accountId: first.accountId, name: 'second' });
    const open = [await openStream(fx, first.key), await openStream(fx, first.key), await openStream(fx, second)];
    // The second key has one call in flight (below its own limit of 2), but the account has 3.
    const refused = await refusal(`${fx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${second}`, 'content-type': 'application/json' },
      body: chatBody(false),
    });
    assert.equal(refused.status, 429);
    assert.match(String((refused.body['error'] as Record<string, unknown>)['message']), /account may run 3 at once/);
    for (const stream of open) await stream.leave();
  });

  it('gives every slot back exactly once, whatever ended the call', async () => {
    const { key, keyId, accountId } = await fx.fund(100_000);
    const holder = { keyId, accountId };
    // Success, an upstream error, a refused request (validation), a stream left mid-way.
    fx.upstream.enqueue({ kind: 'text', text: 'ok' });
    fx.upstream.enqueue({ kind: 'http_error', status: 500 });
    for (const body of [chatBody(false), chatBody(false), JSON.stringify({ model: 'svc-pro', messages: 'x' })]) {
      const response = await fetch(`${fx.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
      });
      await response.arrayBuffer();
    }
    const stream = await openStream(fx, key);
    assert.deepEqual(await fx.svc.core.concurrency.inFlight(holder), { key: 1, account: 1 });
    await stream.leave();
    await until(
      () => fx.svc.core.concurrency.inFlight(holder),
      (n) => n.key === 0 && n.account === 0,
    );
    await fx.settled(accountId);
  });

  it("applies a key's own limit (svc key create/update, the operator's KeyService) over the configured one", async () => {
    const { accountId } = await fx.fund(100_000);
    const keys = fx.svc.connection.clients.keys;
    const operator = { metadata: new Metadata({ authorization: `Bearer ${TEST_ADMIN_TOKEN}` }) };
    const { key: created, secret } = await keys.createKey(
      { accountId, name: 'one at a time', scope: '', concurrentLimit: 1 },
      operator,
    );
    assert.equal(created?.concurrentLimit, 1);
    const first = await openStream(fx, secret);
    const refused = await refusal(`${fx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: chatBody(false),
    });
    assert.equal(refused.status, 429);
    assert.match(String((refused.body['error'] as Record<string, unknown>)['message']), /may run 1 at once/);

    // Back to the configured limit (2): a second call is admitted at once.
    const { key: updated } = await keys.updateKey(
      { keyId: created!.id, removeExpiry: false, removeConcurrentLimit: true },
      operator,
    );
    assert.equal(updated?.concurrentLimit, undefined);
    const second = await openStream(fx, secret);
    await first.leave();
    await second.leave();
  });

  it("refuses a key that tries to set its own limit (the operator's only)", async () => {
    const { key } = await fx.fund(100_000);
    const keys = fx.svc.connection.clients.keys;
    const asKey = { metadata: new Metadata({ authorization: `Bearer ${key}` }) };
    const own = (await keys.listKeys({ accountId: '' }, asKey)).keys[0]!;
    await assert.rejects(
      keys.updateKey(
        { keyId: own.id, removeExpiry: false, concurrentLimit: 1000, removeConcurrentLimit: false },
        asKey,
      ),
      (error: unknown) => error instanceof ClientError && error.code === Status.PERMISSION_DENIED,
    );
    assert.equal((await fx.svc.core.keys.get(own.id)).concurrentLimit, null);
  });
});
