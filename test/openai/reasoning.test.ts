import assert from 'node:assert/strict';
import type OpenAI from 'openai';
import { assertSchema } from '../helpers/openapi';
import { startOpenAiFixture, type OpenAiFixture } from './fixture';

/*
 * The upstream's reasoning on the chat-completions wire: `message.reasoning_content` and
 * `delta.reasoning_content`, as DeepSeek, vLLM and OpenRouter send them (what opencode and Cline
 * read), only when the upstream gave some; the answers still match OpenAI's published schema.
 */

type WithReasoning = { reasoning_content?: string };

describe('OpenAI API: reasoning_content on chat completions', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('not streamed: message.reasoning_content from either upstream field', async () => {
    const { key } = await fx.fund(100_000);
    for (const reasoningField of ['reasoning_content', 'reasoning'] as const) {
      fx.upstream.enqueue({ kind: 'text', text: '12,231', reasoning: '27 × 453: 27 × 400 + 27 × 53.', reasoningField });
      const completion = await fx.client(key).chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: '27 * 453?' }],
      });
      assertSchema('CreateChatCompletionResponse', completion);
      const message = completion.choices[0]?.message as OpenAI.ChatCompletionMessage & WithReasoning;
      assert.equal(message.content, '12,231');
      assert.equal(message.reasoning_content, '27 × 453: 27 × 400 + 27 × 53.', reasoningField);
    }
  });

  it('not streamed, no reasoning: no reasoning_content field at all', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'hi' });
    const completion = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal('reasoning_content' in (completion.choices[0]?.message ?? {}), false);
  });

  it('streamed: delta.reasoning_content before the content, only in the chunks that carry it', async () => {
    const { key } = await fx.fund(100_000);
    fx.upstream.enqueue({ kind: 'text', text: 'The answer is 4.', reasoning: 'Two plus two is four.' });
    const stream = await fx.client(key).chat.completions.create({
      model: 'svc-pro',
      messages: [{ role: 'user', content: '2 + 2?' }],
      stream: true,
    });
    let reasoning = '';
    let content = '';
    let contentStarted = false;
    let reasoningAfterContent = false;
    let withoutReasoning = 0;
    for await (const chunk of stream) {
      assertSchema('CreateChatCompletionStreamResponse', chunk);
      const delta = chunk.choices[0]?.delta as (OpenAI.ChatCompletionChunk.Choice.Delta & WithReasoning) | undefined;
      if (delta === undefined) continue;
      if (delta.reasoning_content !== undefined) {
        reasoning += delta.reasoning_content;
        if (contentStarted) reasoningAfterContent = true;
      } else withoutReasoning += 1;
      if (typeof delta.content === 'string' && delta.content !== '') contentStarted = true;
      content += delta.content ?? '';
    }
    assert.equal(reasoning, 'Two plus two is four.');
    assert.equal(content, 'The answer is 4.');
    assert.equal(reasoningAfterContent, false);
    assert.ok(withoutReasoning > 0, 'content chunks carry no reasoning_content');
  });
});
