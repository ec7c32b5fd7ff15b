import assert from 'node:assert/strict';
import Anthropic, { type APIError } from '@anthropic-ai/sdk';
import type { FakeBehavior } from '../fakes/openai-upstream';
import { assertAnthropicShape } from '../helpers/anthropic-shapes';
import { startAnthropicFixture, type AnthropicFixture } from './fixture';

type Obj = Record<string, unknown>;
type ErrorClass = abstract new (...args: never[]) => APIError;

const hi = [{ role: 'user' as const, content: 'Hi' }];

/** Awaits a refusal: the SDK's error class, status, Anthropic's error type and body shape, a request-id. */
async function expectError(
  promise: Promise<unknown>,
  cls: ErrorClass,
  status: number,
  type: string,
): Promise<APIError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof cls, `expected ${cls.name}, got ${String(error)}`);
    const e = error as APIError;
    assert.equal(e.status, status);
    assert.equal(e.type, type);
    // Anthropic documents 413 as `request_too_large`; this SDK's ErrorType union lacks it, so that
    // one body is checked against the shape with the type it has in common with the others.
    const body = e.error as { error: Obj };
    assertAnthropicShape(
      'ErrorResponse',
      type === 'request_too_large' ? { ...body, error: { ...body.error, type: 'invalid_request_error' } } : body,
    );
    assert.match(e.requestID ?? '', /^req_/);
    assert.equal((e.error as Obj)['request_id'], e.requestID);
    return e;
  }
  assert.fail('the request succeeded');
}

