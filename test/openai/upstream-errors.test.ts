import assert from 'node:assert/strict';
import OpenAI, { type APIError } from 'openai';
import { retryAfterSeconds, scrubUpstreamMessage, statusError } from '../../core/providers/llm/openai/errors';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { assertSchema } from '../helpers/openapi';
import { expectedCost, startOpenAiFixture, type OpenAiFixture } from './fixture';

const user = (content: string): OpenAI.Chat.Completions.ChatCompletionMessageParam[] => [{ role: 'user', content }];

const CONTEXT_TOO_LONG = {
  message:
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
  type: 'invalid_request_error',
  param: 'messages',
  code: 'context_length_exceeded',
};

const httpError = (status: number, error: Record<string, unknown>, headers?: Record<string, string>): FakeBehavior => ({
  kind: 'http_error',
  status,
  body: JSON.stringify({ error }),
  ...(headers === undefined ? {} : { headers }),
});

async function failure(promise: Promise<unknown>): Promise<APIError> {
  const error = await promise.then(
    () => assert.fail('expected the call to fail'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof OpenAI.APIError, `expected an APIError, got ${String(error)}`);
  return error;
}

/** Issue 13, point 6: an upstream's refusal is the client's own error, never retried or charged. */
describe('OpenAI API: upstream client errors', function () {
  let fx: OpenAiFixture;

  before(async () => {
    fx = await startOpenAiFixture();
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  /** The account paid nothing: wallet and ledger as funded, every usage record a free error. */
  async function assertNothingCharged(accountId: string, funded: bigint, requests: number): Promise<void> {
    const w = await fx.svc.wallet(accountId);
    assert.deepEqual([w.balance, w.held], [funded, 0n]);
    const ledger = await fx.svc.ledger(accountId);
    assert.deepEqual(
      ledger.map((e) => e.kind),
      ['topup'],
    );
    const usage = await fx.svc.store.db
      .selectFrom('usage_records')
      .select(['status', 'cost', 'input_tokens', 'output_tokens'])
      .where('account_id', '=', accountId)
      .execute();
    // One record per request that reached svc: the count of svc's attempts.
    assert.equal(usage.length, requests);
    for (const u of usage) assert.deepEqual([u.status, u.cost, u.input_tokens, u.output_tokens], ['error', 0n, 0n, 0n]);
  }

  const refusals: [
    string,
    FakeBehavior,
    {
      status: number;
      cls: abstract new (...args: never[]) => APIError;
      code: string | null;
      param: string | null;
      type?: string;
    },
  ][] = [
    [
      '400 context_length_exceeded',
      httpError(400, CONTEXT_TOO_LONG),
      { status: 400, cls: OpenAI.BadRequestError, code: 'context_length_exceeded', param: 'messages' },
    ],
    [
      '400 unsupported_parameter',
      httpError(400, {
        message:
          "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        type: 'invalid_request_error',
        param: 'max_tokens',
        code: 'unsupported_parameter',
      }),
      { status: 400, cls: OpenAI.BadRequestError, code: 'unsupported_parameter', param: 'max_tokens' },
    ],
    [
      '422 from a vLLM-style server',
      {
        kind: 'http_error',
        status: 422,
        body: JSON.stringify({ message: 'temperature must be at most 2.0', code: 422 }),
      },
      { status: 400, cls: OpenAI.BadRequestError, code: null, param: null },
    ],
    [
      // svc's configuration names an upstream_model its provider does not know: not the client's fault.
      '404 model_not_found',
      httpError(404, {
        message: 'The model `fake-model-1` does not exist or you do not have access to it.',
        type: 'invalid_request_error',
        param: null,
        code: 'model_not_found',
      }),
      { status: 502, cls: OpenAI.InternalServerError, code: 'upstream_error', param: null, type: 'server_error' },
    ],
  ];

  for (const [name, behavior, expected] of refusals) {
    it(`upstream ${name}: ${expected.status} ${expected.code} through the real client, one attempt, nothing charged`, async () => {
      const funded = 10_000n;
      const { key, accountId } = await fx.fund(funded);
      fx.upstream.enqueue(behavior, behavior, behavior, behavior, behavior, behavior, behavior, behavior, behavior);
      // The client's default retries: a refusal must not be retried.
      const client = fx.client(key, { maxRetries: 2 });
      const calls: [string, () => Promise<unknown>][] = [
        ['chat', () => client.chat.completions.create({ model: 'svc-pro', messages: user('x') })],
        ['chat stream', () => client.chat.completions.create({ model: 'svc-pro', messages: user('x'), stream: true })],
        ['responses', () => client.responses.create({ model: 'svc-pro', input: 'x' })],
      ];
      for (const [label, call] of calls) {
        const before = fx.upstream.requests.length;
        const e = await failure(call());
        assert.ok(e instanceof expected.cls, `${label}: expected ${expected.cls.name}, got ${e.constructor.name}`);
        assert.equal(e.status, expected.status, label);
        assert.equal(e.type, expected.type ?? 'invalid_request_error', label);
        assert.equal(e.code, expected.code, label);
        assert.equal(e.param, expected.param, label);
        assert.equal(e.headers?.get('x-should-retry'), 'false', label);
        assertSchema('ErrorResponse', { error: e.error });
        assert.equal(fx.upstream.requests.length, before + 1, `${label}: one attempt at the upstream`);
      }
      await assertNothingCharged(accountId, funded, calls.length);
    });
  }

  it("the upstream's message reaches the client, without keys, hosts or the upstream's model name", async () => {
    const { key } = await fx.fund(10_000);
    const host = new URL(fx.upstream.baseUrl).host;
    fx.upstream.enqueue(
      httpError(400, {
        message: `Invalid 'messages[0]' for fake-model-1 at ${fx.upstream.baseUrl}/chat/completions (host ${host}); key test-upstream-secret, sk-proj-AbCdEfGhIjKlMnOpQrStUv012345 of org-AbCdEfGh12345678.`,
        type: 'invalid_request_error',
        param: 'messages[0]',
        code: 'invalid_value',
      }),
      httpError(400, CONTEXT_TOO_LONG),
    );
    const client = fx.client(key);
    const e = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    const message = (e.error as { message: string }).message;
    assert.match(message, /^Invalid 'messages\[0\]' for svc-pro at /);
    for (const secret of ['fake-model-1', '127.0.0.1', host, 'test-upstream-secret', 'sk-proj', 'org-AbCd'])
      assert.ok(!message.includes(secret), `${secret} leaked in: ${message}`);
    const context = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    assert.equal((context.error as { message: string }).message, CONTEXT_TOO_LONG.message);
  });

  it('upstream 429: 429 rate_limit_exceeded with the upstream retry-after, one attempt, nothing charged', async () => {
    const funded = 10_000n;
    const { key, accountId } = await fx.fund(funded);
    const limited = httpError(
      429,
      {
        message: 'Rate limit reached for fake-model-1 in organization org-AbCdEfGh12345678 on tokens per min.',
        type: 'tokens',
        param: null,
        code: 'rate_limit_exceeded',
      },
      { 'retry-after': '7' },
    );
    fx.upstream.enqueue(limited, limited);
    // With the SDK's own retries on: x-should-retry: false makes it one attempt each.
    const client = fx.client(key, { maxRetries: 2 });
    for (const stream of [false, true]) {
      const e = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x'), stream }));
      assert.ok(e instanceof OpenAI.RateLimitError, e.constructor.name);
      assert.deepEqual([e.status, e.type, e.code], [429, 'requests', 'rate_limit_exceeded']);
      assert.equal(e.headers?.get('retry-after'), '7');
      assert.equal(e.headers?.get('x-should-retry'), 'false');
      assert.doesNotMatch(e.message, /org-|fake-model-1/);
    }
    assert.equal(fx.upstream.requests.length, 2);
    await assertNothingCharged(accountId, funded, 2);
  });

  it("an upstream 429 for svc's own quota, or 401 for svc's key, stays a 5xx: the client did nothing wrong", async () => {
    const { key } = await fx.fund(10_000);
    fx.upstream.enqueue(
      httpError(429, {
        message: 'You exceeded your current quota.',
        type: 'insufficient_quota',
        param: null,
        code: 'insufficient_quota',
      }),
      httpError(401, {
        message: 'Incorrect API key provided: test-ups****cret.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      }),
      httpError(400, {
        message: 'Your account is not active.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      }),
    );
    const client = fx.client(key);
    const quota = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    assert.deepEqual([quota.status, quota.code], [503, 'upstream_unavailable']);
    const auth = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    assert.deepEqual([auth.status, auth.code], [502, 'upstream_error']);
    assert.doesNotMatch(auth.message, /API key|test-ups/);
    const inactive = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    assert.deepEqual([inactive.status, inactive.code], [502, 'upstream_error']);
  });

  it('a stream the upstream refuses in its first frame is an HTTP 400; after the first chunk, an error frame; neither is charged', async () => {
    const funded = 10_000n;
    const { key, accountId } = await fx.fund(funded);
    fx.upstream.enqueue(
      { kind: 'error_frame', afterPieces: -1, error: CONTEXT_TOO_LONG },
      { kind: 'error_frame', afterPieces: 2, error: CONTEXT_TOO_LONG },
    );
    const client = fx.client(key);
    const before = await failure(
      client.chat.completions.create({ model: 'svc-pro', messages: user('x'), stream: true }),
    );
    assert.ok(before instanceof OpenAI.BadRequestError, before.constructor.name);
    assert.deepEqual([before.code, before.param], ['context_length_exceeded', 'messages']);

    const stream = await client.chat.completions.create({ model: 'svc-pro', messages: user('x'), stream: true });
    let text = '';
    const after = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().then(
      () => assert.fail('expected an error frame'),
      (e: unknown) => e,
    );
    assert.equal(text, 'one two ');
    assert.ok(after instanceof OpenAI.APIError, String(after));
    assert.equal((after as APIError).code, 'context_length_exceeded');
    assert.equal((after as APIError).type, 'invalid_request_error');
    await fx.settled(accountId);
    assert.equal(fx.upstream.requests.length, 2);
    await assertNothingCharged(accountId, funded, 2);
  });

  it('a connection closed under the request before any answer is sent again once, on another connection, and charged once', async () => {
    const { key, accountId } = await fx.fund(10_000);
    const client = fx.client(key, { maxRetries: 0 });
    const calls: [string, () => Promise<unknown>][] = [
      ['chat', () => client.chat.completions.create({ model: 'svc-pro', messages: user('x') })],
      [
        'chat stream',
        async () => {
          const stream = await client.chat.completions.create({ model: 'svc-pro', messages: user('x'), stream: true });
          for await (const _ of stream) void _;
        },
      ],
      ['responses', () => client.responses.create({ model: 'svc-pro', input: 'x' })],
    ];
    for (const [label, call] of calls) {
      const before = fx.upstream.requests.length;
      fx.upstream.enqueue({ kind: 'reset' }, { kind: 'text', usage: { prompt_tokens: 12, completion_tokens: 3 } });
      await call();
      const [closed, sent] = fx.upstream.requests.slice(before);
      assert.equal(fx.upstream.requests.length, before + 2, `${label}: the request went upstream twice`);
      assert.notEqual(sent?.remotePort, closed?.remotePort, `${label}: the second on another connection`);
    }
    const charges = (await fx.svc.ledger(accountId)).filter((e) => e.kind === 'charge');
    assert.deepEqual(
      charges.map((c) => -c.amount),
      calls.map(() => expectedCost(12, 3)),
      'each call charged once, for the answer it got',
    );

    // Only once: an upstream that closes every connection fails the call, nothing charged.
    const { key: key2, accountId: account2 } = await fx.fund(10_000);
    const before = fx.upstream.requests.length;
    fx.upstream.enqueue({ kind: 'reset' }, { kind: 'reset' });
    const e = await failure(
      fx.client(key2, { maxRetries: 0 }).chat.completions.create({ model: 'svc-pro', messages: user('x') }),
    );
    assert.deepEqual([e.status, e.code], [503, 'upstream_unavailable']);
    assert.equal(fx.upstream.requests.length, before + 2, 'two tries, no more');
    await assertNothingCharged(account2, 10_000n, 1);
  });

  it('real upstream failures keep their 5xx and stay retryable: 500 → 502, 503 → 503', async () => {
    const { key, accountId } = await fx.fund(10_000);
    fx.upstream.enqueue(
      { kind: 'http_error', status: 500 },
      { kind: 'http_error', status: 500 },
      { kind: 'http_error', status: 503 },
    );
    const client = fx.client(key, { maxRetries: 1 });
    const e = await failure(client.chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    assert.ok(e instanceof OpenAI.InternalServerError);
    assert.deepEqual([e.status, e.code], [502, 'upstream_error']);
    assert.equal(fx.upstream.requests.length, 2, 'the client retried the 502 once');
    const u = await failure(fx.client(key).chat.completions.create({ model: 'svc-pro', messages: user('x') }));
    assert.deepEqual([u.status, u.code], [503, 'upstream_unavailable']);
    await assertNothingCharged(accountId, 10_000n, 3);
  });
});

describe('upstream error mapping (units)', () => {
  const who = {
    host: 'llm.internal.example:8443',
    apiKey: 'sk-live-0123456789abcdef',
    upstreamModel: 'm-large-2025-01-31',
    modelId: 'svc-pro',
  };

  it('scrubs keys, tokens, URLs, the host and the model name, and keeps the rest of the message', () => {
    const text = scrubUpstreamMessage(
      "Model m-large-2025-01-31 at https://llm.internal.example:8443/v1 (llm.internal.example) rejected key sk-live-0123456789abcdef and Bearer abc.def; request req_8f3a9c2e7b1d4f6a9c2e7b1d: 'temperature' must be <= 2.",
      who,
    );
    assert.equal(
      text,
      "Model svc-pro at [url] (the model provider) rejected key [redacted] and Bearer [redacted] request [redacted]: 'temperature' must be <= 2.",
    );
  });

  it('reads retry-after as seconds, an HTTP date or retry-after-ms, at least 1 s', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.equal(retryAfterSeconds({ 'retry-after': '12' }, now), 12);
    assert.equal(retryAfterSeconds({ 'retry-after': '0' }, now), 1);
    assert.equal(retryAfterSeconds({ 'retry-after-ms': '2500' }, now), 3);
    assert.equal(retryAfterSeconds({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }, now), 30);
    assert.equal(retryAfterSeconds({ 'retry-after': 'soon' }, now), 1);
    assert.equal(retryAfterSeconds({}, now), 1);
  });

  it('maps statuses: refusals to the client, account trouble and failures to 5xx', () => {
    const body = (code: string, type = 'invalid_request_error') =>
      JSON.stringify({ error: { message: 'm', type, param: null, code } });
    const cases: [number, string, string][] = [
      [400, body('context_length_exceeded'), 'upstream_invalid_request'],
      [413, 'Payload Too Large', 'upstream_invalid_request'],
      [422, body('invalid_value'), 'upstream_invalid_request'],
      [400, body('invalid_api_key'), 'upstream_error'],
      [401, body('invalid_api_key'), 'upstream_error'],
      [403, body('unsupported_country_region_territory'), 'upstream_error'],
      [404, body('model_not_found'), 'upstream_not_found'],
      [404, 'Not Found', 'upstream_error'],
      [429, body('rate_limit_exceeded', 'requests'), 'upstream_rate_limited'],
      [429, body('insufficient_quota', 'insufficient_quota'), 'upstream_unavailable'],
      [408, '', 'upstream_timeout'],
      [500, body('server_error', 'server_error'), 'upstream_error'],
      [503, '', 'upstream_unavailable'],
      [504, '', 'upstream_timeout'],
    ];
    for (const [status, snippet, code] of cases)
      assert.equal(statusError(status, snippet, who).code, code, `${status} ${snippet}`);
    const plain = statusError(413, 'Payload Too Large', who);
    assert.equal(plain.message, 'The model provider rejected the request as invalid.');
  });
});
