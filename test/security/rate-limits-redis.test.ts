import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Metadata, Status } from 'nice-grpc';
import pino from 'pino';
import { connectCore, type CoreConnection } from '../../adapters/http/core-client';
import { loadEnv } from '../../core/config/env';
import { loadConfig, parseConfig } from '../../core/config/load';
import { createCore, type Core } from '../../core/create-core';
import type { SvcError } from '../../core/errors';
import { createRateLimiter } from '../../core/limits/rate-limiter';
import { connectRedis, createRedisRateLimiter, redisReady } from '../../core/limits/redis-rate-limiter';
import { createRedisTokenLimiter } from '../../core/limits/redis-token-limiter';
import { createTokenLimiter } from '../../core/limits/token-limiter';
import { startCoreServer, type CoreServer } from '../../core/server/start';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/database';

// Redis is preinstalled on CI machines; elsewhere the tests skip when it does not answer.
const REDIS_URL = process.env['SVC_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/** A pino logger whose lines are kept for the test to read. */
function capturedLogger(): { logger: pino.Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describe('rate limits: SVC_REDIS_URL and limits.redis_failure', function () {
  it('SVC_REDIS_URL takes redis:// and rediss:// URLs only; unset means per-process limits', () => {
    assert.equal(loadEnv({}).redisUrl, undefined);
    assert.equal(loadEnv({ SVC_REDIS_URL: 'redis://:pw@10.0.0.5:6380/0' }).redisUrl, 'redis://:pw@10.0.0.5:6380/0');
    assert.equal(loadEnv({ SVC_REDIS_URL: 'rediss://cache.example:6379' }).redisUrl, 'rediss://cache.example:6379');
    for (const bad of ['http://x', 'localhost:6379', 'redis://']) {
      assert.throws(() => loadEnv({ SVC_REDIS_URL: bad }), /SVC_REDIS_URL/);
    }
  });

  it('limits.redis_failure is open or closed (absent: open); anything else names the key', () => {
    assert.equal(parseConfig('limits:\n  redis_failure: closed\n', {}, 't').limits.redisFailure, 'closed');
    assert.equal(parseConfig('limits:\n  requests_per_minute: 5\n', {}, 't').limits.redisFailure, undefined);
    assert.throws(() => parseConfig('limits:\n  redis_failure: maybe\n', {}, 't'), /limits\.redis_failure/);
  });
});

describe('rate limits shared through Redis (SVC_REDIS_URL)', function () {
  this.timeout(60_000);
  const prefix = `svc:test:${randomBytes(4).toString('hex')}`;
  const opened: { quit(): Promise<unknown>; disconnect(): void }[] = [];
  const redis = (url = REDIS_URL) => {
    const client = connectRedis(url);
    // An unreachable Redis is what some tests want; its errors are the limiter's to report.
    client.on('error', () => undefined);
    opened.push(client);
    return client;
  };
  const ready = async (url = REDIS_URL) => {
    const client = redis(url);
    assert.ok(await redisReady(client, 5000), 'Redis is ready');
    return client;
  };

  before(async function () {
    const ok = await redisReady(redis(), 3000);
    if (!ok) {
      if (process.env['CI'] === 'true') throw new Error(`Redis does not answer at ${REDIS_URL}`);
      this.skip();
    }
  });
  after(() => {
    for (const client of opened) client.disconnect();
  });

  it('two limiters on two connections (two cores) share one budget per key; another key has its own', async () => {
    const { logger } = capturedLogger();
    const a = createRedisRateLimiter({
      redis: await ready(),
      requestsPerMinute: 5,
      failure: 'open',
      logger,
      keyPrefix: `${prefix}:1`,
    });
    const b = createRedisRateLimiter({
      redis: await ready(),
      requestsPerMinute: 5,
      failure: 'open',
      logger,
      keyPrefix: `${prefix}:1`,
    });
    const remaining: number[] = [];
    for (const limiter of [a, b, a, b, a]) remaining.push((await limiter.take('key_1')).remaining);
    assert.deepEqual(remaining, [4, 3, 2, 1, 0]);
    for (const limiter of [a, b]) {
      await assert.rejects(Promise.resolve(limiter.take('key_1')), (e: SvcError) => {
        assert.equal(e.code, 'rate_limited');
        assert.equal(e.details?.['limit'], 5);
        assert.ok((e.details?.['retry_after_s'] as number) >= 1);
        return true;
      });
    }
    assert.equal((await b.take('key_2')).remaining, 4);
  });

  it('the Redis and the in-process limiters answer a sequence of calls at the same times identically (one algorithm)', async () => {
    const { logger } = capturedLogger();
    let clock = 1_700_000_000_000;
    const now = () => clock;
    const memoryRequests = createRateLimiter({ requestsPerMinute: 6, now });
    const redisRequests = createRedisRateLimiter({
      redis: await ready(),
      requestsPerMinute: 6,
      failure: 'open',
      logger,
      keyPrefix: `${prefix}:same`,
      now,
    });
    const memoryTokens = createTokenLimiter({ tokensPerMinute: 600, now });
    const redisTokens = createRedisTokenLimiter({
      redis: await ready(),
      tokensPerMinute: 600,
      failure: 'open',
      logger,
      keyPrefix: `${prefix}:same-tokens`,
      now,
    });
    const answer = async (take: () => unknown): Promise<unknown> => {
      try {
        return await take();
      } catch (error) {
        const e = error as SvcError;
        return { code: e.code, details: e.details, message: e.message };
      }
    };
    // Bursts, refusals, partial refills (fractions of a token), a clock going back, a full refill.
    const steps = [0, 0, 0, 0, 0, 0, 0, 3_000, 7_000, 9_999, 1, -5_000, 0, 25_000, 120_000, 0, 13_333];
    const fromMemory: unknown[] = [];
    const fromRedis: unknown[] = [];
    for (const [i, step] of steps.entries()) {
      clock += step;
      for (const key of ['key_a', 'key_b']) {
        if (i % 2 === 0 || key === 'key_a') {
          fromMemory.push(await answer(() => memoryRequests.take(key)));
          fromRedis.push(await answer(() => redisRequests.take(key)));
        }
        const tokens = (i * 97) % 350;
        memoryTokens.spend(key, tokens);
        await redisTokens.spend(key, tokens);
        fromMemory.push(memoryTokens.state(key));
        fromRedis.push(await redisTokens.state(key));
      }
    }
    assert.deepEqual(fromRedis, fromMemory);
    assert.ok(
      fromMemory.some((a) => (a as { code?: string }).code === 'rate_limited'),
      'the sequence reaches the limit',
    );
    assert.ok(
      fromMemory.some((a) => (a as { remaining?: number }).remaining === 0),
      'and the token budget',
    );
  });

  it('a Redis outage fails open by default and says so once in the log; closed refuses with unavailable', async () => {
    // Nothing listens on port 1: every command fails at once.
    const open = capturedLogger();
    const down = redis('redis://127.0.0.1:1');
    const failOpen = createRedisRateLimiter({
      redis: down,
      requestsPerMinute: 1,
      failure: 'open',
      logger: open.logger,
      keyPrefix: prefix,
    });
    for (let i = 0; i < 3; i++) assert.deepEqual(await failOpen.take('key_1'), { limit: 0, remaining: 0, resetMs: 0 });
    const warnings = open.lines.filter((l) => l.level === 40);
    assert.equal(warnings.length, 1, 'logged once per outage');
    assert.match(warnings[0]?.msg ?? '', /fail open/);

    const closed = capturedLogger();
    const failClosed = createRedisRateLimiter({
      redis: down,
      requestsPerMinute: 1,
      failure: 'closed',
      logger: closed.logger,
      keyPrefix: prefix,
    });
    await assert.rejects(Promise.resolve(failClosed.take('key_1')), (e: SvcError) => e.code === 'unavailable');
    assert.match(closed.lines.find((l) => l.level === 40)?.msg ?? '', /fail closed/);
  });

  describe('two core processes on one database and one Redis', function () {
    let database: TestDatabase;
    let store: Store;
    const cores: { core: Core; server: CoreServer; connection: CoreConnection }[] = [];

    before(async function () {
      database = await createTestDatabase();
      store = openStore(database.url);
      await migrate(store);
      const config = loadConfig(undefined, {});
      const limited = { ...config, limits: { ...config.limits, requestsPerMinute: 4 } };
      for (let i = 0; i < 2; i++) {
        const { logger } = capturedLogger();
        const rateLimiter = createRedisRateLimiter({
          redis: await ready(),
          requestsPerMinute: 4,
          failure: 'open',
          logger,
          keyPrefix: `${prefix}:cores`,
        });
        const core = createCore({
          config: limited,
          store,
          logger,
          adminToken: 'test-admin-token-0123456789abcdef',
          rateLimiter,
        });
        const server = await startCoreServer(core, '127.0.0.1:0');
        cores.push({ core, server, connection: connectCore(server.address) });
      }
    });
    after(async () => {
      for (const { core, server, connection } of cores) {
        connection.close();
        await server.close(1000);
        core.stop();
      }
      await store?.close();
      await database?.drop();
    });

    it('a key gets 4 requests a minute in total, not 4 per core; the 5th is RESOURCE_EXHAUSTED on either', async () => {
      const [one, two] = cores;
      assert.ok(one !== undefined && two !== undefined);
      const account = await one.core.accounts.create('limited');
      const { secret } = await one.core.keys.create({ accountId: account.id, name: 'k' });
      const metadata = new Metadata({ authorization: `Bearer ${secret}` });
      const codes: number[] = [];
      for (const target of [one, two, one, two, one, two]) {
        codes.push(
          await target.connection.clients.models.listModels({}, { metadata }).then(
            () => Status.OK,
            (e: { code: number }) => e.code,
          ),
        );
      }
      assert.deepEqual(codes, [
        Status.OK,
        Status.OK,
        Status.OK,
        Status.OK,
        Status.RESOURCE_EXHAUSTED,
        Status.RESOURCE_EXHAUSTED,
      ]);
    });
  });
});
