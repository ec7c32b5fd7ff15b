import assert from 'node:assert/strict';
import { encode } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import OpenAI, { toFile } from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertSchema } from '../helpers/openapi';
import { sandboxWav } from '../../core/providers/media/sandbox';
import {
  FAKE_EDIT_IMAGE_TOKENS,
  FAKE_IMAGE_TOKENS,
  FAKE_SECONDS,
  FAKE_TRANSCRIPT,
  fakeSpeech,
  startFakeMediaUpstream,
  type FakeMediaUpstream,
} from '../fakes/media-upstream';

/*
 * SPEC §14 through the `openai` and `cohere` upstreams (a fake speaking their wires): what goes
 * upstream, what comes back, and the wallet to the credit — including a content-policy refusal,
 * an upstream failure and an image call that made no image, which cost nothing.
 */

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;

function config(upstream: FakeMediaUpstream): string {
  const openai = `provider: openai\n    base_url: ${upstream.baseUrl}\n    api_key: up-secret`;
  return `models:
  up-image:
    kind: image
    ${openai}
    upstream_model: dall-e-3
    price: { per_image: { "1024x1024/standard": 2800, "1024x1024/hd": 5600, "1792x1024/hd": 8400 } }
  up-gpt-image:
    kind: image
    ${openai}
    upstream_model: gpt-image-1
    max_output_tokens: 5000
    price: { input_per_1m: 700000, output_per_1m: 2800000 }
  up-tts:
    kind: speech
    ${openai}
    upstream_model: tts-1
    price: { per_1m_characters: 1050000 }
  up-whisper:
    kind: transcription
    ${openai}
    upstream_model: whisper-1
    price: { per_minute: 4200 }
  up-mod:
    kind: moderation
    ${openai}
    upstream_model: omni-moderation-latest
    price: { input_per_1m: 100000 }
  up-rerank:
    kind: rerank
    provider: cohere
    base_url: ${upstream.root}
    api_key: co-secret
    upstream_model: rerank-v3.5
    price: { per_search: 1400 }
  up-fallback:
    kind: transcription
    price: { per_minute: 4200 }
    upstreams:
      - provider: openai
        base_url: ${upstream.baseUrl}
        api_key: first
        upstream_model: whisper-first
        priority: 1
      - provider: openai
        base_url: ${upstream.baseUrl}
        api_key: second
        upstream_model: whisper-second
        priority: 2
  up-rerank-compat:
    kind: rerank
    ${openai}
    upstream_model: jina-reranker-v2
    price: { per_search: 1000 }
`;
}

