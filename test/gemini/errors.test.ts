import assert from 'node:assert/strict';
import { ApiError } from '@google/genai';
import { startGeminiFixture, type GeminiFixture } from './fixture';

type Json = Record<string, unknown>;

interface GoogleError {
  code: number;
  message: string;
  status: string;
  details?: Json[];
}

/** The SDK's ApiError carries the HTTP status and, as its message, the body Google's shape was sent in. */
function bodyOf(e: ApiError): GoogleError {
  const at = e.message.indexOf('{');
  return (JSON.parse(e.message.slice(at)) as { error: GoogleError }).error;
}

function detail(error: GoogleError, type: string): Json | undefined {
  return error.details?.find((d) => d['@type'] === `type.googleapis.com/google.rpc.${type}`);
}

/*
 * Every error row of SPEC §7c reaching `@google/genai` as its ApiError with Google's status and
 * details, and the bad input of issue 24 refused with a 400 naming the field; nothing charged.
 */
describe('Gemini API errors (@google/genai)', function () {
  this.timeout(30_000);
  let fx: GeminiFixture;

  before(async () => {
    fx = await startGeminiFixture();
  });
  beforeEach(() => fx.upstream.reset());
  after(async () => {
    await fx?.close();
  });

  async function sdkError(promise: Promise<unknown>): Promise<{ status: number; body: GoogleError }> {
    try {
      await promise;
    } catch (e) {
      assert.ok(e instanceof ApiError, String(e));
      return { status: e.status, body: bodyOf(e) };
    }
    throw new Error('expected an ApiError');
  }

  it('a bad key is 400 INVALID_ARGUMENT with ErrorInfo API_KEY_INVALID, never echoing the key', async () => {
    const bad = 'svc_sk_notarealkey0000000000000000';
    const { status, body } = await sdkError(fx.genai(bad).models.generateContent({ model: 'svc-pro', contents: 'hi' }));
    assert.equal(status, 400);
    assert.equal(body.status, 'INVALID_ARGUMENT');
    assert.equal(detail(body, 'ErrorInfo')?.['reason'], 'API_KEY_INVALID');
    assert.ok(!JSON.stringify(body).includes(bad));
    assert.equal(fx.upstream.requests.length, 0);
  });

  it('a bad key is reported before a bad body', async () => {
    const res = await fetch(`${fx.geminiURL}/v1beta/models/gemini-3.8-flash:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': 'svc_sk_notarealkey0000000000000000' },
      body: JSON.stringify({ contents: [] }),
    });
    assert.equal(res.status, 400);
    const error = ((await res.json()) as { error: GoogleError }).error;
    assert.equal(detail(error, 'ErrorInfo')?.['reason'], 'API_KEY_INVALID');
  });

  it('no key is 403 PERMISSION_DENIED', async () => {
    const res = await fetch(`${fx.geminiURL}/v1beta/models/svc-pro:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'hi' }] }] }),
    });
    assert.equal(res.status, 403);
    assert.equal(((await res.json()) as { error: GoogleError }).error.status, 'PERMISSION_DENIED');
  });

  it('a key scoped to tools is 403 PERMISSION_DENIED', async () => {
    const { accountId } = await fx.fund(1_000_000);
    const { secret } = await fx.svc.core.keys.create({ accountId, name: 'tools only', scope: 'tools' });
    const { status, body } = await sdkError(
      fx.genai(secret).models.generateContent({ model: 'svc-pro', contents: 'hi' }),
    );
    assert.equal(status, 403);
    assert.equal(body.status, 'PERMISSION_DENIED');
    assert.equal(await fx.balance(accountId), 1_000_000n);
  });

  it('an empty wallet is 429 RESOURCE_EXHAUSTED with a reason Gemini CLI does not retry', async () => {
    const { key, accountId } = await fx.fund(0);
    const { status, body } = await sdkError(fx.genai(key).models.generateContent({ model: 'svc-pro', contents: 'hi' }));
    assert.equal(status, 429);
    assert.equal(body.status, 'RESOURCE_EXHAUSTED');
    assert.equal(detail(body, 'ErrorInfo')?.['reason'], 'INSUFFICIENT_G1_CREDITS_BALANCE');
    assert.equal(detail(body, 'RetryInfo'), undefined);
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 0n);
  });

  const upstreamRows: [string, Parameters<GeminiFixture['upstream']['enqueue']>[0], number, string, string?][] = [
    ['an upstream 500', { kind: 'http_error', status: 500 }, 500, 'INTERNAL'],
    ['an upstream 503', { kind: 'http_error', status: 503 }, 503, 'UNAVAILABLE'],
    [
      'an upstream 429',
      { kind: 'http_error', status: 429, headers: { 'retry-after': '7' } },
      429,
      'RESOURCE_EXHAUSTED',
      'RetryInfo',
    ],
    [
      "an upstream's unknown model",
      {
        kind: 'http_error',
        status: 404,
        body: JSON.stringify({
          error: { message: 'The model does not exist', type: 'invalid_request_error', code: 'model_not_found' },
        }),
      },
      404,
      'NOT_FOUND',
    ],
    [
      "an upstream's refusal of the request",
      {
        kind: 'http_error',
        status: 400,
        body: JSON.stringify({
          error: {
            message: 'maximum context length exceeded',
            type: 'invalid_request_error',
            param: 'messages',
            code: 'context_length_exceeded',
          },
        }),
      },
      400,
      'INVALID_ARGUMENT',
    ],
  ];
  for (const [what, behavior, http, status, detailType] of upstreamRows) {
    it(`${what} is ${http} ${status}, nothing charged`, async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      fx.upstream.enqueue(behavior);
      const e = await sdkError(fx.genai(key).models.generateContent({ model: 'svc-pro', contents: 'hi' }));
      assert.equal(e.status, http);
      assert.equal(e.body.status, status);
      assert.equal(e.body.code, http);
      if (detailType !== undefined) assert.ok(detail(e.body, detailType), JSON.stringify(e.body));
      assert.equal((await fx.settled(accountId)).balance, 1_000_000n);
    });
  }

  it('an upstream that times out is 504 DEADLINE_EXCEEDED, nothing charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({ kind: 'hang' });
    const e = await sdkError(fx.genai(key).models.generateContent({ model: 'svc-quick-timeout', contents: 'hi' }));
    assert.equal(e.status, 504);
    assert.equal(e.body.status, 'DEADLINE_EXCEEDED');
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n);
  });

  it('an upstream failing mid-stream ends the stream with an error frame the SDK throws; nothing charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    fx.upstream.enqueue({
      kind: 'error_frame',
      afterPieces: 2,
      error: { message: 'The server had an error', type: 'server_error', code: null },
    });
    const stream = await fx.genai(key).models.generateContentStream({
      model: 'svc-pro',
      contents: 'tell me a long story',
    });
    let text = '';
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) text += chunk.text ?? '';
      })(),
      (e: unknown) => e instanceof ApiError && e.status >= 500,
    );
    assert.ok(text.length > 0, 'some text came before the failure');
    assert.equal((await fx.settled(accountId)).balance, 1_000_000n);
  });

  const tinyPng = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
  const badInput: [string, Json, string][] = [
    ['empty contents', { contents: [] }, 'contents'],
    ['a role other than user/model', { contents: [{ role: 'system', parts: [{ text: 'x' }] }] }, 'contents[0].role'],
    [
      'a functionResponse naming no earlier call',
      { contents: [{ role: 'user', parts: [{ functionResponse: { name: 'glob', response: { output: 'x' } } }] }] },
      'contents[0].parts[0].functionResponse.name',
    ],
    [
      'inlineData that is not base64',
      {
        contents: [
          { role: 'user', parts: [{ text: 'see' }, { inlineData: { mimeType: 'image/png', data: 'not base64!!' } }] },
        ],
      },
      'contents[0].parts[1].inlineData.data',
    ],
    [
      'inlineData of an unsupported MIME type',
      {
        contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'application/x-msdownload', data: tinyPng } }] }],
      },
      'contents[0].parts[0].inlineData.mimeType',
    ],
    [
      'candidateCount above what is served',
      { contents: [{ role: 'user', parts: [{ text: 'x' }] }], generationConfig: { candidateCount: 9 } },
      'generationConfig.candidateCount',
    ],
    [
      'cachedContent (svc keeps no caches)',
      { contents: [{ role: 'user', parts: [{ text: 'x' }] }], cachedContent: 'cachedContents/abc' },
      'cachedContent',
    ],
    [
      'more than one candidate with googleSearch',
      {
        contents: [{ role: 'user', parts: [{ text: 'x' }] }],
        tools: [{ googleSearch: {} }],
        generationConfig: { candidateCount: 2 },
      },
      'generationConfig.candidateCount',
    ],
    ['an unknown field', { contents: [{ role: 'user', parts: [{ text: 'x' }] }], bogus: 1 }, 'bogus'],
    [
      'a response schema without responseMimeType application/json',
      {
        contents: [{ role: 'user', parts: [{ text: 'x' }] }],
        generationConfig: { responseJsonSchema: { type: 'object' } },
      },
      'generationConfig.responseMimeType',
    ],
  ];
  for (const [what, body, field] of badInput) {
    it(`bad input: ${what} is a 400 naming ${field}, nothing charged`, async () => {
      const { key, accountId } = await fx.fund(1_000_000);
      for (const action of ['generateContent', 'streamGenerateContent?alt=sse']) {
        const res = await fetch(`${fx.geminiURL}/v1beta/models/svc-pro:${action}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
          body: JSON.stringify(body),
        });
        const error = ((await res.json()) as { error: GoogleError }).error;
        assert.equal(res.status, 400, JSON.stringify(error));
        assert.equal(error.status, 'INVALID_ARGUMENT');
        assert.ok(error.message.includes(field), error.message);
        const violation = (detail(error, 'BadRequest')?.['fieldViolations'] as Json[] | undefined)?.[0];
        assert.equal(violation?.['field'], field);
      }
      assert.equal(fx.upstream.requests.length, 0);
      assert.equal(await fx.balance(accountId), 1_000_000n);
    });
  }

  it('the SDK sees a bad field as its ApiError 400', async () => {
    const { key } = await fx.fund(1_000_000);
    const e = await sdkError(
      fx.genai(key).models.generateContent({ model: 'svc-pro', contents: 'x', config: { candidateCount: 12 } }),
    );
    assert.equal(e.status, 400);
    assert.match(e.body.message, /generationConfig\.candidateCount/);
  });
});

describe('Gemini API rate limit', function () {
  this.timeout(30_000);
  let fx: GeminiFixture;
  before(async () => {
    fx = await startGeminiFixture({ extraConfig: 'limits:\n  requests_per_minute: 1\n' });
  });
  after(async () => {
    await fx?.close();
  });

  it('is 429 RESOURCE_EXHAUSTED with a short RetryInfo (retried by Gemini CLI), nothing charged', async () => {
    const { key, accountId } = await fx.fund(1_000_000);
    await fx.genai(key).models.generateContent({ model: 'svc-sandbox', contents: 'one' });
    const spent = 1_000_000n - (await fx.balance(accountId));
    const res = await fetch(`${fx.geminiURL}/v1beta/models/svc-sandbox:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
      body: JSON.stringify({ contents: [{ parts: [{ text: 'two' }] }] }),
    });
    assert.equal(res.status, 429);
    const error = ((await res.json()) as { error: GoogleError }).error;
    assert.equal(error.status, 'RESOURCE_EXHAUSTED');
    const delay = String(detail(error, 'RetryInfo')?.['retryDelay']);
    assert.match(delay, /^\d+s$/);
    assert.ok(Number.parseInt(delay, 10) <= 60, delay);
    assert.equal(detail(error, 'ErrorInfo'), undefined);
    assert.ok(res.headers.get('retry-after'));
    assert.equal(await fx.balance(accountId), 1_000_000n - spent);
  });
});
