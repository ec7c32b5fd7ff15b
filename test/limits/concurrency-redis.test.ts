import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import type { SvcError } from '../../core/errors';
import { createConcurrencyLimiter, createRedisConcurrencyLimiter, type Slot } from '../../core/limits/concurrency';
import { connectRedis, redisReady } from '../../core/limits/redis-rate-limiter';

/*
 * Calls in flight counted in Redis (SVC_REDIS_URL): two limiters on two connections (two cores, or
 * two workers of `svc serve --workers N`) keep one count per key and per account; a released slot
 * is free at once for either; a slot whose core died frees itself when its lease runs out; while
 * Redis is away the limits fail open to each process's own count.
 */

const REDIS_URL = process.env['SVC_TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('calls in flight shared through Redis', function () {
  this.timeout(30_000);
  const prefix = `svc:test:cc:${randomBytes(4).toString('hex')}`;
  const logger = pino({ level: 'silent' });
  const opened: ReturnType<typeof connectRedis>[] = [];
  const closers: (() => void)[] = [];
  const redis = (url = REDIS_URL) => {
    const client = connectRedis(url);
    client.on('error', () => undefined);
    opened.push(client);
    return client;
  };
  const limiter = async (
    limits: { perKey: number; perAccount: number },
    options: { now?: () => number; url?: string } = {},
  ) => {
    const client = redis(options.url);
    if (options.url === undefined) assert.ok(await redisReady(client, 5000));
    const made = createRedisConcurrencyLimiter({
      redis: client,
      limits,
      failure: 'open',
      logger,
      keyPrefix: prefix,
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    closers.push(() => made.close());
    return made;
  };
  const refusedWith = (scope: string) => (error: SvcError) => {
    assert.equal(error.code, 'concurrency_limited');
    assert.equal(error.details?.['scope'], scope);
    assert.equal(error.details?.['retry_after_s'], 1);
    return true;
  };

  before(async function () {
    if (!(await redisReady(redis(), 3000))) {
      if (process.env['CI'] === 'true') throw new Error(`Redis does not answer at ${REDIS_URL}`);
      this.skip();
    }
  });
  after(() => {
    for (const close of closers) close();
    for (const client of opened) client.disconnect();
  });

  it('two limiters share one count per key and per account, and a released slot is free at once', async () => {
    const a = await limiter({ perKey: 2, perAccount: 3 });
    const b = await limiter({ perKey: 2, perAccount: 3 });
    const k1 = { keyId: 'k1', accountId: 'acc1' };
    const k2 = { keyId: 'k2', accountId: 'acc1' };
    const first = await a.acquire(k1);
    await b.acquire(k1);
    await assert.rejects(Promise.resolve(a.acquire(k1)), refusedWith('key'));
    await assert.rejects(Promise.resolve(b.acquire(k1)), refusedWith('key'));
    const third = await b.acquire(k2);
    await assert.rejects(Promise.resolve(a.acquire(k2)), refusedWith('account'));
    assert.deepEqual(await a.inFlight(k1), { key: 2, account: 3 });
    first.release();
    first.release();
    // Released once, however often: exactly one slot came back.
    await assertEventually(async () => (await b.inFlight(k1)).key === 1);
    await a.acquire(k1);
    await assert.rejects(Promise.resolve(b.acquire(k2)), refusedWith('account'));
    third.release();
  });

  it("a key's own limit overrides the configured one; 0 is no limit", async () => {
    const a = await limiter({ perKey: 1, perAccount: 0 });
    const own = { keyId: 'k3', accountId: 'acc3', keyLimit: 3 };
    const slots: Slot[] = [];
    for (let i = 0; i < 3; i++) slots.push(await a.acquire(own));
    await assert.rejects(Promise.resolve(a.acquire(own)), refusedWith('key'));
    for (let i = 0; i < 10; i++) slots.push(await a.acquire({ keyId: 'k4', accountId: 'acc4', keyLimit: 0 }));
    for (const slot of slots) slot.release();
  });

  it('a slot whose core died frees itself when its lease runs out', async () => {
    let clock = Date.now();
    const dead = await limiter({ perKey: 1, perAccount: 1 }, { now: () => clock });
    const who = { keyId: 'k5', accountId: 'acc5' };
    await dead.acquire(who);
    dead.close();
    const alive = await limiter({ perKey: 1, perAccount: 1 }, { now: () => clock });
    await assert.rejects(Promise.resolve(alive.acquire(who)), refusedWith('key'));
    clock += 61_000;
    (await alive.acquire(who)).release();
  });

  it('fails open to the process count while Redis is away', async () => {
    const away = await limiter({ perKey: 1, perAccount: 5 }, { url: 'redis://127.0.0.1:1' });
    const who = { keyId: 'k6', accountId: 'acc6' };
    const slot = await away.acquire(who);
    await assert.rejects(Promise.resolve(away.acquire(who)), refusedWith('key'));
    slot.release();
    (await away.acquire(who)).release();
  });

  it('the in-process limiter keeps the same rules', () => {
    const local = createConcurrencyLimiter({ perKey: 1, perAccount: 2 });
    const slot = local.acquire({ keyId: 'a', accountId: 'x' }) as Slot;
    assert.throws(() => local.acquire({ keyId: 'a', accountId: 'x' }), refusedWith('key'));
    assert.ok('release' in local.acquire({ keyId: 'b', accountId: 'x' }));
    assert.throws(() => local.acquire({ keyId: 'c', accountId: 'x' }), refusedWith('account'));
    slot.release();
    slot.release();
    assert.deepEqual(local.inFlight({ keyId: 'a', accountId: 'x' }), { key: 0, account: 1 });
  });
});

async function assertEventually(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail('condition never became true');
}
