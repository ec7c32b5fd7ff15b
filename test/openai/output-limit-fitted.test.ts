import assert from 'node:assert/strict';
import { startAnthropicFixture, type AnthropicFixture } from '../anthropic/fixture';
import { expectedCost, MAX_OUTPUT } from './fixture';

type Obj = Record<string, unknown>;

/**
 * SPEC §7d: an output limit above the model's maximum is fitted, not refused, on every wire.
 * The upstream gets the model's maximum, the hold covers that (not the client's number), and the
 * response says so in `x-svc-fitted: <field>=<requested>-><sent>`, a stream at its start.
 * Qwen Code sends `max_tokens: 32000` for every model it does not know.
 */
describe('an output limit above the model maximum is fitted (SPEC §7d)', () => {
  let fx: AnthropicFixture;

  before(async () => {
    fx = await startAnthropicFixture();
  });
  after(async () => {
    await fx?.close();
  });
  beforeEach(() => fx.upstream.reset());

  async function post(path: string, key: string, body: Obj, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${fx.svc.baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  }

  const cases: {
    name: string;
    path: string;
    body: Obj;
    header: string;
    /** The limit as it reached the (chat) upstream. */
    sent: (upstream: Obj) => unknown;
    stream?: boolean;
  }[] = [
    {
      name: 'OpenAI chat max_tokens (what Qwen Code sends)',
      path: '/v1/openai/chat/completions',
      body: { model: 'svc-pro', max_tokens: 32000, messages: [{ role: 'user', content: 'hi' }] },
      header: `max_tokens=32000->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
    },
    {
      name: 'OpenAI chat max_tokens, streamed',
      path: '/v1/openai/chat/completions',
      body: { model: 'svc-pro', max_tokens: 32000, stream: true, messages: [{ role: 'user', content: 'hi' }] },
      header: `max_tokens=32000->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
      stream: true,
    },
    {
      name: 'OpenAI chat max_completion_tokens',
      path: '/v1/openai/chat/completions',
      body: { model: 'svc-pro', max_completion_tokens: 1001, messages: [{ role: 'user', content: 'hi' }] },
      header: `max_completion_tokens=1001->${MAX_OUTPUT}`,
      sent: (u) => u['max_completion_tokens'],
    },
    {
      name: 'Responses max_output_tokens',
      path: '/v1/openai/responses',
      body: { model: 'svc-pro', max_output_tokens: 50000, input: 'hi' },
      header: `max_output_tokens=50000->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
    },
    {
      name: 'Responses max_output_tokens, streamed',
      path: '/v1/openai/responses',
      body: { model: 'svc-pro', max_output_tokens: 50000, input: 'hi', stream: true },
      header: `max_output_tokens=50000->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
      stream: true,
    },
    {
      name: 'Anthropic max_tokens',
      path: '/v1/anthropic/v1/messages',
      body: { model: 'svc-pro', max_tokens: 32000, messages: [{ role: 'user', content: 'hi' }] },
      header: `max_tokens=32000->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
    },
    {
      name: 'Anthropic max_tokens, streamed',
      path: '/v1/anthropic/v1/messages',
      body: { model: 'svc-pro', max_tokens: 32000, stream: true, messages: [{ role: 'user', content: 'hi' }] },
      header: `max_tokens=32000->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
      stream: true,
    },
    {
      name: 'Gemini generationConfig.maxOutputTokens',
      path: '/v1/gemini/v1beta/models/svc-pro:generateContent',
      body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { maxOutputTokens: 65536 } },
      header: `maxOutputTokens=65536->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
    },
    {
      name: 'Gemini maxOutputTokens, streamed',
      path: '/v1/gemini/v1beta/models/svc-pro:streamGenerateContent?alt=sse',
      body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { maxOutputTokens: 65536 } },
      header: `maxOutputTokens=65536->${MAX_OUTPUT}`,
      sent: (u) => u['max_tokens'],
      stream: true,
    },
  ];

  for (const c of cases) {
    it(`${c.name}: the model maximum goes upstream, said in x-svc-fitted`, async () => {
      const { key, accountId } = await fx.fund(100_000);
      const response = await post(
        c.path,
        key,
        c.body,
        c.path.includes('/anthropic/') ? { 'anthropic-version': '2023-06-01' } : {},
      );
      assert.equal(response.status, 200, await response.clone().text());
      assert.equal(response.headers.get('x-svc-fitted'), c.header);
      if (c.stream === true) assert.match(response.headers.get('content-type') ?? '', /text\/event-stream/);
      await response.text();
      const upstream = fx.upstream.requests[0]?.body;
      assert.ok(upstream);
      assert.equal(c.sent(upstream), MAX_OUTPUT);
      // The fake's default usage (100 prompt, 50 completion tokens) is what is charged.
      assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(100, 50));
    });
  }

  it('the hold counts the model maximum, not the number asked for: a wallet too small for 32000 tokens is served', async () => {
    // 32000 output tokens cost ceil(32000 × 600000 / 1e6) = 19200 credits; 1000 cost 600.
    const { key } = await fx.fund(2_000);
    const response = await post('/v1/openai/chat/completions', key, {
      model: 'svc-pro',
      max_tokens: 32000,
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get('x-svc-fitted'), `max_tokens=32000->${MAX_OUTPUT}`);
  });

  it('says nothing at or below the maximum, and still refuses max_output_tokens below 16', async () => {
    const { key } = await fx.fund(100_000);
    const at = await post('/v1/openai/chat/completions', key, {
      model: 'svc-pro',
      max_tokens: MAX_OUTPUT,
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(at.status, 200);
    assert.equal(at.headers.get('x-svc-fitted'), null);
    const below = await post('/v1/openai/responses', key, { model: 'svc-pro', max_output_tokens: 15, input: 'hi' });
    assert.equal(below.status, 400);
    assert.equal(((await below.json()) as { error: Obj }).error['param'], 'max_output_tokens');
  });

  it('the header is readable from a browser page (CORS)', async () => {
    const { key } = await fx.fund(100_000);
    const response = await post(
      '/v1/openai/chat/completions',
      key,
      { model: 'svc-pro', max_tokens: 32000, messages: [{ role: 'user', content: 'hi' }] },
      { origin: 'http://localhost:3000' },
    );
    await response.text();
    assert.match(response.headers.get('access-control-expose-headers') ?? '', /x-svc-fitted/);
  });
});
