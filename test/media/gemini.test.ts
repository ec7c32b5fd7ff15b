import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import {
  GEMINI_IMAGE_USAGE,
  GEMINI_INPUT_IMAGE_TOKENS,
  GEMINI_PCM,
  GEMINI_PNG_B64,
  GEMINI_SPEECH_USAGE,
  startFakeGeminiMedia,
  type FakeGeminiMedia,
} from '../fakes/gemini-media-upstream';

/*
 * SPEC §14's `gemini` upstream for images and speech, through a fake of Google's wire: the
 * openai SDK unchanged on svc's OpenAI routes, the wallet to the credit.
 */

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;
const tokens = (input: number, output: number, inPer1m: bigint, outPer1m: bigint): bigint =>
  ceilDiv(BigInt(input) * inPer1m + BigInt(output) * outPer1m, 1_000_000n);

function config(fake: FakeGeminiMedia): string {
  const gemini = `provider: gemini\n    base_url: ${fake.baseUrl}\n    api_key: g-secret`;
  return `models:
  g-image:
    kind: image
    ${gemini}
    upstream_model: gemini-2.5-flash-image
    max_output_tokens: 1290
    price: { input_per_1m: 300000, output_per_1m: 30000000 }
  g-image-edit:
    kind: image
    ${gemini}
    upstream_model: gemini-2.5-flash-image
    max_output_tokens: 1290
    price: { input_per_1m: 300000, image_input_per_1m: 600000, output_per_1m: 30000000 }
  g-imagen:
    kind: image
    ${gemini}
    upstream_model: imagen-4.0-generate-001
    price: { per_image: { "auto/auto": 4000 } }
  g-tts:
    kind: speech
    ${gemini}
    upstream_model: gemini-2.5-flash-preview-tts
    max_output_tokens: 4000
    price: { input_per_1m: 500000, output_per_1m: 10000000 }
`;
}

describe('media through the gemini upstream (SPEC §14)', function () {
  this.timeout(60_000);
  let fake: FakeGeminiMedia;
  let svc: TestSvc;
  let client: (key: string) => OpenAI;

  before(async () => {
    fake = await startFakeGeminiMedia();
    svc = await startSvc({ config: config(fake) });
    client = (key) => new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
  });
  after(async () => {
    await svc.close();
    await fake.close();
  });

  async function balanceIs(accountId: string, expected: bigint): Promise<void> {
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, expected);
    assert.equal(wallet.held, 0n);
  }

  it('a Gemini image model: one generateContent per image with responseModalities IMAGE, charged its usageMetadata', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const calls = fake.requests.length;
    const result = await client(key).images.generate({ model: 'g-image', prompt: 'a lighthouse', n: 2 });
    assertSchema('ImagesResponse', result);
    assert.deepEqual(
      result.data?.map((d) => d.b64_json),
      [GEMINI_PNG_B64, GEMINI_PNG_B64],
    );
    const seen = fake.requests.slice(calls);
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.path, '/v1beta/models/gemini-2.5-flash-image:generateContent');
    assert.equal(seen[0]?.apiKey, 'g-secret');
    assert.deepEqual(seen[0]?.body['generationConfig'], { responseModalities: ['TEXT', 'IMAGE'] });
    const cost = tokens(
      2 * GEMINI_IMAGE_USAGE.promptTokenCount,
      2 * GEMINI_IMAGE_USAGE.candidatesTokenCount,
      300_000n,
      30_000_000n,
    );
    await balanceIs(accountId, 1_000_000n - cost);
  });

  it('an edit: the input images inline, their tokens (promptTokensDetails IMAGE) charged at image_input_per_1m', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const calls = fake.requests.length;
    const png = Buffer.from(GEMINI_PNG_B64, 'base64');
    const result = await client(key).images.edit({
      model: 'g-image-edit',
      prompt: 'add a hat',
      image: [await toFile(png, 'a.png', { type: 'image/png' }), await toFile(png, 'b.png', { type: 'image/png' })],
    });
    assert.equal(result.data?.[0]?.b64_json, GEMINI_PNG_B64);
    const parts = (fake.requests[calls]?.body['contents'] as { parts: Record<string, unknown>[] }[])[0]?.parts ?? [];
    assert.equal(parts.filter((p) => p['inlineData'] !== undefined).length, 2);
    // Text at input_per_1m, the two images at image_input_per_1m, the made image at output_per_1m.
    const cost = ceilDiv(
      BigInt(GEMINI_IMAGE_USAGE.promptTokenCount) * 300_000n +
        BigInt(2 * GEMINI_INPUT_IMAGE_TOKENS) * 600_000n +
        BigInt(GEMINI_IMAGE_USAGE.candidatesTokenCount) * 30_000_000n,
      1_000_000n,
    );
    await balanceIs(accountId, 1_000_000n - cost);
  });

  it('a prompt Google blocks is OpenAI’s content_policy_violation, costing nothing', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    await assert.rejects(
      client(key).images.generate({ model: 'g-image', prompt: 'something blocked' }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.code === 'content_policy_violation',
    );
    await balanceIs(accountId, 1_000_000n);
  });

  it('Imagen through :predict with sampleCount n, per image', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const result = await client(key).images.generate({ model: 'g-imagen', prompt: 'a cat', n: 3 });
    assertSchema('ImagesResponse', result);
    assert.equal(result.data?.length, 3);
    const seen = fake.requests.at(-1);
    assert.equal(seen?.path, '/v1beta/models/imagen-4.0-generate-001:predict');
    assert.deepEqual(seen?.body, { instances: [{ prompt: 'a cat' }], parameters: { sampleCount: 3 } });
    await balanceIs(accountId, 100_000n - 3n * 4000n);
  });

  it('Gemini speech: responseModalities AUDIO with a prebuilt voice, its PCM as a WAV, charged its tokens', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000_000);
    const response = await client(key).audio.speech.create({ model: 'g-tts', input: 'Say hello', voice: 'Puck' });
    const wav = Buffer.from(await response.arrayBuffer());
    assert.equal(response.headers.get('content-type'), 'audio/wav');
    assert.equal(wav.subarray(0, 4).toString('latin1'), 'RIFF');
    assert.equal(wav.readUInt32LE(24), 24_000);
    assert.deepEqual(wav.subarray(44), GEMINI_PCM);
    const config = fake.requests.at(-1)?.body['generationConfig'] as Record<string, unknown>;
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
  });
});
