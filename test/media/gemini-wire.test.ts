import assert from 'node:assert/strict';
import { ApiError, GoogleGenAI, Modality } from '@google/genai';
import { startSvc, type TestSvc } from '../helpers/harness';
import {
  GEMINI_IMAGE_USAGE,
  GEMINI_INPUT_IMAGE_TOKENS,
  GEMINI_PCM,
  GEMINI_PNG_B64,
  GEMINI_SPEECH_USAGE,
  startFakeGeminiMedia,
  type FakeGeminiMedia,
} from '../fakes/gemini-media-upstream';
import { startFakeMediaUpstream, type FakeMediaUpstream } from '../fakes/media-upstream';

/*
 * SPEC §14, the other wires: an image or speech model on svc's Gemini API, asked by the official
 * @google/genai client. A `gemini` upstream (a fake of Google's wire) gets the client's request as
 * it is and its `inlineData` answer comes back as Google wrote it; the sandbox and an `openai`
 * upstream answer through svc's translation. Held and settled as the OpenAI routes' media calls;
 * the wallet to the credit.
 */

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;
const tokens = (input: number, output: number, inPer1m: bigint, outPer1m: bigint): bigint =>
  ceilDiv(BigInt(input) * inPer1m + BigInt(output) * outPer1m, 1_000_000n);

const SANDBOX_IMAGE = 900n;
const TTS_PER_1M = 150_000n;
const DALLE = 2800n;

function config(fake: FakeGeminiMedia, openai: FakeMediaUpstream): string {
  const gemini = `provider: gemini\n    base_url: ${fake.baseUrl}\n    api_key: g-secret`;
  return `models:
  g-image:
    kind: image
    ${gemini}
    upstream_model: gemini-2.5-flash-image
    max_output_tokens: 1290
    price: { input_per_1m: 300000, output_per_1m: 30000000 }
  g-tts:
    kind: speech
    ${gemini}
    upstream_model: gemini-2.5-flash-preview-tts
    max_output_tokens: 4000
    price: { input_per_1m: 500000, output_per_1m: 10000000 }
  g-imagen:
    kind: image
    ${gemini}
    upstream_model: imagen-4.0-generate-001
    price: { per_image: { "auto/auto": 4000 } }
  s-image:
    kind: image
    provider: sandbox
    price: { per_image: { "1024x1024/auto": ${SANDBOX_IMAGE} } }
  s-tts:
    kind: speech
    provider: sandbox
    price: { per_1m_characters: ${TTS_PER_1M} }
  o-dalle:
    kind: image
    provider: openai
    base_url: ${openai.baseUrl}
    api_key: up-secret
    upstream_model: dall-e-3
    price: { per_image: { "1024x1024/standard": ${DALLE} } }
  s-chat:
    provider: sandbox
    price: { input_per_1m: 150000, output_per_1m: 600000 }
`;
}

