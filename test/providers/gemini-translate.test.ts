import assert from 'node:assert/strict';
import { isSvcError } from '../../core/errors';
import { toGenerateContent } from '../../core/providers/llm/gemini/request';
import { choiceOf, readAnswer, usageOf } from '../../core/providers/llm/gemini/response';
import { geminiStatusError } from '../../core/providers/llm/gemini/errors';
import type { WireChatRequest } from '../../core/providers/llm/types';
import { geminiSample, geminiSampleText } from '../fakes/gemini-upstream';

const who = { host: 'gemini.example:443', apiKey: 'key1234', upstreamModel: 'gemini-5.0-flash', modelId: 'svc-gem' };

function refusal(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    assert.ok(isSvcError(error));
    assert.equal(error.code, 'invalid_argument');
    return error.param;
  }
  assert.fail('expected a refusal');
}

describe('gemini translation (alone, against the recorded samples)', () => {
  it('reads the recorded answers: thoughts, function calls, usage with thoughts as output', () => {
    const thinking = readAnswer(geminiSample('generate-content-thinking.json'));
    assert.ok(thinking?.candidates[0]);
    const choice = choiceOf(thinking.candidates[0]);
    assert.equal(choice.message.content, 'Mountain View');
    assert.match(choice.message.reasoning_content ?? '', /^\*\*Thinking About/);
    assert.deepEqual(thinking.usage, {
      prompt_tokens: 14,
      completion_tokens: 26,
      total_tokens: 40,
      completion_tokens_details: { reasoning_tokens: 24 },
    });
    const call = readAnswer(geminiSample('function-call.json'));
    assert.ok(call?.candidates[0]);
    const toolChoice = choiceOf(call.candidates[0]);
    assert.equal(toolChoice.finish_reason, 'tool_calls');
    assert.equal(toolChoice.message.content, null);
    assert.equal(toolChoice.message.tool_calls?.[0]?.function.name, 'customDivide');
    assert.equal(
      usageOf({ promptTokenCount: 100, cachedContentTokenCount: 60, candidatesTokenCount: 5 })?.prompt_tokens_details
        ?.cached_tokens,
      60,
    );
    const frames = geminiSampleText('stream-generate-content.sse.txt')
      .split('\r\n\r\n')
      .filter(Boolean)
      .map((f) => readAnswer(JSON.parse(f.replace(/^data: /, ''))));
    assert.equal(frames.at(-1)?.candidates[0]?.finishReason, 'STOP');
    assert.equal(frames.at(-1)?.usage?.completion_tokens, 10);
  });

  it('writes a chat request as generateContent: system, turns, tools, config', () => {
    const request: WireChatRequest = {
      model: 'gemini-2.5-flash',
      messages: [
        { role: 'developer', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Two sums' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBO' } },
          ],
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'a', type: 'function', function: { name: 'add', arguments: '{"x":1}' } },
            { id: 'b', type: 'function', function: { name: 'add', arguments: '{"x":2}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'a', content: '1' },
        { role: 'tool', tool_call_id: 'b', content: '{"sum":2}' },
      ],
      tools: [{ type: 'function', function: { name: 'add', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'add' } },
      response_format: { type: 'json_schema', json_schema: { name: 'r', schema: { type: 'object' } } },
      n: 2,
      user: 'ignored',
    };
    const body = toGenerateContent(request);
    assert.deepEqual(body['systemInstruction'], { parts: [{ text: 'Be brief.' }] });
    assert.deepEqual(body['contents'], [
      { role: 'user', parts: [{ text: 'Two sums' }, { inlineData: { mimeType: 'image/png', data: 'iVBO' } }] },
      {
        role: 'model',
        parts: [
          { functionCall: { name: 'add', args: { x: 1 } }, thoughtSignature: 'skip_thought_signature_validator' },
          { functionCall: { name: 'add', args: { x: 2 } } },
        ],
      },
      {
        role: 'user',
        parts: [
          { functionResponse: { name: 'add', response: { result: '1' } } },
          { functionResponse: { name: 'add', response: { sum: 2 } } },
        ],
      },
    ]);
    assert.deepEqual(body['toolConfig'], { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['add'] } });
    assert.deepEqual(body['tools'], [
      { functionDeclarations: [{ name: 'add', parametersJsonSchema: { type: 'object' } }] },
    ]);
    assert.deepEqual(body['generationConfig'], {
      candidateCount: 2,
      responseMimeType: 'application/json',
      responseJsonSchema: { type: 'object' },
    });
  });

  it('refuses what the Gemini wire cannot carry, naming it', () => {
    const base: WireChatRequest = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    assert.equal(
      refusal(() => toGenerateContent({ ...base, logit_bias: { '1': 2 } })),
      'logit_bias',
    );
    assert.equal(
      refusal(() =>
        toGenerateContent({
          ...base,
          messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }],
        }),
      ),
      'messages[0].content[0].image_url.url',
    );
    assert.equal(
      refusal(() =>
        toGenerateContent({
          ...base,
          messages: [...base.messages, { role: 'tool', tool_call_id: 'nope', content: 'x' }],
        }),
      ),
      'messages[1].tool_call_id',
    );
    assert.equal(
      refusal(() => toGenerateContent({ ...base, reasoning_effort: 'extreme' })),
      'reasoning_effort',
    );
    assert.equal(
      refusal(() => toGenerateContent({ ...base, messages: [{ role: 'system', content: 'x' }] })),
      'messages',
    );
  });

  it("maps Google's recorded errors without leaking the key or the upstream model", () => {
    const badKey = geminiStatusError(400, JSON.stringify(geminiSample('error-400-api-key-invalid.json')), who);
    assert.equal(badKey.code, 'upstream_error');
    const missing = geminiStatusError(404, JSON.stringify(geminiSample('error-404-model-not-found.json')), who);
    assert.equal(missing.code, 'upstream_not_found');
    assert.doesNotMatch(missing.message, /gemini-5\.0-flash/);
    const limited = geminiStatusError(429, JSON.stringify(geminiSample('error-429-resource-exhausted.json')), who);
    assert.equal(limited.code, 'upstream_rate_limited');
    assert.equal(limited.details?.['retry_after_s'], 56);
    const refused = geminiStatusError(
      400,
      JSON.stringify({ error: { code: 400, message: 'Bad schema for gemini-5.0-flash', status: 'INVALID_ARGUMENT' } }),
      who,
    );
    assert.equal(refused.code, 'upstream_invalid_request');
    assert.equal(refused.message, 'Bad schema for svc-gem');
  });
});
