import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { experimental_generateSpeech, experimental_transcribe, generateImage } from 'ai';
import OpenAI, { toFile } from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import { SANDBOX_TRANSCRIPT } from '../../core/providers/media/sandbox';

/*
 * The official clients unchanged against the built-in sandbox media models (SPEC §14): the AI SDK's
 * generateImage, experimental_generateSpeech and experimental_transcribe with @ai-sdk/openai, and
 * openai-node with a real MP3; the wallet checked to the credit (prices in docs/media.md).
 */

const MP3 = fs.readFileSync(path.resolve(__dirname, '../fixtures/media/speech.mp3'));
const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

describe('media: the AI SDK and openai-node unchanged (SPEC §14)', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let baseURL: string;

  before(async () => {
    svc = await startSvc();
    baseURL = `${svc.baseUrl}/v1/openai`;
  });
  after(async () => {
    await svc.close();
  });

  async function balanceIs(accountId: string, expected: bigint): Promise<void> {
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, expected);
    assert.equal(wallet.held, 0n);
  }

  it('AI SDK generateImage: two images, charged two at the dearest price', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const openai = createOpenAI({ baseURL, apiKey: key });
    const { images } = await generateImage({ model: openai.image('svc-image'), prompt: 'a lighthouse', n: 2 });
    assert.equal(images.length, 2);
    assert.deepEqual([...(images[0]?.uint8Array.subarray(1, 4) ?? [])], [0x50, 0x4e, 0x47]);
    await balanceIs(accountId, 10_000n - 2n * 1700n);
  });

  it('AI SDK experimental_generateSpeech: the audio, charged by characters', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const openai = createOpenAI({ baseURL, apiKey: key });
    const text = 'Hello from the AI SDK';
    const { audio } = await experimental_generateSpeech({ model: openai.speech('svc-tts'), text, voice: 'alloy' });
    assert.equal(Buffer.from(audio.uint8Array).subarray(0, 4).toString('latin1'), 'RIFF');
    await balanceIs(accountId, 10_000n - ceilDiv(BigInt(text.length) * 150_000n, 1_000_000n));
  });

  it('AI SDK experimental_transcribe with a real MP3: the text, charged for its 2.5 s as 3 s', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const openai = createOpenAI({ baseURL, apiKey: key });
    const result = await experimental_transcribe({ model: openai.transcription('svc-transcribe'), audio: MP3 });
    assert.equal(result.text, SANDBOX_TRANSCRIPT);
    await balanceIs(accountId, 10_000n - ceilDiv(3n * 600n, 60n));
  });

  it('openai-node audio.transcriptions.create with the MP3 (verbose_json): its duration as the container says', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const client = new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
    const result = await client.audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await toFile(MP3, 'speech.mp3', { type: 'audio/mpeg' }),
      response_format: 'verbose_json',
    });
    assertSchema('CreateTranscriptionResponseVerboseJson', result);
    assert.ok(Math.abs(result.duration - 2.5077) < 0.01, String(result.duration));
    await balanceIs(accountId, 10_000n - ceilDiv(3n * 600n, 60n));
  });
});
