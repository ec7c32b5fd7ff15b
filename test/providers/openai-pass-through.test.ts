import assert from 'node:assert/strict';
import { forwardableCompletion } from '../../core/providers/llm/openai/pass-through';

/*
 * The non-stream fast path's check (core/providers/llm/openai/pass-through.ts): where the
 * upstream's text is cut for svc's usage and which answers go to the translation instead.
 */

const choices = [
  {
    index: 0,
    message: { role: 'assistant', content: 'a "model": "b" and "usage": {}' },
    logprobs: null,
    finish_reason: 'stop',
  },
];
const head = { id: 'up-1', object: 'chat.completion', created: 1_700_000_000 };

/** The body the client gets for `text`, with `U` for svc's usage; undefined: translated. */
function forwarded(text: string): string | undefined {
  const pieces = forwardableCompletion(text, JSON.parse(text) as Record<string, unknown>, '"svc-pro"');
  return pieces === undefined ? undefined : `${pieces[0]}"U"${pieces[1]}`;
}

describe('OpenAI pass-through: which non-stream answers go back as they came', () => {
  it('writes svc’s model and usage over the top-level members only, wherever they are and however indented', () => {
    const text = JSON.stringify({ ...head, choices, usage: { prompt_tokens: 1 }, model: 'up' }, null, 2);
    assert.equal(
      forwarded(text),
      text
        .replace(/"usage": \{\n\s+"prompt_tokens": 1\n\s+\}/, '"usage": "U"')
        .replace('"model": "up"', '"model": "svc-pro"'),
    );
  });

  it('adds the usage after the last member when there was none, and replaces a null one', () => {
    const none = JSON.stringify({ ...head, model: 'up', choices }) + '\n';
    assert.equal(forwarded(none), none.replace('"up"', '"svc-pro"').replace(/}\n$/, ',"usage":"U"}\n'));
    const nulled = JSON.stringify({ ...head, model: 'up', choices, usage: null });
    assert.equal(forwarded(nulled), nulled.replace('"up"', '"svc-pro"').replace('null}', '"U"}'));
  });

  it('translates a repeated or escaped top-level model, and answers with quirks', () => {
    const rest = `"choices":${JSON.stringify(choices)}`;
    const start = `{"id":"up-1","object":"chat.completion","created":1700000000,`;
    assert.equal(forwarded(`${start}"model":"a","model":"b",${rest}}`), undefined);
    assert.equal(forwarded(`${start}"\\u006dodel":"a",${rest}}`), undefined);
    assert.equal(forwarded(`${start}"model":"a",${rest},"usage":{},"\\u0075sage":{}}`), undefined);
    const quirky = (choice: Record<string, unknown>): string =>
      JSON.stringify({ ...head, model: 'up', choices: [{ ...choices[0], ...choice }] });
    assert.equal(forwarded(quirky({ finish_reason: '' })), undefined);
    assert.equal(forwarded(quirky({ index: undefined })), undefined);
    assert.equal(forwarded(quirky({ message: { role: 'assistant', content: 'x', reasoning: 'r' } })), undefined);
    assert.equal(forwarded(quirky({ message: { role: 'assistant', content: 'x', reasoning_content: '' } })), undefined);
    assert.equal(forwarded(quirky({ message: { role: 'assistant' } })), undefined);
    assert.equal(
      forwarded(
        quirky({ message: { role: 'assistant', content: null, tool_calls: [{ id: 'c', function: { name: 'f' } }] } }),
      ),
      undefined,
    );
    assert.equal(
      forwarded(JSON.stringify({ ...head, object: 'chat.completion.chunk', model: 'up', choices })),
      undefined,
    );
    assert.equal(forwarded(JSON.stringify({ ...head, model: 'up', choices: [] })), undefined);
  });
});