describe('Anthropic API: errors in Anthropic shape, with the SDK error classes', function () {
  let fx: AnthropicFixture;

  before(async () => {
    fx = await startAnthropicFixture({ extraConfig: 'limits:\n  max_body_bytes: 65536\n' });
  });
  after(async () => {
    await fx.close();
  });
  beforeEach(() => fx.upstream.reset());

  it('no key or a bad key: 401 authentication_error, before any look at the body', async () => {
    await expectError(
      fx.anthropic('').messages.create({ model: 'svc-pro', max_tokens: 5, messages: hi }),
      Anthropic.AuthenticationError,
      401,
      'authentication_error',
    );
    const bad = fx.anthropic('svc_sk_not_a_real_key_000000000000');
    await expectError(
      bad.messages.create({ model: 'svc-pro', messages: hi } as unknown as Anthropic.MessageCreateParamsNonStreaming),
      Anthropic.AuthenticationError,
      401,
      'authentication_error',
    );
    await expectError(bad.models.list(), Anthropic.AuthenticationError, 401, 'authentication_error');
  });

  it('a key without the chat scope: 403 permission_error', async () => {
    const funded = await fx.fund(10_000);
    const { secret } = await fx.svc.core.keys.create({ accountId: funded.accountId, name: 'tools', scope: 'tools' });
    await expectError(
      fx.anthropic(secret).messages.create({ model: 'svc-pro', max_tokens: 5, messages: hi }),
      Anthropic.PermissionDeniedError,
      403,
      'permission_error',
    );
  });

  it('an unknown model: 404 not_found_error; an unknown route too', async () => {
    const { key, accountId } = await fx.fund(10_000);
    await expectError(
      fx.anthropic(key).messages.create({ model: 'no-such-model', max_tokens: 5, messages: hi }),
      Anthropic.NotFoundError,
      404,
      'not_found_error',
    );
    await expectError(
      fx.anthropic(key).models.retrieve('no-such-model'),
      Anthropic.NotFoundError,
      404,
      'not_found_error',
    );
    const response = await fetch(`${fx.anthropicURL}/v1/nothing`, { headers: { 'x-api-key': key } });
    assert.equal(response.status, 404);
    assert.equal(((await response.json()) as { error: Obj }).error['type'], 'not_found_error');
    assert.equal(await fx.balance(accountId), 10_000n);
  });

  it('a body over the limit: 413 request_too_large', async () => {
    const { key } = await fx.fund(10_000);
    await expectError(
      fx.anthropic(key).messages.create({
        model: 'svc-pro',
        max_tokens: 5,
        messages: [{ role: 'user', content: 'x'.repeat(100_000) }],
      }),
      Anthropic.ContentTooLargeError,
      413,
      'request_too_large',
    );
  });

  it('a wallet that cannot cover the hold: 402 billing_error, x-should-retry false, nothing charged, upstream never called', async () => {
    const { key, accountId } = await fx.fund(5);
    for (const stream of [false, true]) {
      const e = await expectError(
        fx.anthropic(key).messages.create({ model: 'svc-pro', max_tokens: 1000, messages: hi, stream }),
        Anthropic.PaymentRequiredError,
        402,
        'billing_error',
      );
      assert.equal(e.headers?.get('x-should-retry'), 'false');
    }
    assert.equal(fx.upstream.requests.length, 0);
    assert.equal(await fx.balance(accountId), 5n);
  });

  const badInputs: [string, Obj, string][] = [
    ['max_tokens missing', { model: 'svc-pro', messages: hi }, 'max_tokens'],
    [
      'a tool_result for an unknown tool_use_id',
      {
        model: 'svc-pro',
        max_tokens: 10,
        messages: [
          { role: 'user', content: 'Weather?' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'w', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'sunny' }] },
        ],
      },
      'messages.2.content.0.tool_use_id',
    ],
    [
      'a server tool',
      { model: 'svc-pro', max_tokens: 10, messages: hi, tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
      'tools.0.type',
    ],
    ['top_k', { model: 'svc-pro', max_tokens: 10, messages: hi, top_k: 5 }, 'top_k'],
    ['max_tokens of 0', { model: 'svc-pro', max_tokens: 0, messages: hi }, 'max_tokens'],
  ];
  for (const [name, body, field] of badInputs) {
    it(`bad input, ${name}: 400 invalid_request_error naming ${field}, nothing charged`, async () => {
      const { key, accountId } = await fx.fund(10_000);
      for (const stream of [false, true]) {
        const e = await expectError(
          fx
            .anthropic(key)
            .messages.create({ ...body, stream } as unknown as Anthropic.MessageCreateParamsNonStreaming),
          Anthropic.BadRequestError,
          400,
          'invalid_request_error',
        );
        assert.ok(e.message.includes(field), e.message);
      }
      assert.equal(fx.upstream.requests.length, 0);
      const w = await fx.svc.wallet(accountId);
      assert.deepEqual([w.balance, w.held], [10_000n, 0n]);
    });
  }

  const upstreamFailures: [string, FakeBehavior, ErrorClass, number, string][] = [
    ['HTTP 500', { kind: 'http_error', status: 500 }, Anthropic.InternalServerError, 500, 'api_error'],
    ['HTTP 503', { kind: 'http_error', status: 503 }, Anthropic.OverloadedError, 529, 'overloaded_error'],
  ];
  for (const [name, behavior, cls, status, type] of upstreamFailures) {
    it(`upstream ${name}: ${status} ${type}, nothing charged`, async () => {
      const { key, accountId } = await fx.fund(10_000);
      fx.upstream.enqueue(behavior, behavior);
      const e = await expectError(
        fx.anthropic(key).messages.create({ model: 'svc-pro', max_tokens: 5, messages: hi }),
        cls,
        status,
        type,
      );
      if (status === 529) assert.equal(e.headers?.get('retry-after'), '1');
      await expectError(
        fx.anthropic(key).messages.create({ model: 'svc-pro', max_tokens: 5, messages: hi, stream: true }),
        cls,
        status,
        type,
      );
      const w = await fx.svc.wallet(accountId);
      assert.deepEqual([w.balance, w.held], [10_000n, 0n]);
    });
  }

  it('a stream cut mid-way ends in an error event the SDK raises, and costs nothing', async () => {
    const { key, accountId } = await fx.fund(10_000);
    fx.upstream.enqueue({ kind: 'cut', afterPieces: 2 });
    const stream = fx.anthropic(key).messages.stream({ model: 'svc-pro', max_tokens: 5, messages: hi });
    await assert.rejects(
      (async () => {
        for await (const _event of stream) {
          // drain
        }
      })(),
      (e: unknown) => e instanceof Anthropic.APIError && e.type === 'overloaded_error',
    );
    const w = await fx.settled(accountId);
    assert.equal(w.balance, 10_000n);
  });
});

describe('Anthropic API: rate limit', function () {
  let fx: AnthropicFixture;

  before(async () => {
    fx = await startAnthropicFixture({ extraConfig: 'limits:\n  requests_per_minute: 2\n' });
  });
  after(async () => {
    await fx.close();
  });

  it('429 rate_limit_error with retry-after', async () => {
    const { key } = await fx.fund(100_000);
    const client = fx.anthropic(key);
    let refused: APIError | undefined;
    for (let i = 0; i < 4 && refused === undefined; i += 1) {
      try {
        await client.messages.create({ model: 'svc-pro', max_tokens: 5, messages: hi });
      } catch (error) {
        refused = error as APIError;
      }
    }
    assert.ok(refused);
    await expectError(Promise.reject(refused), Anthropic.RateLimitError, 429, 'rate_limit_error');
    assert.match(refused.headers?.get('retry-after') ?? '', /^\d+$/);
  });
});
