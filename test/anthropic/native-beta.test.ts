import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import {
  FAKE_ANTHROPIC_KEY,
  startFakeAnthropicUpstream,
  type FakeAnthropicUpstream,
} from '../fakes/anthropic-upstream';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M } from '../openai/fixture';
import { startAnthropicFixture, type AnthropicFixture } from './fixture';

/*
 * On the native pass-through path to an `anthropic` upstream, the client's `anthropic-beta`
 * header goes along as the client wrote it (less the betas svc withholds, named in
 * `x-svc-ignored-fields`: adapters/anthropic/beta.ts) and `top_k` reaches the upstream; a
 * translated model refuses `top_k` (no chat upstream has it) and the betas that change the
 * answer's shape, and names the others in `x-svc-ignored-fields` (SPEC §13).
 */

describe('anthropic-beta and top_k on the native pass-through (/v1/anthropic)', function () {
  this.timeout(30_000);
  let up: FakeAnthropicUpstream;
  let fx: AnthropicFixture;

  before(async () => {
    up = await startFakeAnthropicUpstream();
    fx = await startAnthropicFixture({
      extraModels: () => `
  svc-claude:
    provider: anthropic
    base_url: ${up.baseUrl}
    api_key: ${FAKE_ANTHROPIC_KEY}
    upstream_model: claude-opus-4-8
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 200000
    max_output_tokens: 4000
`,
    });
  });
  after(async () => {
    await fx?.close();
    await up?.close();
  });

  const betas = 'claude-code-20250219, interleaved-thinking-2025-05-14,context-1m-2025-08-07,files-api-2025-04-14';

  it('not streamed: the betas go, less the withheld ones (named); top_k reaches the upstream', async () => {
    const { key, accountId } = await fx.fund(100_000);
    up.enqueue({ sample: 'anthropic/message-thinking-cache.json' });
    const raw = await fx
      .anthropic(key, { defaultHeaders: { 'anthropic-beta': betas } })
      .messages.create({
        model: 'svc-claude',
        max_tokens: 100,
        // A long system prompt, as Claude Code sends (the sample reads 1,800 of it from the cache):
        // the hold covers the prompt, and a charge is never above the hold.
        system: 'You are a careful calculator. '.repeat(400),
        messages: [{ role: 'user', content: 'What is 27 * 453?' }],
        ...({ top_k: 5 } as object),
      })
      .withResponse();
    const message = raw.data;
    assert.equal(
      raw.response.headers.get('x-svc-ignored-fields'),
      'anthropic-beta:context-1m-2025-08-07, anthropic-beta:files-api-2025-04-14',
    );
    assert.equal(message.model, 'svc-claude');
    const seen = up.requests.at(-1);
    assert.equal(seen?.body['top_k'], 5);
    assert.equal(seen?.headers['anthropic-beta'], 'claude-code-20250219,interleaved-thinking-2025-05-14');
    assert.equal((await fx.settled(accountId)).balance, 100_000n - expectedCost(21 + 1800 + 188, 120));
  });

  it('streamed (the fast path): the header as the client wrote it, unknown betas included, and top_k reach the upstream', async () => {
    const { key } = await fx.fund(100_000);
    // Claude Code's list, with betas svc has never heard of (compaction, a made-up future one).
    const sent = 'claude-code-20250219, interleaved-thinking-2025-05-14, compact-2026-09-04, brand-new-beta-2027-01-01';
    for (const fastPath of ['1', '0']) {
      up.enqueue({ sample: 'anthropic/stream-basic.sse' });
      const previous = process.env['SVC_FAST_PATH'];
      process.env['SVC_FAST_PATH'] = fastPath;
      try {
        const response = await fetch(`${fx.anthropicURL}/v1/messages?beta=true`, {
          method: 'POST',
          headers: {
            'x-api-key': key,
            'anthropic-version': '2023-06-01',
            'anthropic-beta': sent,
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            model: 'svc-claude',
            max_tokens: 100,
            top_k: 1,
            stream: true,
            messages: [{ role: 'user', content: 'hi' }],
          }),
        });
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('x-svc-ignored-fields'), null);
        assert.match(await response.text(), /message_stop/);
      } finally {
        if (previous === undefined) delete process.env['SVC_FAST_PATH'];
        else process.env['SVC_FAST_PATH'] = previous;
      }
      const seen = up.requests.at(-1);
      assert.equal(seen?.body['top_k'], 1);
      assert.equal(seen?.headers['anthropic-beta'], sent, `fast path ${fastPath}`);
    }
  });

  it('on a translated model: a beta that changes the shape of the answer is a 400 naming it; the others are named as ignored', async () => {
    const { key, accountId } = await fx.fund(100_000);
    for (const stream of [false, true]) {
      await assert.rejects(
        fx
          .anthropic(key, {
            defaultHeaders: { 'anthropic-beta': 'claude-code-20250219,structured-outputs-2025-11-13' },
          })
          .messages.create({
            model: 'svc-pro',
            max_tokens: 10,
            stream,
            messages: [{ role: 'user', content: 'hi' }],
          } as Anthropic.MessageCreateParamsNonStreaming),
        (e: unknown) =>
          e instanceof Anthropic.BadRequestError &&
          e.error !== undefined &&
          /anthropic-beta:structured-outputs-2025-11-13/.test(e.message),
      );
    }
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal((await fx.settled(accountId)).balance, 100_000n);
    for (const stream of [false, true]) {
      const response = await fetch(`${fx.anthropicURL}/v1/messages`, {
        method: 'POST',
        headers: {
          'x-api-key': key,
          'anthropic-version': '2023-06-01',
          'anthropic-beta': 'claude-code-20250219,context-management-2025-06-27',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ model: 'svc-pro', max_tokens: 10, stream, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(response.status, 200);
      await response.text();
      assert.equal(
        response.headers.get('x-svc-ignored-fields'),
        'anthropic-beta:claude-code-20250219, anthropic-beta:context-management-2025-06-27',
      );
      assert.equal(fx.upstream.requests.at(-1)?.headers['anthropic-beta'], undefined);
    }
    fx.upstream.reset();
  });

  it('only withheld betas from the client: no anthropic-beta header upstream', async () => {
    const { key } = await fx.fund(100_000);
    up.enqueue({ sample: 'anthropic/message-thinking-cache.json' });
    await fx
      .anthropic(key, { defaultHeaders: { 'anthropic-beta': 'oauth-2025-04-20,mcp-client-2025-04-04' } })
      .messages.create({ model: 'svc-claude', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(up.requests.at(-1)?.headers['anthropic-beta'], undefined);
  });

  it('top_k on a translated model: 400 naming top_k, nothing charged; count_tokens takes it', async () => {
    const { key, accountId } = await fx.fund(100_000);
    for (const stream of [false, true]) {
      await assert.rejects(
        fx.anthropic(key).messages.create({
          model: 'svc-pro',
          max_tokens: 10,
          top_k: 5,
          stream,
          messages: [{ role: 'user', content: 'hi' }],
        } as Anthropic.MessageCreateParamsNonStreaming),
        (e: unknown) => e instanceof Anthropic.BadRequestError && /top_k/.test(e.message),
      );
    }
    await assert.rejects(
      fx.anthropic(key).messages.create({
        model: 'svc-claude',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
        ...({ top_k: -1 } as object),
      }),
      (e: unknown) => e instanceof Anthropic.BadRequestError && /top_k/.test(e.message),
    );
    const counted = await fx.anthropic(key).messages.countTokens({
      model: 'svc-pro',
      top_k: 5,
      messages: [{ role: 'user', content: 'hi' }],
    } as Anthropic.MessageCountTokensParams);
    assert.ok(counted.input_tokens > 0);
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal((await fx.settled(accountId)).balance, 100_000n);
  });
});
