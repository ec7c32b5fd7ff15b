import assert from 'node:assert/strict';
import { DEFAULT_USAGE } from '../fakes/openai-upstream';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

async function post(fx: OpenAiFixture, path: string, key: string, body: unknown): Promise<Response> {
  return fetch(`${fx.baseURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe('OpenAI API: fidelity (nothing charged unseen, nothing dropped silently)', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  describe('the cost of a stream', () => {
    it('ends a chat stream without include_usage with a cost comment before [DONE]', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const response = await post(fx, '/chat/completions', key, {
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      });
      assert.equal(response.status, 200);
      const text = await response.text();
      const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
      const { balance } = await fx.settled(accountId);
      assert.equal(balance, 100_000n - cost);
      assert.match(text, new RegExp(`\\n: svc-cost ${cost} balance ${balance}\\n\\ndata: \\[DONE\\]\\n\\n$`));
    });

    it('ends a Responses stream with the same cost comment', async () => {
      const { key, accountId } = await fx.fund(100_000);
      const response = await post(fx, '/responses', key, { model: 'svc-pro', input: 'hi', stream: true });
      assert.equal(response.status, 200);
      const text = await response.text();
      const cost = expectedCost(DEFAULT_USAGE.prompt_tokens, DEFAULT_USAGE.completion_tokens);
      const { balance } = await fx.settled(accountId);
      assert.match(
        text,
        new RegExp(`event: response.completed\\ndata: .*\\n\\n: svc-cost ${cost} balance ${balance}\\n\\n$`),
      );
    });
  });
});