describe('image and speech models on the Gemini API (@google/genai, SPEC §14)', function () {
  this.timeout(60_000);
  let fake: FakeGeminiMedia;
  let openai: FakeMediaUpstream;
  let svc: TestSvc;
  let sdk: (key: string) => GoogleGenAI;

  before(async () => {
    fake = await startFakeGeminiMedia();
    openai = await startFakeMediaUpstream();
    svc = await startSvc({ config: config(fake, openai) });
    sdk = (key) => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${svc.baseUrl}/v1/gemini` } });
  });
  after(async () => {
    await svc.close();
    await fake.close();
    await openai.close();
  });

  async function balanceIs(accountId: string, expected: bigint): Promise<void> {
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, expected);
    assert.equal(wallet.held, 0n);
  }

  async function usageOf(
    accountId: string,
  ): Promise<{ kind: string; resource: string; cost: bigint; status: string; units: number }[]> {
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'resource', 'cost', 'status', 'media_units'])
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => ({
      kind: r.kind,
      resource: r.resource,
      cost: BigInt(r.cost),
      status: r.status,
      units: Number(r.media_units),
    }));
  }

  const IMAGE_COST = tokens(
    GEMINI_IMAGE_USAGE.promptTokenCount,
    GEMINI_IMAGE_USAGE.candidatesTokenCount,
    300_000n,
    30_000_000n,
  );

  it('a gemini image model: the request passed to Google as sent, its inlineData answer back as it came, charged its usageMetadata', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const before = fake.requests.length;
    const response = await sdk(key).models.generateContent({
      model: 'g-image',
      contents: 'A lighthouse at dusk',
      config: { responseModalities: [Modality.TEXT, Modality.IMAGE] },
    });
    const parts = response.candidates?.[0]?.content?.parts ?? [];
    assert.equal(parts[0]?.text, 'Here is your image.');
    assert.deepEqual(parts[1]?.inlineData, { mimeType: 'image/png', data: GEMINI_PNG_B64 });
    assert.equal(response.data, GEMINI_PNG_B64);
    assert.equal(response.usageMetadata?.candidatesTokenCount, GEMINI_IMAGE_USAGE.candidatesTokenCount);
    const seen = fake.requests.slice(before);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.path, '/v1beta/models/gemini-2.5-flash-image:generateContent');
    assert.equal(seen[0]?.apiKey, 'g-secret');
    assert.deepEqual(seen[0]?.body['contents'], [{ role: 'user', parts: [{ text: 'A lighthouse at dusk' }] }]);
    assert.deepEqual(seen[0]?.body['generationConfig'], { responseModalities: ['TEXT', 'IMAGE'] });
    assert.equal(response.sdkHttpResponse?.headers?.['x-svc-cost'], String(IMAGE_COST));
    await balanceIs(accountId, 1_000_000n - IMAGE_COST);
    const usage = await usageOf(accountId);
    assert.deepEqual(usage, [{ kind: 'image', resource: 'g-image', cost: IMAGE_COST, status: 'ok', units: 1 }]);
  });

  it('an edit (an inline image in the request) goes to Google as sent, the image counted in the hold', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const response = await sdk(key).models.generateContent({
      model: 'g-image',
      contents: [
        {
          role: 'user',
          parts: [{ text: 'Make the sky purple' }, { inlineData: { mimeType: 'image/png', data: GEMINI_PNG_B64 } }],
        },
      ],
      config: { responseModalities: [Modality.TEXT, Modality.IMAGE] },
    });
    assert.equal(response.data, GEMINI_PNG_B64);
    const sent = fake.requests.at(-1)?.body['contents'] as Record<string, unknown>[];
    assert.deepEqual(sent[0]?.['parts'], [
      { text: 'Make the sky purple' },
      { inlineData: { mimeType: 'image/png', data: GEMINI_PNG_B64 } },
    ]);
    // Google counts the input image in the prompt (GEMINI_INPUT_IMAGE_TOKENS), at the input rate
    // here (the model names no image_input_per_1m).
    const editCost = tokens(
      GEMINI_IMAGE_USAGE.promptTokenCount + GEMINI_INPUT_IMAGE_TOKENS,
      GEMINI_IMAGE_USAGE.candidatesTokenCount,
      300_000n,
      30_000_000n,
    );
    await balanceIs(accountId, 1_000_000n - editCost);
  });

  it('streamed: the whole answer in one chunk, charged once', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const chunks = [];
    for await (const chunk of await sdk(key).models.generateContentStream({
      model: 'g-image',
      contents: 'A red kite',
      config: { responseModalities: [Modality.IMAGE] },
    }))
      chunks.push(chunk);
    assert.equal(chunks.length, 1);
    assert.equal(chunks[0]?.data, GEMINI_PNG_B64);
    await balanceIs(accountId, 1_000_000n - IMAGE_COST);
  });

  it('a prompt Google blocks comes back as Google blocks it (promptFeedback), costing nothing', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const response = await sdk(key).models.generateContent({
      model: 'g-image',
      contents: 'something blocked',
      config: { responseModalities: [Modality.IMAGE] },
    });
    assert.equal(response.promptFeedback?.blockReason, 'SAFETY');
    assert.equal(response.candidates, undefined);
    await balanceIs(accountId, 1_000_000n);
    const last = (await usageOf(accountId)).at(-1);
    assert.deepEqual([last?.kind, last?.status, last?.cost], ['image', 'empty', 0n]);
  });

  it('a gemini speech model: Google’s PCM as it came (audio/L16), charged its tokens', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const response = await sdk(key).models.generateContent({
      model: 'g-tts',
      contents: [{ parts: [{ text: 'Say cheerfully: have a wonderful day!' }] }],
      config: {
        responseModalities: [Modality.AUDIO],
        speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Puck' } } },
      },
    });
    const inline = response.candidates?.[0]?.content?.parts?.[0]?.inlineData;
    assert.equal(inline?.mimeType, 'audio/L16;codec=pcm;rate=24000');
    assert.deepEqual(Buffer.from(inline?.data ?? '', 'base64'), GEMINI_PCM);
    const config = fake.requests.at(-1)?.body['generationConfig'];
    assert.deepEqual(config, {
      responseModalities: ['AUDIO'],
      speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Puck' } } },
    });
    const cost = tokens(
      GEMINI_SPEECH_USAGE.promptTokenCount,
      GEMINI_SPEECH_USAGE.candidatesTokenCount,
      500_000n,
      10_000_000n,
    );
    await balanceIs(accountId, 1_000_000n - cost);
    const last = (await usageOf(accountId)).at(-1);
    assert.deepEqual([last?.kind, last?.resource, last?.cost], ['speech', 'g-tts', cost]);
  });

  it('Imagen (:predict) answers through the translation: its image as an inlineData part, per image', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const response = await sdk(key).models.generateContent({ model: 'g-imagen', contents: 'a cat' });
    assert.deepEqual(response.candidates?.[0]?.content?.parts, [
      { inlineData: { mimeType: 'image/png', data: GEMINI_PNG_B64 } },
    ]);
    assert.deepEqual(fake.requests.at(-1)?.body, { instances: [{ prompt: 'a cat' }], parameters: { sampleCount: 1 } });
    await balanceIs(accountId, 100_000n - 4000n);
  });

  it('the sandbox (what `npm start` serves): a PNG and a WAV as inlineData, labelled, charged its prices', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const image = await sdk(key).models.generateContent({ model: 's-image', contents: 'a blue door' });
    const png = Buffer.from(image.data ?? '', 'base64');
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    assert.equal(image.candidates?.[0]?.content?.parts?.[0]?.inlineData?.mimeType, 'image/png');
    assert.equal(image.candidates?.[0]?.finishReason, 'STOP');
    assert.equal(image.sdkHttpResponse?.headers?.['x-svc-sandbox'], 'true');
    const text = 'Hello there';
    const speech = await sdk(key).models.generateContent({
      model: 's-tts',
      contents: text,
      config: { responseModalities: [Modality.AUDIO] },
    });
    const inline = speech.candidates?.[0]?.content?.parts?.[0]?.inlineData;
    assert.equal(inline?.mimeType, 'audio/wav');
    assert.equal(
      Buffer.from(inline?.data ?? '', 'base64')
        .subarray(0, 4)
        .toString('latin1'),
      'RIFF',
    );
    const speechCost = ceilDiv(BigInt(text.length) * TTS_PER_1M, 1_000_000n);
    await balanceIs(accountId, 100_000n - SANDBOX_IMAGE - speechCost);
  });

  it('an openai upstream answers through the translation: its b64_json as inlineData, per image', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const response = await sdk(key).models.generateContent({ model: 'o-dalle', contents: 'a green hill' });
    assert.equal(response.candidates?.[0]?.content?.parts?.[0]?.inlineData?.mimeType, 'image/png');
    assert.ok((response.data ?? '').length > 0);
    const seen = openai.requests.at(-1);
    assert.equal(seen?.path, '/v1/images/generations');
    assert.deepEqual(
      [seen?.body['model'], seen?.body['prompt'], seen?.body['response_format']],
      ['dall-e-3', 'a green hill', 'b64_json'],
    );
    await balanceIs(accountId, 100_000n - DALLE);
  });

  it('an openai upstream refusing the prompt: Gemini’s 400 INVALID_ARGUMENT in its words, costing nothing', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    openai.failNext(400, {
      error: {
        code: 'content_policy_violation',
        message: 'Your request was rejected as a result of our safety system.',
        param: null,
        type: 'invalid_request_error',
      },
    });
    await assert.rejects(
      sdk(key).models.generateContent({ model: 'o-dalle', contents: 'something not allowed' }),
      (e: unknown) =>
        e instanceof ApiError &&
        e.status === 400 &&
        /INVALID_ARGUMENT/.test(e.message) &&
        /safety system/.test(e.message),
    );
    await balanceIs(accountId, 100_000n);
  });

  it('a wallet that cannot cover the hold: Gemini’s 429, nothing sent upstream, nothing charged', async () => {
    const { key, accountId } = await svc.createFundedKey(100);
    const before = fake.requests.length;
    await assert.rejects(
      sdk(key).models.generateContent({
        model: 'g-image',
        contents: 'A lighthouse',
        config: { responseModalities: [Modality.IMAGE] },
      }),
      (e: unknown) => e instanceof ApiError && e.status === 429 && /RESOURCE_EXHAUSTED/.test(e.message),
    );
    assert.equal(fake.requests.length, before);
    await balanceIs(accountId, 100n);
  });

  it('a request with no text is Gemini’s 400 naming contents; a chat model asked for an image says what it serves; the models list says generateContent', async () => {
    const { key } = await svc.createFundedKey(1000);
    await assert.rejects(
      sdk(key).models.generateContent({
        model: 's-image',
        contents: [{ role: 'user', parts: [] }],
        config: { responseModalities: [Modality.IMAGE] },
      }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /an image model needs a text prompt/.test(e.message),
    );
    // Nothing that would have Google run (and bill) more than the image goes with the body.
    const before = fake.requests.length;
    await assert.rejects(
      sdk(key).models.generateContent({
        model: 'g-image',
        contents: 'the weather in Paris, drawn',
        config: { responseModalities: [Modality.IMAGE], tools: [{ googleSearch: {} }] },
      }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /'tools'/.test(e.message),
    );
    assert.equal(fake.requests.length, before);
    // A chat model asked for an image goes on to the chat path, which says what it serves.
    await assert.rejects(
      sdk(key).models.generateContent({
        model: 's-chat',
        contents: 'draw a cat',
        config: { responseModalities: [Modality.IMAGE] },
      }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /responseModalities/.test(e.message),
    );
    const model = await sdk(key).models.get({ model: 'g-image' });
    assert.deepEqual(model.supportedActions, ['generateContent', 'streamGenerateContent']);
  });
});
