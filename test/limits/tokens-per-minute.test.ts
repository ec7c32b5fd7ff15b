import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import pino from 'pino';
import { parseConfig } from '../../core/config/load';
import type { SvcError } from '../../core/errors';
import { connectRedis, redisReady } from '../../core/limits/redis-rate-limiter';
import { createRedisTokenLimiter } from '../../core/limits/redis-token-limiter';
import { assertTokensLeft, createTokenLimiter } from '../../core/limits/token-limiter';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { startSvc, type TestSvc } from '../helpers/harness';
import { expectedCost, testConfig } from '../openai/fixture';

const REDIS_URL = process.env['SVC_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('tokens per minute (limits.tokens_per_minute)', function () {
  it('the in-process bucket admits while tokens are left, lets a call overdraw, and refills at limit/60 per second', () => {
    let clock = 0;
    const limiter = createTokenLimiter({ tokensPerMinute: 600, now: () => clock });
    assert.deepEqual(limiter.state('key_a'), { limit: 600, remaining: 600, resetMs: 0 });
    limiter.spend('key_a', 500);
    assert.deepEqual(limiter.state('key_a'), { limit: 600, remaining: 100, resetMs: 50_000 });
    assertTokensLeft(limiter.state('key_a'));
    // A call that uses more than is left still counts in full: the bucket goes below zero.
    limiter.spend('key_a', 300);
    const spent = limiter.state('key_a');
    assert.equal(spent.remaining, 0);
    assert.equal(spent.resetMs, 20_100, '200 tokens of debt at 10 per second, plus one token');
    assert.throws(
      () => assertTokensLeft(spent),
      (e: SvcError) => {
        assert.equal(e.code, 'tokens_rate_limited');
        assert.deepEqual(e.details, { limit: 600, remaining: 0, reset_ms: 20_100, retry_after_s: 21 });
        assert.match(e.message, /600 tokens per minute/);
        return true;
      },
    );
    // Other keys have their own budget; nothing (or a negative count) spends nothing.
    limiter.spend('key_b', 0);
    limiter.spend('key_b', -5);
    assert.equal(limiter.state('key_b').remaining, 600);
    clock += 20_100;
    assert.equal(limiter.state('key_a').remaining, 1);
    clock += 600_000;
    assert.deepEqual(limiter.state('key_a'), { limit: 600, remaining: 600, resetMs: 0 });
    // 0 is no limit at all.
    const off = createTokenLimiter({ tokensPerMinute: 0, now: () => clock });
    off.spend('key_a', 1e9);
    assertTokensLeft(off.state('key_a'));
  });

  it('limits.tokens_per_minute is a positive integer (absent: no token limit); a bad value names the key', () => {
    assert.equal(parseConfig('limits:\n  tokens_per_minute: 90000\n', {}, 't').limits.tokensPerMinute, 90_000);
    assert.equal(parseConfig('limits:\n  requests_per_minute: 5\n', {}, 't').limits.tokensPerMinute, undefined);
    for (const bad of ['0', '-1', '1.5', 'lots']) {
      assert.throws(
        () => parseConfig(`limits:\n  tokens_per_minute: ${bad}\n`, {}, 't'),
        /limits\.tokens_per_minute/,
        bad,
      );
    }
    assert.throws(
      () => parseConfig('limits:\n  token_per_minute: 5\n', {}, 't'),
      /limits\.token_per_minute.*unknown key/,
    );
  });

  describe('over the OpenAI API', function () {
    // The fake upstream reports 100 prompt + 50 completion tokens per call: 150 a call against 200 a minute.
    const LIMIT = 200;
    let upstream: FakeUpstream;
    let svc: TestSvc;
    let clock = Date.now();
    let base: string;

    before(async () => {
      upstream = await startFakeUpstream();
      svc = await startSvc({
        config: testConfig(upstream.baseUrl, `limits:\n  tokens_per_minute: ${LIMIT}\n`),
        now: () => clock,
      });
      base = `${svc.baseUrl}/v1/openai`;
    });
    after(async () => {
      await svc.close();
      await upstream.close();
    });

    const chat = (key: string, stream = false): Promise<Response> =>
      fetch(`${base}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'svc-pro',
          messages: [{ role: 'user', content: 'hello' }],
          max_tokens: 100,
          ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
        }),
      });

    it('counts the tokens each call used, then answers 429 tokens/rate_limit_exceeded with retry-after and x-ratelimit-*-tokens until the minute refills', async () => {
      const { key, accountId } = await svc.createFundedKey(1_000_000);
      upstream.reset();

      const first = await chat(key);
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('x-ratelimit-limit-tokens'), String(LIMIT));
      assert.equal(first.headers.get('x-ratelimit-remaining-tokens'), String(LIMIT));
      assert.ok(first.headers.get('x-ratelimit-limit-requests'), 'the request limit headers stay');
      await first.json();

      // The second call is admitted (50 tokens left) and streamed; it overdraws the minute.
      const second = await chat(key, true);
      assert.equal(second.status, 200);
      assert.equal(second.headers.get('x-ratelimit-remaining-tokens'), '50');
      assert.match(await second.text(), /\[DONE\]/);

      const refused = await chat(key);
      assert.equal(refused.status, 429);
      const body = (await refused.json()) as { error: Record<string, unknown> };
      assert.equal(body.error['type'], 'tokens');
      assert.equal(body.error['code'], 'rate_limit_exceeded');
      assert.match(String(body.error['message']), /200 tokens per minute/);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `retry-after ${String(retryAfter)}`);
      assert.equal(refused.headers.get('x-ratelimit-limit-tokens'), String(LIMIT));
      assert.equal(refused.headers.get('x-ratelimit-remaining-tokens'), '0');
      assert.match(refused.headers.get('x-ratelimit-reset-tokens') ?? '', /^\d+s$/);

      // The official client sees a RateLimitError; the upstream was not called for either refusal.
      const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0 });
      await assert.rejects(
        client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] }),
        (e: unknown) => e instanceof OpenAI.RateLimitError && e.type === 'tokens',
      );
      assert.equal(upstream.requests.length, 2);

      // Another key of the same account has its own budget.
      const other = await svc.core.keys.create({ accountId, name: 'other' });
      const otherResponse = await chat(other.secret);
      assert.equal(otherResponse.status, 200);
      await otherResponse.json();

      // Refusals cost nothing and hold nothing: three calls charged, at the upstream's usage.
      const wallet = await svc.wallet(accountId);
      assert.equal(wallet.held, 0n);
      assert.equal(wallet.balance, 1_000_000n - 3n * expectedCost(100, 50));

      // The 100 tokens of debt refill in 30 s, the whole budget a minute after that.
      clock += 90_000;
      const again = await chat(key);
      assert.equal(again.status, 200);
      assert.equal(again.headers.get('x-ratelimit-remaining-tokens'), String(LIMIT));
      await again.json();
    });

    it('reads the token budget of the key once per call: the headers and the admission share the read', async () => {
      const { key } = await svc.createFundedKey(1_000_000);
      clock += 600_000;
      const limiter = svc.core.tokenLimiter;
      const state = limiter.state.bind(limiter);
      let reads = 0;
      Object.assign(limiter, {
        state: (k: string) => {
          reads++;
          return state(k);
        },
      });
      try {
        const response = await chat(key);
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('x-ratelimit-remaining-tokens'), String(LIMIT));
        await response.json();
        assert.equal(reads, 1);
        const streamed = await chat(key, true);
        await streamed.text();
        assert.equal(reads, 2);
      } finally {
        Object.assign(limiter, { state });
      }
    });

    it('MCP tool calls are not counted against the tokens of models', async () => {
      const { key } = await svc.createFundedKey(1_000_000);
      await (await chat(key)).json();
      await (await chat(key)).json();
      assert.equal((await chat(key)).status, 429);
      const mcp = await fetch(`${svc.baseUrl}/v1/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'shopping_search', arguments: { query: 'laptop' } },
        }),
      });
      const answer = (await mcp.json()) as { result?: { isError?: boolean } };
      assert.equal(mcp.status, 200);
      assert.notEqual(answer.result?.isError, true);
      assert.ok(answer.result, 'a result');
    });
  });

  describe('shared through Redis', function () {
    const prefix = `svc:test:tpm:${randomBytes(4).toString('hex')}`;
    const opened: { disconnect(): void }[] = [];
    const redis = (url = REDIS_URL) => {
      const client = connectRedis(url);
      client.on('error', () => undefined);
      opened.push(client);
      return client;
    };
    const lines: { level: number; msg: string }[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
          done();
        },
      }),
    );

    before(async function () {
      if (!(await redisReady(redis(), 3000))) {
        if (process.env['CI'] === 'true') throw new Error(`Redis does not answer at ${REDIS_URL}`);
        this.skip();
      }
    });
    after(() => {
      for (const client of opened) client.disconnect();
    });

    it('two limiters on two connections (two cores) count into one budget per key', async () => {
      const make = async () => {
        const client = redis();
        assert.ok(await redisReady(client, 5000));
        return createRedisTokenLimiter({
          redis: client,
          tokensPerMinute: 1000,
          failure: 'open',
          logger,
          keyPrefix: prefix,
        });
      };
      const a = await make();
      const b = await make();
      assert.deepEqual(await a.state('key_1'), { limit: 1000, remaining: 1000, resetMs: 0 });
      await a.spend('key_1', 600);
      assert.equal((await b.state('key_1')).remaining, 400);
      await b.spend('key_1', 600);
      const spent = await a.state('key_1');
      assert.equal(spent.remaining, 0);
      assert.ok(spent.resetMs > 0 && spent.resetMs <= 60_000);
      assert.throws(
        () => assertTokensLeft(spent),
        (e: SvcError) => e.code === 'tokens_rate_limited',
      );
      assert.equal((await b.state('key_2')).remaining, 1000);
    });

    it('a Redis outage admits (open) or refuses with unavailable (closed), drops counts, and is logged once', async () => {
      const down = redis('redis://127.0.0.1:1');
      const open = createRedisTokenLimiter({
        redis: down,
        tokensPerMinute: 10,
        failure: 'open',
        logger,
        keyPrefix: prefix,
      });
      for (let i = 0; i < 3; i++) {
        await open.spend('key_1', 100);
        assert.deepEqual(await open.state('key_1'), { limit: 0, remaining: 0, resetMs: 0 });
      }
      const warnings = lines.filter((l) => l.level === 40 && /token limits fail open/.test(l.msg));
      assert.equal(warnings.length, 1, 'logged once per outage');
      const closed = createRedisTokenLimiter({
        redis: down,
        tokensPerMinute: 10,
        failure: 'closed',
        logger,
        keyPrefix: prefix,
      });
      await closed.spend('key_1', 100);
      await assert.rejects(Promise.resolve(closed.state('key_1')), (e: SvcError) => e.code === 'unavailable');
      assert.ok(lines.some((l) => /token limits fail closed/.test(l.msg)));
    });
  });
});
