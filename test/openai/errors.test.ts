import assert from 'node:assert/strict';
import OpenAI, { type APIError } from 'openai';
import { assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, testConfig, type OpenAiFixture } from './fixture';
import { startSvc } from '../helpers/harness';

type ErrorClass = new (...args: never[]) => APIError;

interface Expected {
  readonly cls: ErrorClass;
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly param?: string | null | undefined;
}

async function expectApiError(promise: Promise<unknown>, expected: Expected): Promise<APIError> {
  const error = await promise.then(
    () => assert.fail('expected the call to fail'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof expected.cls, `expected ${expected.cls.name}, got ${String(error)}`);
  const e = error as APIError;
  assert.equal(e.status, expected.status);
  assert.equal(e.type, expected.type);
  assert.equal(e.code, expected.code);
  if (expected.param !== undefined) assert.equal(e.param, expected.param);
  assert.match(e.requestID ?? '', /^req_/);
  assertSchema('ErrorResponse', { error: e.error });
  return e;
}

const user = (content: string): OpenAI.Chat.Completions.ChatCompletionMessageParam[] => [{ role: 'user', content }];

describe('OpenAI API: errors', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture({ extraConfig: 'limits:\n  max_body_bytes: 65536\n' });
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('no key: 401 missing_api_key', async () => {
    const res = await fetch(`${fx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'svc-pro', messages: user('x') }),
    });
    assert.equal(res.status, 401);
    assert.match(res.headers.get('x-request-id') ?? '', /^req_/);
    const body = (await res.json()) as { error: { type: string; code: string } };
    assertSchema('ErrorResponse', body);
    assert.deepEqual([body.error.type, body.error.code], ['invalid_request_error', 'missing_api_key']);
    const client = new OpenAI({
      baseURL: fx.baseURL,
      apiKey: 'unused',
      maxRetries: 0,
      defaultHeaders: { Authorization: null },
    });
    await expectApiError(client.models.list(), {
      cls: OpenAI.AuthenticationError,
      status: 401,
      type: 'invalid_request_error',
      code: 'missing_api_key',
    });
  });

  it('bad or malformed key: 401 invalid_api_key, on every endpoint', async () => {
    const expected = {
      cls: OpenAI.AuthenticationError,
      status: 401,
      type: 'invalid_request_error',
      code: 'invalid_api_key',
    };
    const bad = fx.client('svc_sk_notARealKeyAtAll0000000000000000000000');
    await expectApiError(bad.chat.completions.create({ model: 'svc-pro', messages: user('x') }), expected);
    await expectApiError(bad.responses.create({ model: 'svc-pro', input: 'x' }), expected);
    await expectApiError(bad.models.list(), expected);
    await expectApiError(fx.client('sk-somethingelse').models.retrieve('svc-pro'), expected);
    assert.equal(fx.upstream.requests.length, 0);
  });

  it('revoked key: 401 invalid_api_key', async () => {
    const { key, keyId } = await fx.fund(1000);
    await fx.client(key).models.list();
    await fx.svc.core.keys.revoke(keyId);
    await expectApiError(fx.client(key).models.list(), {
      cls: OpenAI.AuthenticationError,
      status: 401,
      type: 'invalid_request_error',
      code: 'invalid_api_key',
    });
  });

  it('wallet cannot cover the hold: 429 insufficient_quota with x-should-retry false, nothing charged, upstream never called', async () => {
    // Below the smallest call (the prompt and 16 output tokens): a larger wallet is served a
    // fitted limit instead (test/openai/agent-loops.test.ts).
    const { key, accountId } = await fx.fund(5);
    const e = await expectApiError(
      fx.client(key).chat.completions.create({ model: 'svc-pro', messages: user('hello') }),
      {
        cls: OpenAI.RateLimitError,
        status: 429,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
      },
    );
    assert.equal(e.headers?.get('x-should-retry'), 'false');
    // The refusal says what the reservation is made of and how to make it smaller.
    assert.match(e.message, /wallet has 5 available/);
    assert.match(
      e.message,
      /plus \d+ output tokens\. The smallest call with this prompt \(16 output tokens\) needs \d+ credits: top up the wallet \(the console's Wallet page, or ask the operator\)\.$/,
    );
    await expectApiError(
      fx.client(key).chat.completions.create({ model: 'svc-pro', messages: user('hello'), stream: true }),
      {
        cls: OpenAI.RateLimitError,
        status: 429,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
      },
    );
    const r = await expectApiError(
      fx.client(key).responses.create({ model: 'svc-pro', input: 'hello', stream: true }),
      {
        cls: OpenAI.RateLimitError,
        status: 429,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
      },
    );
    assert.match(r.message, /smallest call with this prompt/);
    await expectApiError(
      fx.client(key).responses.create({ model: 'svc-pro', input: 'hello', max_output_tokens: 900 }),
      { cls: OpenAI.RateLimitError, status: 429, type: 'insufficient_quota', code: 'insufficient_quota' },
    ).then((limited) => assert.match(limited.message, /a lower max_output_tokens reserves less/));
    assert.equal(fx.upstream.requests.length, 0);
    assert.deepEqual(await fx.svc.wallet(accountId), { ...(await fx.svc.wallet(accountId)), balance: 5n, held: 0n });
  });

  it('a small max_tokens makes the hold fit a small wallet', async () => {
    const { key, accountId } = await fx.fund(50);
    fx.upstream.enqueue({ kind: 'text', text: 'ok', usage: { prompt_tokens: 10, completion_tokens: 1 } });
    await fx.client(key).chat.completions.create({ model: 'svc-pro', messages: user('hi'), max_tokens: 5 });
    assert.equal(fx.upstream.requests[0]?.body['max_tokens'], 5);
    assert.equal(await fx.balance(accountId), 50n - expectedCost(10, 1));
  });

  it('unknown model: 404 model_not_found', async () => {
    const { key, accountId } = await fx.fund(10_000);
    const client = fx.client(key);
    const expected = {
      cls: OpenAI.NotFoundError,
      status: 404,
      type: 'invalid_request_error',
      code: 'model_not_found',
      // OpenAI names no param for an unknown model.
      param: null,
    };
    await expectApiError(client.chat.completions.create({ model: 'gpt-nope', messages: user('x') }), expected);
    await expectApiError(
      client.chat.completions.create({ model: 'gpt-nope', messages: user('x'), stream: true }),
      expected,
    );
    await expectApiError(client.responses.create({ model: 'gpt-nope', input: 'x' }), expected);
    await expectApiError(client.models.retrieve('gpt-nope'), expected);
    assert.equal(await fx.balance(accountId), 10_000n);
  });

  it('invalid JSON: 400', async () => {
    const { key } = await fx.fund(10_000);
    const res = await fetch(`${fx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"model": "svc-pro", ',
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: { type: string } };
    assertSchema('ErrorResponse', body);
    assert.equal(body.error.type, 'invalid_request_error');
    assert.match(res.headers.get('x-request-id') ?? '', /^req_/);
  });

  // The code is OpenAI's own: invalid_type for a wrong type, *_above_max_value / *_below_min_value
  // for a number out of range, invalid_value for the rest.
  const badBodies: [string, Record<string, unknown>, string, string?][] = [
    ['messages not an array', { model: 'svc-pro', messages: 'hello' }, 'messages', 'invalid_type'],
    ['empty messages', { model: 'svc-pro', messages: [] }, 'messages'],
    ['missing messages', { model: 'svc-pro' }, 'messages'],
    ['missing model', { messages: user('x') }, 'model'],
    ['unknown role', { model: 'svc-pro', messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role'],
    [
      'content of the wrong type',
      { model: 'svc-pro', messages: [{ role: 'user', content: 42 }] },
      'messages[0].content',
      'invalid_type',
    ],
    ['user message without content', { model: 'svc-pro', messages: [{ role: 'user' }] }, 'messages[0].content'],
    [
      'tool message without tool_call_id',
      { model: 'svc-pro', messages: [{ role: 'tool', content: 'x' }] },
      'messages[0].tool_call_id',
    ],
    [
      'negative max_tokens',
      { model: 'svc-pro', messages: user('x'), max_tokens: -5 },
      'max_tokens',
      'integer_below_min_value',
    ],
    [
      'negative max_completion_tokens',
      { model: 'svc-pro', messages: user('x'), max_completion_tokens: -1 },
      'max_completion_tokens',
      'integer_below_min_value',
    ],
    [
      'max_tokens not an integer',
      { model: 'svc-pro', messages: user('x'), max_tokens: 'many' },
      'max_tokens',
      'invalid_type',
    ],
    [
      'temperature out of range',
      { model: 'svc-pro', messages: user('x'), temperature: 3 },
      'temperature',
      'decimal_above_max_value',
    ],
    ['top_p out of range', { model: 'svc-pro', messages: user('x'), top_p: 1.5 }, 'top_p', 'decimal_above_max_value'],
    ['n of zero', { model: 'svc-pro', messages: user('x'), n: 0 }, 'n', 'integer_below_min_value'],
    [
      'tool schema not an object schema',
      {
        model: 'svc-pro',
        messages: user('x'),
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }],
      },
      'tools[0].function.parameters',
    ],
    [
      'tool schema not an object at all',
      {
        model: 'svc-pro',
        messages: user('x'),
        tools: [{ type: 'function', function: { name: 'f', parameters: 'nope' } }],
      },
      'tools[0].function.parameters',
      'invalid_type',
    ],
    [
      'tool name invalid',
      { model: 'svc-pro', messages: user('x'), tools: [{ type: 'function', function: { name: 'has space' } }] },
      'tools[0].function.name',
    ],
    [
      'tool type unsupported',
      { model: 'svc-pro', messages: user('x'), tools: [{ type: 'retrieval' }] },
      'tools[0].type',
    ],
    [
      'tool_choice names no tool',
      {
        model: 'svc-pro',
        messages: user('x'),
        tools: [{ type: 'function', function: { name: 'f' } }],
        tool_choice: { type: 'function', function: { name: 'g' } },
      },
      'tool_choice',
    ],
    ['bad tool_choice mode', { model: 'svc-pro', messages: user('x'), tool_choice: 'sometimes' }, 'tool_choice'],
    [
      'bad response_format',
      { model: 'svc-pro', messages: user('x'), response_format: { type: 'yaml' } },
      'response_format.type',
    ],
    ['too many stop sequences', { model: 'svc-pro', messages: user('x'), stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
    ['stream not a boolean', { model: 'svc-pro', messages: user('x'), stream: 'yes' }, 'stream', 'invalid_type'],
  ];
  for (const [name, body, param, code = 'invalid_value'] of badBodies) {
    it(`bad input, ${name}: 400 with param ${param} and no charge`, async () => {
      const { key, accountId } = await fx.fund(10_000);
      const create = fx.client(key).chat.completions.create as (b: unknown) => Promise<unknown>;
      await expectApiError(create.call(fx.client(key).chat.completions, body), {
        cls: OpenAI.BadRequestError,
        status: 400,
        type: 'invalid_request_error',
        code,
        param,
      });
      assert.equal(fx.upstream.requests.length, 0);
      assert.equal(await fx.balance(accountId), 10_000n);
    });
  }

  const badResponses: [string, Record<string, unknown>, string][] = [
    ['input of the wrong type', { model: 'svc-pro', input: 42 }, 'input'],
    [
      'item with an unknown role',
      { model: 'svc-pro', input: [{ type: 'message', role: 'wizard', content: 'x' }] },
      'input[0].role',
    ],
    [
      'function_call_output without call_id',
      { model: 'svc-pro', input: [{ type: 'function_call_output', output: 'x' }] },
      'input[0].call_id',
    ],
    [
      'function tool schema not an object',
      { model: 'svc-pro', input: 'x', tools: [{ type: 'function', name: 'f', parameters: { type: 'array' } }] },
      'tools[0].parameters',
    ],
    ['max_tool_calls negative', { model: 'svc-pro', input: 'x', max_tool_calls: -3 }, 'max_tool_calls'],
    ['instructions not a string', { model: 'svc-pro', input: 'x', instructions: ['a'] }, 'instructions'],
  ];
  for (const [name, body, param] of badResponses) {
    it(`bad Responses input, ${name}: 400 with param ${param}`, async () => {
      const { key, accountId } = await fx.fund(10_000);
      const create = fx.client(key).responses.create as (b: unknown) => Promise<unknown>;
      await expectApiError(create.call(fx.client(key).responses, body), {
        cls: OpenAI.BadRequestError,
        status: 400,
        type: 'invalid_request_error',
        code: 'invalid_value',
        param,
      });
      assert.equal(fx.upstream.requests.length, 0);
      assert.equal(await fx.balance(accountId), 10_000n);
    });
  }

  it('body too large: 413 request_too_large', async () => {
    const { key, accountId } = await fx.fund(10_000);
    const e = await expectApiError(
      fx.client(key).chat.completions.create({ model: 'svc-pro', messages: user('x'.repeat(70_000)) }),
      {
        cls: OpenAI.APIError,
        status: 413,
        type: 'invalid_request_error',
        code: 'request_too_large',
      },
    );
    assert.equal(e.status, 413);
    assert.equal(await fx.balance(accountId), 10_000n);
  });

  // An upstream's refusal of the request (400, 404, 422) and its rate limit (429) are the
  // client's own errors: test/openai/upstream-errors.test.ts.
  const upstreamFailures: [string, Parameters<OpenAiFixture['upstream']['enqueue']>[0], number, string][] = [
    ['HTTP 500', { kind: 'http_error', status: 500 }, 502, 'upstream_error'],
    ['HTTP 401 (a bad upstream key)', { kind: 'http_error', status: 401 }, 502, 'upstream_error'],
    ['HTTP 503', { kind: 'http_error', status: 503 }, 503, 'upstream_unavailable'],
    ['garbage instead of JSON', { kind: 'garbage' }, 502, 'upstream_error'],
    ['JSON that is not a completion', { kind: 'garbage', body: '{"hello":"world"}' }, 502, 'upstream_error'],
  ];
  for (const [name, behavior, status, code] of upstreamFailures) {
    it(`upstream ${name}: ${status} ${code}, no detail leaked, nothing charged`, async () => {
      const { key, accountId } = await fx.fund(10_000);
      fx.upstream.enqueue(behavior, behavior, behavior);
      const client = fx.client(key);
      const expected = { cls: OpenAI.InternalServerError, status, type: 'server_error', code };
      const e = await expectApiError(
        client.chat.completions.create({ model: 'svc-pro', messages: user('x') }),
        expected,
      );
      assert.doesNotMatch(e.message, /127\.0\.0\.1|upstream failure|oops|HTTP \d/);
      await expectApiError(
        client.chat.completions.create({ model: 'svc-pro', messages: user('x'), stream: true }),
        expected,
      );
      await expectApiError(client.responses.create({ model: 'svc-pro', input: 'x' }), expected);
      const w = await fx.svc.wallet(accountId);
      assert.deepEqual([w.balance, w.held], [10_000n, 0n]);
      // One usage record per request, each a free failure carrying the error code.
      const usage = await fx.svc.store.db
        .selectFrom('usage_records')
        .selectAll()
        .where('account_id', '=', accountId)
        .execute();
      assert.deepEqual(usage.map((u) => [u.kind, u.status, u.cost, u.error_code]).sort(), [
        ['chat', 'error', 0n, code],
        ['chat', 'error', 0n, code],
        ['responses', 'error', 0n, code],
      ]);
    });
  }

  it('upstream that hangs: 504 upstream_timeout, nothing charged', async () => {
    const { key, accountId } = await fx.fund(10_000);
    fx.upstream.enqueue({ kind: 'hang' }, { kind: 'hang' });
    const client = fx.client(key);
    const expected = { cls: OpenAI.InternalServerError, status: 504, type: 'server_error', code: 'upstream_timeout' };
    await expectApiError(client.chat.completions.create({ model: 'svc-quick-timeout', messages: user('x') }), expected);
    await expectApiError(
      client.chat.completions.create({ model: 'svc-quick-timeout', messages: user('x'), stream: true }),
      expected,
    );
    const w = await fx.svc.wallet(accountId);
    assert.deepEqual([w.balance, w.held], [10_000n, 0n]);
  });

  it('upstream unreachable: 503 upstream_unavailable', async () => {
    const closed = await startOpenAiFixture();
    const url = closed.upstream.baseUrl;
    await closed.close();
    const svc = await startSvc({ config: testConfig(url) });
    try {
      const { key, accountId } = await svc.createFundedKey(10_000);
      const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
      await expectApiError(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }), {
        cls: OpenAI.InternalServerError,
        status: 503,
        type: 'server_error',
        code: 'upstream_unavailable',
      });
      assert.equal((await svc.wallet(accountId)).balance, 10_000n);
    } finally {
      await svc.close();
    }
  });

  for (const kind of ['cut', 'truncate'] as const) {
    it(`a stream ${kind === 'cut' ? 'whose connection drops' : 'that ends without finishing'} mid-way ends in an in-stream error frame and costs nothing`, async () => {
      const { key, accountId } = await fx.fund(10_000);
      fx.upstream.enqueue({ kind, afterPieces: 3 });
      const stream = await fx
        .client(key)
        .chat.completions.create({ model: 'svc-pro', messages: user('x'), stream: true });
      let text = '';
      const error = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.equal(text, 'one two three ');
      assert.ok(error instanceof OpenAI.APIError, `expected an APIError, got ${String(error)}`);
      assert.ok(['upstream_error', 'upstream_unavailable'].includes(String((error as APIError).code)));
      assert.equal((error as APIError).type, 'server_error');
      const w = await fx.settled(accountId);
      assert.equal(w.balance, 10_000n);
    });
  }

  it('a stream that stalls mid-way ends in an upstream_timeout frame and costs nothing', async () => {
    const { key, accountId } = await fx.fund(10_000);
    fx.upstream.enqueue({ kind: 'stall', afterPieces: 2 });
    const stream = await fx
      .client(key)
      .chat.completions.create({ model: 'svc-quick-timeout', messages: user('x'), stream: true });
    const error = await (async () => {
      for await (const _chunk of stream) void _chunk;
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof OpenAI.APIError);
    assert.equal((error as APIError).code, 'upstream_timeout');
    assert.equal((await fx.settled(accountId)).balance, 10_000n);
  });

  it('GET /responses/{unknown}: 404 not_found; unknown route: 404', async () => {
    const { key } = await fx.fund(10_000);
    await expectApiError(fx.client(key).responses.retrieve('resp_doesnotexist'), {
      cls: OpenAI.NotFoundError,
      status: 404,
      type: 'invalid_request_error',
      code: 'not_found',
    });
    const res = await fetch(`${fx.baseURL}/fine_tuning/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: '{}',
    });
    assert.equal(res.status, 404);
    assertSchema('ErrorResponse', await res.json());
  });
});

describe('OpenAI API: rate limit', function () {
  let fx: OpenAiFixture;
  before(async () => {
    fx = await startOpenAiFixture({ extraConfig: 'limits:\n  requests_per_minute: 2\n' });
  });
  after(async () => {
    await fx.close();
  });

  it('429 rate_limit_exceeded with retry-after and x-ratelimit-* headers', async () => {
    const { key } = await fx.fund(10_000);
    const client = fx.client(key);
    const ok = await client.models.list().withResponse();
    assert.equal(ok.response.headers.get('x-ratelimit-limit-requests'), '2');
    await client.models.list();
    const e = await expectApiError(client.models.list(), {
      cls: OpenAI.RateLimitError,
      status: 429,
      type: 'requests',
      code: 'rate_limit_exceeded',
    });
    assert.match(e.headers?.get('retry-after') ?? '', /^\d+$/);
    assert.equal(e.headers?.get('x-ratelimit-remaining-requests'), '0');
    assert.equal(e.headers?.get('x-ratelimit-limit-requests'), '2');
  });
});
