import assert from 'node:assert/strict';
import { ApiError, HarmBlockThreshold, HarmCategory } from '@google/genai';
import {
  geminiSample,
  geminiSampleText,
  startFakeGeminiUpstream,
  type FakeGeminiUpstream,
} from '../fakes/gemini-upstream';
import { expectedCost, INPUT_PER_1M, OUTPUT_PER_1M } from '../openai/fixture';
import { startGeminiFixture, type GeminiFixture } from './fixture';

/*
 * Native pass-through on /v1/gemini (issue 24 point 4): a model whose upstream is Google's gets the
 * client's own generateContent body, with only the output limit replaced, and the client gets
 * Google's answer frame for frame; the charge is the price of Google's usageMetadata, exactly once.
 * The official `@google/genai` client and raw HTTP against svc, a fake of Google's API behind it.
 */

type Json = Record<string, unknown>;

describe('gemini native pass-through (/v1/gemini to a gemini upstream)', function () {
  this.timeout(30_000);
  let google: FakeGeminiUpstream;
  let fx: GeminiFixture;

  before(async () => {
    google = await startFakeGeminiUpstream();
    fx = await startGeminiFixture({
      extraModels: () => `
  svc-gem:
    provider: gemini
    base_url: ${google.baseUrl}
    api_key: test-gemini-secret
    upstream_model: gemini-2.5-flash
    price: { input_per_1m: ${INPUT_PER_1M}, output_per_1m: ${OUTPUT_PER_1M} }
    context_window: 100000
    max_output_tokens: 1000
`,
    });
  });
  after(async () => {
    await fx?.close();
    await google?.close();
  });

  const post = (key: string, model: string, method: string, body: unknown, query = ''): Promise<Response> =>
    fetch(`${fx.geminiURL}/v1beta/models/${model}:${method}${query}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
      body: JSON.stringify(body),
    });

  // An answer with what the neutral form cannot carry: a thoughtSignature, cached tokens, a field of Google's own.
  const signedAnswer = {
    candidates: [
      {
        content: {
          role: 'model',
          parts: [
            { text: 'Let me look.', thought: true },
            { functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'c2lnbmF0dXJl' },
          ],
        },
        finishReason: 'STOP',
        index: 0,
        safetyRatings: [{ category: 'HARM_CATEGORY_HARASSMENT', probability: 'NEGLIGIBLE' }],
      },
    ],
    usageMetadata: {
      promptTokenCount: 1200,
      cachedContentTokenCount: 1024,
      candidatesTokenCount: 9,
      thoughtsTokenCount: 31,
      totalTokenCount: 1240,
    },
    modelVersion: 'gemini-2.5-flash',
    responseId: 'up-resp-1',
    turnToken: 'v1:opaque',
  };

  it('@google/genai generateContent: safetySettings, thoughtSignature and cachedContent reach Google; its answer comes back; the exact charge', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    google.next({ kind: 'json', body: signedAnswer });
    const history = [
      { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
      {
        role: 'model',
        parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'c2lnMQ==' }],
      },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temp: 18 } } }] },
    ];
    const response = await fx.genai(key).models.generateContent({
      model: 'svc-gem',
      contents: history,
      config: {
        maxOutputTokens: 5000,
        cachedContent: 'cachedContents/abc123',
        safetySettings: [
          { category: HarmCategory.HARM_CATEGORY_HARASSMENT, threshold: HarmBlockThreshold.BLOCK_ONLY_HIGH },
        ],
        tools: [{ functionDeclarations: [{ name: 'get_weather', parameters: { type: 'OBJECT' as never } }] }],
      },
    });

    const sent = google.requests.at(-1);
    assert.equal(sent?.path, 'models/gemini-2.5-flash:generateContent');
    assert.equal(sent?.apiKey, 'test-gemini-secret');
    assert.deepEqual(sent?.body['contents'], history);
    assert.equal(sent?.body['cachedContent'], 'cachedContents/abc123');
    assert.deepEqual(sent?.body['safetySettings'], [
      { category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_ONLY_HIGH' },
    ]);
    // svc's decision: the client's limit fitted to the model's max_output_tokens, and said (SPEC §7d).
    assert.equal((sent?.body['generationConfig'] as Json)['maxOutputTokens'], 1000);
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-fitted'], 'maxOutputTokens=5000->1000');

    assert.equal(response.responseId, 'up-resp-1');
    assert.equal(response.modelVersion, 'svc-gem');
    const parts = response.candidates?.[0]?.content?.parts ?? [];
    assert.equal(parts[1]?.thoughtSignature, 'c2lnbmF0dXJl');
    assert.deepEqual(parts[1]?.functionCall, { name: 'get_weather', args: { city: 'Paris' } });
    assert.deepEqual(response.usageMetadata?.cachedContentTokenCount, 1024);
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-ignored-fields'], undefined);

    // Thoughts are output; cached tokens are input (no cached price configured).
    const cost = expectedCost(1200, 9 + 31);
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-cost'], String(cost));
    assert.equal(await fx.balance(accountId), 1_000_000n - cost);
    const usage = await fx.usage(accountId);
    assert.deepEqual(
      usage.map((u) => [u.status, u.cost]),
      [['ok', cost]],
    );
  });

  it('a top-level field the translation does not know reaches Google as sent', async () => {
    const { key } = await fx.fund(1_000_000);
    const body = {
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
      futureKnob: { level: 3 },
      generationConfig: { temperature: 0.2, mediaResolution: 'MEDIA_RESOLUTION_LOW' },
    };
    const res = await post(key, 'svc-gem', 'generateContent', body);
    assert.equal(res.status, 200, await res.clone().text());
    const sent = google.requests.at(-1)?.body;
    assert.deepEqual(sent?.['futureKnob'], { level: 3 });
    assert.deepEqual(sent?.['generationConfig'], { temperature: 0.2, mediaResolution: 'MEDIA_RESOLUTION_LOW' });
    const answer = (await res.json()) as Json;
    assert.deepEqual(answer, { ...geminiSample('generate-content-thinking.json'), modelVersion: 'svc-gem' });
  });

  it('the same fields on a model served through a translation: 400 naming the field, nothing charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    for (const [field, extra] of [
      ['futureKnob', { futureKnob: 1 }],
      ['cachedContent', { cachedContent: 'cachedContents/abc' }],
    ] as const) {
      const res = await post(key, 'svc-pro', 'generateContent', {
        contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
        ...extra,
      });
      assert.equal(res.status, 400);
      const error = ((await res.json()) as { error: { status: string; message: string } }).error;
      assert.equal(error.status, 'INVALID_ARGUMENT');
      assert.match(error.message, new RegExp(field));
    }
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 1_000_000n);
    assert.deepEqual(await fx.usage(accountId), []);
  });

  it('@google/genai generateContentStream: Google frames one for one, its usage last, the exact charge', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    google.next({ kind: 'sse', sample: 'stream-generate-content-thinking.sse.txt' });
    const stream = await fx.genai(key).models.generateContentStream({
      model: 'svc-gem',
      contents: 'Why is the sky blue?',
      config: { thinkingConfig: { includeThoughts: true } },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const recorded = sseFrames('stream-generate-content-thinking.sse.txt');
    assert.equal(chunks.length, recorded.length);
    for (const [i, chunk] of chunks.entries()) {
      assert.equal(chunk.responseId, recorded[i]?.['responseId']);
      assert.deepEqual(
        chunk.candidates?.[0]?.content,
        (recorded[i]?.['candidates'] as Json[] | undefined)?.[0]?.['content'],
      );
      assert.equal(chunk.modelVersion, 'svc-gem');
    }
    const usage = recorded.at(-1)?.['usageMetadata'] as Record<string, number>;
    assert.deepEqual(chunks.at(-1)?.usageMetadata, usage);
    const cost = expectedCost(
      usage['promptTokenCount'] ?? 0,
      (usage['candidatesTokenCount'] ?? 0) + (usage['thoughtsTokenCount'] ?? 0),
    );
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n - cost);
    assert.equal(google.requests.at(-1)?.path, 'models/gemini-2.5-flash:streamGenerateContent');
    assert.equal(google.requests.at(-1)?.query, '?alt=sse');
  });

  it('issue 30: a passed-through stream whose upstream reports no usage ends with a frame of svc’s count, estimated, as charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    const recorded = sseFrames('stream-generate-content-thinking.sse.txt').map((frame) => {
      const { usageMetadata: _usage, ...rest } = frame;
      return rest;
    });
    google.next({ kind: 'sse-text', text: recorded.map((f) => `data: ${JSON.stringify(f)}\r\n\r\n`).join('') });
    const stream = await fx.genai(key).models.generateContentStream({
      model: 'svc-gem',
      contents: 'Why is the sky blue?',
      config: { thinkingConfig: { includeThoughts: true } },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    // Google's frames one for one, then svc's: no candidates, the usage it charged.
    assert.equal(chunks.length, recorded.length + 1);
    for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.usageMetadata, undefined);
    const last = chunks.at(-1);
    assert.equal(last?.candidates, undefined);
    assert.equal(last?.modelVersion, 'svc-gem');
    const usage = last?.usageMetadata as Record<string, number | boolean>;
    assert.equal(usage['estimated'], true, JSON.stringify(usage));
    const prompt = usage['promptTokenCount'] as number;
    const output = usage['candidatesTokenCount'] as number;
    assert.ok(prompt > 0 && output > 0, JSON.stringify(usage));
    assert.equal(usage['totalTokenCount'], prompt + output);
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n - expectedCost(prompt, output));
  });

  it('the JSON-array stream framing carries the same frames', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    google.next({ kind: 'sse', sample: 'stream-generate-content.sse.txt' });
    const res = await post(key, 'svc-gem', 'streamGenerateContent', {
      contents: [{ role: 'user', parts: [{ text: 'Why is the sky blue?' }] }],
      futureKnob: true,
    });
    assert.equal(res.status, 200);
    const frames = JSON.parse(await res.text()) as Json[];
    const recorded = sseFrames('stream-generate-content.sse.txt');
    assert.deepEqual(
      frames,
      recorded.map((f) => ({ ...f, modelVersion: 'svc-gem' })),
    );
    assert.equal(google.requests.at(-1)?.body['futureKnob'], true);
    const usage = recorded.at(-1)?.['usageMetadata'] as Record<string, number>;
    const cost = expectedCost(
      usage['promptTokenCount'] ?? 0,
      (usage['candidatesTokenCount'] ?? 0) + (usage['thoughtsTokenCount'] ?? 0),
    );
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n - cost);
  });

  it("Google's errors reach the SDK as Google's, with nothing charged (whole and streamed)", async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    google.next({ kind: 'error', status: 429, sample: 'error-429-resource-exhausted.json' });
    await assert.rejects(
      fx.genai(key).models.generateContent({ model: 'svc-gem', contents: 'hi', config: { cachedContent: 'x' } }),
      (e: unknown) => e instanceof ApiError && e.status === 429,
    );
    google.next({ kind: 'error', status: 429, sample: 'error-429-resource-exhausted.json' });
    await assert.rejects(
      (async () => {
        for await (const _ of await fx.genai(key).models.generateContentStream({ model: 'svc-gem', contents: 'hi' }));
      })(),
      (e: unknown) => e instanceof ApiError && e.status === 429,
    );
    google.next({ kind: 'sse-text', text: 'data: {"candidates": [{"content": {"parts": [{"text": "cut"}]' });
    const cut = await post(
      key,
      'svc-gem',
      'streamGenerateContent',
      { contents: [{ parts: [{ text: 'x' }] }] },
      '?alt=sse',
    );
    assert.match(await cut.text(), /"error"/);
    const w = await fx.settled(accountId);
    assert.equal(w.balance, 1_000_000n);
    assert.ok((await fx.usage(accountId)).every((u) => u.cost === 0n));
  });

  it('googleSearch stays on svc’s own web_search: the Gemini upstream is never asked to search', async () => {
    const { key } = await fx.fund(1_000_000);
    const before = google.requests.length;
    const res = await post(key, 'svc-gem', 'generateContent', {
      contents: [{ role: 'user', parts: [{ text: 'news?' }] }],
      tools: [{ googleSearch: {} }],
      futureKnob: 1,
    });
    // Refused as translated: the search turn is svc's, which cannot carry the unknown field.
    assert.equal(res.status, 400);
    assert.match(await res.text(), /futureKnob/);
    assert.equal(google.requests.length, before);
  });
});

/** The data frames of a recorded SSE sample, parsed. */
function sseFrames(sample: string): Json[] {
  return geminiSampleText(sample)
    .split(/\r?\n\r?\n/)
    .map((block) => block.replace(/^data: /, '').trim())
    .filter((data) => data !== '')
    .map((data) => JSON.parse(data) as Json);
}
