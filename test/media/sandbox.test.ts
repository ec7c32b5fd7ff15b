import assert from 'node:assert/strict';
import OpenAI, { toFile } from 'openai';
import { runSvc } from '../cli/run-svc';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import { sandboxWav, SANDBOX_FLAG_WORD, SANDBOX_TRANSCRIPT } from '../../core/providers/media/sandbox';

/*
 * SPEC §14 on the built-in sandbox models (`svc serve` with no models configured): every media
 * route through the official openai SDK, each answer valid against OpenAI's schema, and the wallet
 * checked to the credit against the prices the docs name (docs/media.md), computed here apart
 * from the code under test.
 */

const MAX_UPLOAD = 2 * 1024 * 1024;
const MAX_AUDIO = 60;
const CONFIG = `limits:
  max_upload_bytes: ${MAX_UPLOAD}
  max_audio_seconds: ${MAX_AUDIO}
`;

/** The built-in prices (docs/media.md). */
const IMAGE_HIGH = 1700n;
const IMAGE_LOW = 400n;
const TTS_PER_1M = 150_000n;
const TRANSCRIBE_PER_MINUTE = 600n;
const RERANK_PER_SEARCH = 20n;

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

describe('media on the sandbox (SPEC §14)', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let baseURL: string;

  before(async () => {
    svc = await startSvc({ config: CONFIG });
    baseURL = `${svc.baseUrl}/v1/openai`;
  });
  after(async () => {
    await svc.close();
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });

  async function balanceIs(accountId: string, expected: bigint): Promise<void> {
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, expected);
    assert.equal(wallet.held, 0n, 'no hold is left');
  }

  async function usageOf(accountId: string): Promise<{ kind: string; cost: bigint; status: string; units: number }[]> {
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'cost', 'status', 'media_units'])
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => ({ kind: r.kind, cost: BigInt(r.cost), status: r.status, units: Number(r.media_units) }));
  }

  async function post(key: string, path: string, body: unknown): Promise<Response> {
    return fetch(`${baseURL}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  it('GET /models lists every media model with its kind', async () => {
    const { key } = await svc.createFundedKey(0);
    const res = await fetch(`${baseURL}/models`, { headers: { authorization: `Bearer ${key}` } });
    const json = (await res.json()) as { data: { id: string; kind?: string }[] };
    const kinds = Object.fromEntries(json.data.map((m) => [m.id, m.kind]));
    assert.deepEqual(
      {
        image: kinds['svc-image'],
        tts: kinds['svc-tts'],
        transcribe: kinds['svc-transcribe'],
        moderation: kinds['svc-moderation'],
        rerank: kinds['svc-rerank'],
        chat: kinds['svc-pro'],
      },
      {
        image: 'image',
        tts: 'speech',
        transcribe: 'transcription',
        moderation: 'moderation',
        rerank: 'rerank',
        chat: 'chat',
      },
    );
    // Codex's catalog lists them hidden and unusable, as it lists embedding models.
    const codex = await fetch(`${baseURL}/models?client_version=0.171.0`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const catalog = (await codex.json()) as {
      models: { slug: string; kind: string; visibility: string; supported_in_api: boolean }[];
    };
    const image = catalog.models.find((m) => m.slug === 'svc-image');
    assert.deepEqual([image?.kind, image?.visibility, image?.supported_in_api], ['image', 'none', false]);
  });

  it('the Gemini API lists each model with the methods svc serves it by: generateContent for images and speech, none for the other media kinds', async () => {
    const { key } = await svc.createFundedKey(0);
    const res = await fetch(`${svc.baseUrl}/v1/gemini/v1beta/models?pageSize=1000`, {
      headers: { 'x-goog-api-key': key },
    });
    assert.equal(res.status, 200);
    const { models } = (await res.json()) as { models: { name: string; supportedGenerationMethods: string[] }[] };
    const methods = new Map(models.map((m) => [m.name.replace(/^models\//, ''), m.supportedGenerationMethods]));
    for (const id of ['svc-image', 'svc-tts'])
      assert.deepEqual(methods.get(id), ['generateContent', 'streamGenerateContent'], id);
    for (const id of ['svc-transcribe', 'svc-moderation', 'svc-rerank']) assert.deepEqual(methods.get(id), [], id);
    assert.ok(methods.get('svc-pro')?.includes('generateContent'));
  });

  it('images.generate: n PNGs from the prompt, held at n × the dearest price and charged for what was made', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const { data: result, response } = await client(key)
      .images.generate({ model: 'svc-image', prompt: 'a red fox', n: 2, response_format: 'b64_json' })
      .withResponse();
    assertSchema('ImagesResponse', result);
    assert.equal(result.data?.length, 2);
    const png = Buffer.from(result.data?.[0]?.b64_json ?? '', 'base64');
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.notEqual(result.data?.[0]?.b64_json, result.data?.[1]?.b64_json);
    assert.equal(response.headers.get('x-svc-sandbox'), 'true');
    // No quality asked: the dearest of the model's prices, per image.
    assert.equal(response.headers.get('x-svc-cost'), String(2n * IMAGE_HIGH));
    await balanceIs(accountId, 10_000n - 2n * IMAGE_HIGH);
    // The same prompt draws the same image.
    const again = await client(key).images.generate({ model: 'svc-image', prompt: 'a red fox', n: 1, quality: 'low' });
    assert.equal(again.data?.[0]?.b64_json, result.data?.[0]?.b64_json);
    await balanceIs(accountId, 10_000n - 2n * IMAGE_HIGH - IMAGE_LOW);
    assert.deepEqual(
      (await usageOf(accountId)).map((u) => [u.kind, u.cost, u.units]),
      [
        ['image', 2n * IMAGE_HIGH, 2],
        ['image', IMAGE_LOW, 1],
      ],
    );
    // `svc usage --json` says what each call was billed by.
    const cli = await runSvc(['usage', '--account', accountId, '--json'], { SVC_DATABASE_URL: svc.databaseUrl });
    assert.equal(cli.code, 0, cli.stderr);
    const listed = (JSON.parse(cli.stdout) as { records: { kind: string; media_units: number; cost: number }[] }).records;
    assert.deepEqual(
      listed.map((r) => [r.kind, r.media_units, r.cost]).sort((x, y) => Number(x[2]) - Number(y[2])),
      [
        ['image', 1, Number(IMAGE_LOW)],
        ['image', 2, Number(2n * IMAGE_HIGH)],
      ],
    );
  });

  it('images: url from a base64-only model, a size it does not offer and a wrong kind are 400s naming the field', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const cases: [unknown, string][] = [
      [{ model: 'svc-image', prompt: 'x', response_format: 'url' }, 'response_format'],
      [{ model: 'svc-image', prompt: 'x', size: '1536x1024' }, 'size'],
      [{ model: 'svc-image', prompt: 'x', size: '256x256', quality: 'high' }, 'quality'],
      [{ model: 'svc-pro', prompt: 'x' }, 'model'],
      [{ model: 'svc-image' }, 'prompt'],
    ];
    for (const [body, param] of cases) {
      const res = await post(key, '/images/generations', body);
      const json = (await res.json()) as { error: { param: string } };
      assert.equal(res.status, 400, JSON.stringify(json));
      assertSchema('ErrorResponse', json);
      assert.equal(json.error.param, param);
    }
    // And a media model is no chat model.
    const chat = await post(key, '/chat/completions', {
      model: 'svc-image',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(chat.status, 400);
    assert.equal(((await chat.json()) as { error: { param: string } }).error.param, 'model');
    await balanceIs(accountId, 10_000n);
    assert.deepEqual(await usageOf(accountId), []);
  });

  it('insufficient credit is OpenAI’s 429 insufficient_quota before anything is made', async () => {
    const { key, accountId } = await svc.createFundedKey(IMAGE_HIGH - 1n);
    const res = await post(key, '/images/generations', { model: 'svc-image', prompt: 'x' });
    const json = (await res.json()) as { error: { code: string; type: string } };
    assert.equal(res.status, 429);
    assertSchema('ErrorResponse', json);
    assert.equal(json.error.code, 'insufficient_quota');
    await balanceIs(accountId, IMAGE_HIGH - 1n);
  });

  it('images.edit: a multipart upload with image[] and mask (toFile), charged per image', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const png = Buffer.from(
      (await client(key).images.generate({ model: 'svc-image', prompt: 'seed', quality: 'low' })).data?.[0]?.b64_json ??
        '',
      'base64',
    );
    const result = await client(key).images.edit({
      model: 'svc-image',
      prompt: 'add a hat',
      image: [await toFile(png, 'a.png', { type: 'image/png' }), await toFile(png, 'b.png', { type: 'image/png' })],
      mask: await toFile(png, 'mask.png', { type: 'image/png' }),
      quality: 'medium',
      size: '1024x1024',
    });
    assertSchema('ImagesResponse', result);
    assert.equal(result.data?.length, 1);
    await balanceIs(accountId, 10_000n - IMAGE_LOW - 700n);
  });

  it('audio.speech.create: a WAV read to the end, charged by code points', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const input = 'Héllo, wörld! 👋'; // 15 code points, more UTF-16 units and bytes
    const response = await client(key).audio.speech.create({
      model: 'svc-tts',
      input,
      voice: 'alloy',
      response_format: 'wav',
    });
    const audio = Buffer.from(await response.arrayBuffer());
    assert.equal(audio.subarray(0, 4).toString('latin1'), 'RIFF');
    assert.equal(audio.subarray(8, 12).toString('latin1'), 'WAVE');
    const cost = ceilDiv(15n * TTS_PER_1M, 1_000_000n);
    assert.equal(response.headers.get('x-svc-cost'), String(cost));
    await balanceIs(accountId, 10_000n - cost);
    assert.deepEqual(
      (await usageOf(accountId)).map((u) => [u.kind, u.units]),
      [['speech', 15]],
    );
  });

  it('audio.speech with stream_format "sse": speech.audio.delta events, then speech.audio.done', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const res = await post(key, '/audio/speech', {
      model: 'svc-tts',
      input: 'stream me',
      voice: 'alloy',
      stream_format: 'sse',
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const events = (await res.text())
      .split('\n\n')
      .filter((f) => f.startsWith('data: '))
      .map((f) => JSON.parse(f.slice(6)) as { type: string; audio?: string });
    assert.ok(events.length >= 2);
    for (const e of events.slice(0, -1)) assertSchema('SpeechAudioDeltaEvent', e);
    assertSchema('SpeechAudioDoneEvent', events.at(-1));
    const audio = Buffer.concat(events.slice(0, -1).map((e) => Buffer.from(e.audio ?? '', 'base64')));
    assert.equal(audio.subarray(0, 4).toString('latin1'), 'RIFF');
    const cost = ceilDiv(9n * TTS_PER_1M, 1_000_000n);
    assert.equal(res.headers.get('x-svc-cost'), String(cost));
    await balanceIs(accountId, 10_000n - cost);
  });

  it('audio.transcriptions.create with a real WAV: held and charged for its duration, by the second', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const wav = sandboxWav(440, 2.5, 8000);
    const { data: result, response } = await client(key)
      .audio.transcriptions.create({
        model: 'svc-transcribe',
        file: await toFile(wav, 'speech.wav', { type: 'audio/wav' }),
      })
      .withResponse();
    assertSchema('CreateTranscriptionResponseJson', result);
    assert.equal(result.text, SANDBOX_TRANSCRIPT);
    // 2.5 s is billed as 3 s.
    const cost = ceilDiv(3n * TRANSCRIBE_PER_MINUTE, 60n);
    assert.equal(response.headers.get('x-svc-cost'), String(cost));
    await balanceIs(accountId, 10_000n - cost);
    assert.deepEqual(
      (await usageOf(accountId)).map((u) => [u.kind, u.cost, u.units]),
      [['transcription', cost, 3]],
    );
  });

  it('transcriptions in verbose_json, text, srt and vtt; translations too', async () => {
    const { key } = await svc.createFundedKey(10_000);
    const file = async (): Promise<File> => toFile(sandboxWav(440, 1.5, 8000), 'a.wav', { type: 'audio/wav' });
    const verbose = await client(key).audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await file(),
      response_format: 'verbose_json',
    });
    assertSchema('CreateTranscriptionResponseVerboseJson', verbose);
    assert.equal(verbose.duration, 1.5);
    const text = await client(key).audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await file(),
      response_format: 'text',
    });
    assert.equal(String(text).trim(), SANDBOX_TRANSCRIPT);
    const srt = await client(key).audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await file(),
      response_format: 'srt',
    });
    assert.match(String(srt), /^1\n00:00:00,000 --> 00:00:01,500\n/);
    const vtt = await client(key).audio.transcriptions.create({
      model: 'svc-transcribe',
      file: await file(),
      response_format: 'vtt',
    });
    assert.match(String(vtt), /^WEBVTT\n\n00:00:00\.000 --> 00:00:01\.500\n/);
    const translation = await client(key).audio.translations.create({ model: 'svc-transcribe', file: await file() });
    assertSchema('CreateTranslationResponseJson', translation);
  });

  it('audio whose duration cannot be read is held at limits.max_audio_seconds and charged at the hold, marked estimated', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const form = new FormData();
    form.append('model', 'svc-transcribe');
    form.append('file', new Blob([Buffer.from('this is not audio at all')], { type: 'audio/mpeg' }), 'x.mp3');
    const res = await fetch(`${baseURL}/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    assert.equal(res.status, 200, await res.clone().text());
    const hold = ceilDiv(BigInt(MAX_AUDIO) * TRANSCRIBE_PER_MINUTE, 60n);
    assert.equal(res.headers.get('x-svc-estimated'), 'true');
    assert.equal(res.headers.get('x-svc-cost'), String(hold));
    await balanceIs(accountId, 10_000n - hold);
  });

  it('audio longer than limits.max_audio_seconds is a 400 naming file, and a wallet too small for the hold a 429', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const long = sandboxWav(440, MAX_AUDIO + 1, 4000);
    await assert.rejects(
      client(key).audio.transcriptions.create({ model: 'svc-transcribe', file: await toFile(long, 'long.wav') }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && (e.error as { param?: string }).param === 'file',
    );
    await balanceIs(accountId, 10_000n);
    const poor = await svc.createFundedKey(5);
    await assert.rejects(
      client(poor.key).audio.transcriptions.create({
        model: 'svc-transcribe',
        file: await toFile(sandboxWav(440, 2, 8000), 'a.wav'),
      }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === 'insufficient_quota',
    );
    await balanceIs(poor.accountId, 5n);
  });

  it('an upload over limits.max_upload_bytes is a 413 request_too_large, nothing charged', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const form = new FormData();
    form.append('model', 'svc-transcribe');
    form.append('file', new Blob([Buffer.alloc(MAX_UPLOAD + 1024)], { type: 'audio/wav' }), 'big.wav');
    const res = await fetch(`${baseURL}/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: form,
    });
    const json = (await res.json()) as { error: { code: string } };
    assert.equal(res.status, 413);
    assertSchema('ErrorResponse', json);
    assert.equal(json.error.code, 'request_too_large');
    await balanceIs(accountId, 10_000n);
    assert.deepEqual(await usageOf(accountId), []);
  });

  it('moderations.create: the marker word is flagged, free', async () => {
    const { key, accountId } = await svc.createFundedKey(0);
    const { data: result, response } = await client(key)
      .moderations.create({ model: 'svc-moderation', input: ['a kind word', `a ${SANDBOX_FLAG_WORD} word`] })
      .withResponse();
    assertSchema('CreateModerationResponse', result);
    assert.equal(result.model, 'svc-moderation');
    assert.deepEqual(
      result.results.map((r) => r.flagged),
      [false, true],
    );
    assert.equal(result.results[1]?.categories.violence, true);
    assert.equal(response.headers.get('x-svc-cost'), '0');
    await balanceIs(accountId, 0n);
    assert.deepEqual(
      (await usageOf(accountId)).map((u) => [u.kind, u.cost]),
      [['moderation', 0n]],
    );
  });

  it('POST /rerank (Cohere v2): by word overlap, one search per 100 documents', async () => {
    const { key, accountId } = await svc.createFundedKey(1_000);
    const documents = [
      'the cat sat',
      'a red fox jumps',
      'red fox',
      ...Array.from({ length: 100 }, (_, i) => `filler ${i}`),
    ];
    const res = await post(key, '/rerank', { model: 'svc-rerank', query: 'red fox', documents, top_n: 2 });
    const json = (await res.json()) as {
      results: { index: number; relevance_score: number }[];
      meta: { billed_units: { search_units: number } };
    };
    assert.equal(res.status, 200, JSON.stringify(json));
    assert.deepEqual(
      json.results.map((r) => r.index),
      [1, 2],
    );
    assert.equal(json.meta.billed_units.search_units, 2);
    assert.equal(res.headers.get('x-svc-cost'), String(2n * RERANK_PER_SEARCH));
    await balanceIs(accountId, 1_000n - 2n * RERANK_PER_SEARCH);
    const wrong = await post(key, '/rerank', { model: 'svc-embed', query: 'x', documents: ['y'] });
    assert.equal(wrong.status, 400);
    assert.equal(((await wrong.json()) as { error: { param: string } }).error.param, 'model');
  });

  it('a key’s model allow-list and total spend cap apply to media calls, before any hold', async () => {
    const funded = await svc.createFundedKey(100_000);
    const limited = await svc.core.keys.create({
      accountId: funded.accountId,
      name: 'tts only',
      allowedModels: ['svc-tts'],
    });
    await assert.rejects(
      client(limited.secret).images.generate({ model: 'svc-image', prompt: 'x' }),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 403 && e.code === 'permission_denied',
    );
    const capped = await svc.core.keys.create({
      accountId: funded.accountId,
      name: 'capped',
      capTotal: IMAGE_HIGH + 1n,
    });
    await client(capped.secret).images.generate({ model: 'svc-image', prompt: 'x' });
    await assert.rejects(
      client(capped.secret).images.generate({ model: 'svc-image', prompt: 'y' }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === 'key_cap_exceeded',
    );
    await balanceIs(funded.accountId, 100_000n - IMAGE_HIGH);
  });

  it('an Idempotency-Key repeat returns the first answer without a second charge; another body is a 409', async () => {
    const { key, accountId } = await svc.createFundedKey(10_000);
    const call = (prompt: string): Promise<Response> =>
      fetch(`${baseURL}/images/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'img-1' },
        body: JSON.stringify({ model: 'svc-image', prompt, quality: 'low' }),
      });
    const first = await call('a boat');
    const firstBody = await first.text();
    assert.equal(first.headers.get('x-svc-cost'), String(IMAGE_LOW));
    const again = await call('a boat');
    assert.equal(again.status, 200);
    assert.equal(await again.text(), firstBody);
    assert.equal(again.headers.get('x-svc-cost'), '0');
    const other = await call('a train');
    assert.equal(other.status, 409);
    await balanceIs(accountId, 10_000n - IMAGE_LOW);
    assert.equal((await usageOf(accountId)).length, 1);
  });
});
