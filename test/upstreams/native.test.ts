import assert from 'node:assert/strict';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type TestSvc } from '../helpers/harness';

// Cache reads at a tenth, cache writes at 1.25× the input price (Anthropic's own ratios).
const PRICE = 'input_per_1m: 150000, output_per_1m: 600000, cached_input_per_1m: 15000, cache_write_per_1m: 187500';

/** The recorded sample's usage priced by SPEC §6: 21 uncached, 1800 cache reads, 188 cache writes, 120 output. */
const SAMPLE_COST = (21n * 150_000n + 1800n * 15_000n + 188n * 187_500n + 120n * 600_000n + 999_999n) / 1_000_000n;

describe('upstream routing over native upstreams (anthropic)', function () {
  this.timeout(60_000);
  let first: FakeAnthropicUpstream;
  let second: FakeAnthropicUpstream;
  let chat: FakeUpstream;
  let svc: TestSvc;

  before(async () => {
    [first, second, chat] = await Promise.all([
      startFakeAnthropicUpstream(),
      startFakeAnthropicUpstream(),
      startFakeUpstream(),
    ]);
    const anthropic = (url: string, priority: number): string => `
      - provider: anthropic
        base_url: ${url}
        api_key: ${FAKE_ANTHROPIC_KEY}
        upstream_model: claude-opus-4-8
        priority: ${priority}`;
    svc = await startSvc({
      config: `models:
  claude-routed:
    price: { ${PRICE} }
    max_output_tokens: 4000
    upstreams:${anthropic(first.baseUrl, 1)}${anthropic(second.baseUrl, 2)}
  claude-mixed:
    price: { ${PRICE} }
    max_output_tokens: 4000
    upstreams:${anthropic(first.baseUrl, 1)}
      - provider: openai
        base_url: ${chat.baseUrl}
        upstream_model: fallback-chat
        priority: 2
`,
    });
  });
  after(async () => {
    await svc?.close();
    await Promise.all([first?.close(), second?.close(), chat?.close()]);
  });

  const messages = async (key: string, model: string): Promise<Response> =>
    fetch(`${svc.baseUrl}/v1/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model, max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }], unknown_beta: 1 }),
    });

  it('passes the body through to the next anthropic upstream after a 529, charging the cache parts once', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    first.enqueue({ sample: 'anthropic/error-overloaded.json', status: 529 });
    second.enqueue({ sample: 'anthropic/message-thinking-cache.json' });
    const res = await messages(key, 'claude-routed');
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { usage: Record<string, number> };
    assert.equal(body.usage['cache_creation_input_tokens'], 188);
    assert.equal(first.requests.length, 1);
    assert.equal(second.requests.length, 1);
    // Passed through: a field svc does not know reached the upstream that answered.
    assert.equal(second.requests[0]?.body['unknown_beta'], 1);
    const wallet = await svc.wallet(accountId);
    assert.deepEqual([wallet.balance, wallet.held], [100_000n - SAMPLE_COST, 0n]);
  });

  it('a model mixing wires translates, so its openai fallback can take an Anthropic call', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    first.enqueue({ sample: 'anthropic/error-overloaded.json', status: 529 });
    const res = await messages(key, 'claude-mixed');
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { type: string; content: { text?: string }[] };
    assert.equal(body.type, 'message');
    assert.match(body.content[0]?.text ?? '', /^Hello from upstream/);
    assert.equal(chat.requests[0]?.body['model'], 'fallback-chat');
    assert.equal(chat.requests[0]?.body['unknown_beta'], undefined, 'the translation, not the raw body');
    const wallet = await svc.wallet(accountId);
    // The fake chat upstream's usage: 100 input, 50 output.
    assert.deepEqual([wallet.balance, wallet.held], [100_000n - 45n, 0n]);
  });
});