describe('media through the openai and cohere upstreams (SPEC §14)', function () {
  this.timeout(60_000);
  let upstream: FakeMediaUpstream;
  let svc: TestSvc;
  let baseURL: string;

  before(async () => {
    upstream = await startFakeMediaUpstream();
    svc = await startSvc({ config: config(upstream) });
    baseURL = `${svc.baseUrl}/v1/openai`;
  });
  after(async () => {
    await svc.close();
    await upstream.close();
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });

  async function balanceIs(accountId: string, expected: bigint): Promise<void> {
    const wallet = await svc.wallet(accountId);
    assert.equal(wallet.balance, expected);
    assert.equal(wallet.held, 0n, 'no hold is left');
  }

  async function usageOf(accountId: string): Promise<{ kind: string; cost: bigint; status: string }[]> {
    const rows = await svc.store.db
      .selectFrom('usage_records')
      .select(['kind', 'cost', 'status'])
      .where('account_id', '=', accountId)
      .execute();
    return rows.map((r) => ({ kind: r.kind, cost: BigInt(r.cost), status: r.status }));
  }

  it('images.generate (dall-e-3, per image): forwarded as asked, charged n × the price of the asked size and quality', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const { data: result, response } = await client(key)
      .images.generate({
        model: 'up-image',
        prompt: 'a lighthouse',
        n: 2,
        size: '1024x1024',
        quality: 'hd',
        response_format: 'b64_json',
      })
      .withResponse();
    assertSchema('ImagesResponse', result);
    assert.equal(result.data?.length, 2);
    const seen = upstream.requests.at(-1);
    assert.equal(seen?.path, '/v1/images/generations');
    assert.equal(seen?.authorization, 'Bearer up-secret');
    assert.deepEqual(seen?.body, {
      model: 'dall-e-3',
      prompt: 'a lighthouse',
      n: 2,
      size: '1024x1024',
      quality: 'hd',
      response_format: 'b64_json',
    });
    assert.equal(response.headers.get('x-svc-cost'), String(2n * 5600n));
    await balanceIs(accountId, 100_000n - 2n * 5600n);
  });

  it('an image call asking no quality is held at the dearest and settled at what the upstream says it made', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    upstream.patchNext({ size: '1024x1024', quality: 'standard' });
    const result = await client(key).images.generate({ model: 'up-image', prompt: 'a cat', n: 3 });
    // dall-e's own words are kept out of the answer where OpenAI's schema has no such value.
    assertSchema('ImagesResponse', result);
    assert.equal(result.data?.[0]?.url, 'https://fake.example/img/0.png');
    await balanceIs(accountId, 100_000n - 3n * 2800n);
    // A wallet that covers one standard image but not the dearest hold is refused before the upstream.
    const poor = await svc.createFundedKey(8399);
    const calls = upstream.requests.length;
    await assert.rejects(
      client(poor.key).images.generate({ model: 'up-image', prompt: 'a cat' }),
      (e: unknown) => e instanceof OpenAI.RateLimitError && e.code === 'insufficient_quota',
    );
    assert.equal(upstream.requests.length, calls, 'the upstream was not asked');
    await balanceIs(poor.accountId, 8399n);
  });

  it('a GPT image model (tokens): response_format b64_json is served, not sent; charged from the reported usage', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const result = await client(key).images.generate({
      model: 'up-gpt-image',
      prompt: 'a lighthouse',
      response_format: 'b64_json',
    });
    assertSchema('ImagesResponse', result);
    assert.ok(result.data?.[0]?.b64_json);
    assert.equal(result.usage?.output_tokens, FAKE_IMAGE_TOKENS.output_tokens);
    const seen = upstream.requests.at(-1);
    assert.equal(seen?.body['model'], 'gpt-image-1');
    assert.equal(seen?.body['response_format'], undefined);
    const cost = ceilDiv(
      BigInt(FAKE_IMAGE_TOKENS.input_tokens) * 700_000n + BigInt(FAKE_IMAGE_TOKENS.output_tokens) * 2_800_000n,
      1_000_000n,
    );
    await balanceIs(accountId, 100_000n - cost);
    const url = await fetch(`${baseURL}/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up-gpt-image', prompt: 'x', response_format: 'url' }),
    });
    assert.equal(url.status, 400);
    assert.equal(((await url.json()) as { error: { param: string } }).error.param, 'response_format');
  });

  it('images.edit through the upstream: image[] and mask go as multipart', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const png = Buffer.from('not really a png, the fake does not look');
    const result = await client(key).images.edit({
      model: 'up-gpt-image',
      prompt: 'add a hat',
      image: [await toFile(png, 'a.png', { type: 'image/png' }), await toFile(png, 'b.png', { type: 'image/png' })],
      mask: await toFile(png, 'm.png', { type: 'image/png' }),
    });
    assertSchema('ImagesResponse', result);
    const seen = upstream.requests.at(-1);
    assert.equal(seen?.path, '/v1/images/edits');
    assert.deepEqual(
      seen?.files.map((f) => [f.field, f.filename, f.size]),
      [
        ['image[]', 'a.png', png.length],
        ['image[]', 'b.png', png.length],
        ['mask', 'm.png', png.length],
      ],
    );
    assert.equal(seen?.body['prompt'], 'add a hat');
    assert.equal(seen?.body['model'], 'gpt-image-1');
    // The two input images' tokens too (no image_input_per_1m: at the input price).
    assert.deepEqual(result.usage?.input_tokens_details, {
      text_tokens: FAKE_IMAGE_TOKENS.input_tokens,
      image_tokens: 2 * FAKE_EDIT_IMAGE_TOKENS,
    });
    const cost = ceilDiv(
      BigInt(FAKE_IMAGE_TOKENS.input_tokens + 2 * FAKE_EDIT_IMAGE_TOKENS) * 700_000n +
        BigInt(FAKE_IMAGE_TOKENS.output_tokens) * 2_800_000n,
      1_000_000n,
    );
    await balanceIs(accountId, 100_000n - cost);
  });

  it('a content-policy refusal comes back as OpenAI words it and costs nothing; so does a failure and an empty answer', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const refusal = {
      error: {
        code: 'content_policy_violation',
        message: 'Your request was rejected as a result of our safety system.',
        param: null,
        type: 'invalid_request_error',
      },
    };
    upstream.failNext(400, refusal);
    const res = await fetch(`${baseURL}/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'up-image', prompt: 'something refused' }),
    });
    const json = (await res.json()) as { error: { code: string; message: string; type: string } };
    assert.equal(res.status, 400);
    assertSchema('ErrorResponse', json);
    assert.equal(json.error.code, 'content_policy_violation');
    assert.equal(json.error.type, 'invalid_request_error');
    assert.match(json.error.message, /safety system/);
    upstream.failNext(500, { error: { message: 'boom', type: 'server_error' } });
    await assert.rejects(
      client(key).audio.speech.create({ model: 'up-tts', input: 'hello', voice: 'alloy' }),
      (e: unknown) => e instanceof OpenAI.APIError && (e.status ?? 0) >= 500,
    );
    upstream.patchNext({ data: [] });
    const empty = await client(key).images.generate({
      model: 'up-image',
      prompt: 'nothing',
      size: '1024x1024',
      quality: 'hd',
    });
    assert.deepEqual(empty.data, []);
    await balanceIs(accountId, 100_000n);
    assert.deepEqual(
      (await usageOf(accountId)).map((u) => [u.kind, u.cost, u.status]).sort(),
      [
        ['image', 0n, 'empty'],
        ['image', 0n, 'error'],
        ['speech', 0n, 'error'],
      ].sort(),
    );
  });

  it('audio.speech.create through the upstream: its bytes, charged by code points', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const input = 'Hello there';
    const response = await client(key).audio.speech.create({ model: 'up-tts', input, voice: 'nova', speed: 1.25 });
    assert.deepEqual(Buffer.from(await response.arrayBuffer()), fakeSpeech(input));
    assert.equal(response.headers.get('content-type'), 'audio/mpeg');
    assert.deepEqual(upstream.requests.at(-1)?.body, { model: 'tts-1', input, voice: 'nova', speed: 1.25 });
    await balanceIs(accountId, 100_000n - ceilDiv(11n * 1_050_000n, 1_000_000n));
  });

  it('transcription: held for the WAV’s duration, settled at the duration the upstream reports; srt rendered from verbose_json', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const wav = sandboxWav(440, 2.5, 8000);
    const result = await client(key).audio.transcriptions.create({
      model: 'up-whisper',
      file: await toFile(wav, 'talk.wav', { type: 'audio/wav' }),
      language: 'en',
    });
    assertSchema('CreateTranscriptionResponseJson', result);
    assert.equal(result.text, FAKE_TRANSCRIPT);
    const seen = upstream.requests.at(-1);
    assert.equal(seen?.path, '/v1/audio/transcriptions');
    assert.deepEqual(seen?.body, { model: 'whisper-1', language: 'en', response_format: 'json' });
    assert.deepEqual(seen?.files, [{ field: 'file', filename: 'talk.wav', size: wav.length }]);
    const each = ceilDiv(BigInt(FAKE_SECONDS) * 4200n, 60n);
    await balanceIs(accountId, 100_000n - each);
    const srt = await client(key).audio.translations.create({
      model: 'up-whisper',
      file: await toFile(wav, 'talk.wav', { type: 'audio/wav' }),
      response_format: 'srt',
    });
    assert.equal(upstream.requests.at(-1)?.path, '/v1/audio/translations');
    assert.equal(upstream.requests.at(-1)?.body['response_format'], 'verbose_json');
    assert.equal(
      String(srt),
      '1\n00:00:00,000 --> 00:00:01,250\nHello from\n\n2\n00:00:01,250 --> 00:00:02,000\nthe fake upstream.\n',
    );
    await balanceIs(accountId, 100_000n - 2n * each);
  });

  it('moderation priced by tokens: svc counts them (the upstream reports none), marked estimated', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const input = ['some text to check', 'and another one'];
    const { data: result, response } = await client(key).moderations.create({ model: 'up-mod', input }).withResponse();
    assertSchema('CreateModerationResponse', result);
    assert.equal(result.model, 'up-mod');
    assert.equal(upstream.requests.at(-1)?.body['model'], 'omni-moderation-latest');
    const tokens = BigInt(input.reduce((sum, t) => sum + encode(t).length, 0));
    const cost = ceilDiv(tokens * 100_000n, 1_000_000n);
    assert.equal(response.headers.get('x-svc-cost'), String(cost));
    assert.equal(response.headers.get('x-svc-estimated'), 'true');
    await balanceIs(accountId, 100_000n - cost);
  });

  it('rerank on cohere’s v2 wire and on an OpenAI-compatible host: charged per search unit reported', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const documents = ['alpha', 'beta', 'gamma'];
    for (const [model, path, upstreamModel, auth, price] of [
      ['up-rerank', '/v2/rerank', 'rerank-v3.5', 'Bearer co-secret', 1400n],
      ['up-rerank-compat', '/v1/rerank', 'jina-reranker-v2', 'Bearer up-secret', 1000n],
    ] as const) {
      const before = (await svc.wallet(accountId)).balance;
      const res = await fetch(`${baseURL}/rerank`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, query: 'which', documents, top_n: 2 }),
      });
      const json = (await res.json()) as {
        id: string;
        results: { index: number; relevance_score: number }[];
        meta: { billed_units: { search_units: number } };
      };
      assert.equal(res.status, 200, JSON.stringify(json));
      assert.deepEqual(
        json.results.map((r) => r.index),
        [2, 1],
      );
      assert.equal(json.meta.billed_units.search_units, 1);
      const seen = upstream.requests.at(-1);
      assert.equal(seen?.path, path);
      assert.equal(seen?.authorization, auth);
      assert.deepEqual(seen?.body, { model: upstreamModel, query: 'which', documents, top_n: 2 });
      assert.equal(res.headers.get('x-svc-cost'), String(price));
      await balanceIs(accountId, before - price);
    }
  });

  it('several upstreams: a failing first one falls back to the next, the multipart upload re-sent, charged once', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    const calls = upstream.requests.length;
    upstream.failNext(503, { error: { message: 'overloaded', type: 'server_error' } });
    // 2.5 s: held for 3 s, charged for the 2 s the upstream reports.
    const wav = sandboxWav(440, 2.5, 8000);
    const result = await client(key).audio.transcriptions.create({
      model: 'up-fallback',
      file: await toFile(wav, 'a.wav', { type: 'audio/wav' }),
    });
    assert.equal(result.text, FAKE_TRANSCRIPT);
    const seen = upstream.requests.slice(calls);
    assert.deepEqual(
      seen.map((r) => [r.authorization, r.body['model'], r.files[0]?.size]),
      [
        ['Bearer first', 'whisper-first', wav.length],
        ['Bearer second', 'whisper-second', wav.length],
      ],
    );
    await balanceIs(accountId, 100_000n - ceilDiv(BigInt(FAKE_SECONDS) * 4200n, 60n));
    assert.equal((await usageOf(accountId)).length, 1);
  });

  it('an upstream reporting more audio than the file holds is charged at the hold, never more', async () => {
    const { key, accountId } = await svc.createFundedKey(100_000);
    // 1 s of audio is held as 1 s; the fake reports 2 s.
    await client(key).audio.transcriptions.create({
      model: 'up-whisper',
      file: await toFile(sandboxWav(440, 1, 8000), 'short.wav', { type: 'audio/wav' }),
    });
    await balanceIs(accountId, 100_000n - ceilDiv(1n * 4200n, 60n));
  });
});
