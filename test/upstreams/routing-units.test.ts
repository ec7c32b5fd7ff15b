import assert from 'node:assert/strict';
import { createBreaker } from '../../core/upstreams/breaker';
import { attemptOrder } from '../../core/upstreams/router';
import { cacheSavedMicro, holdAmount, tokenParts, usageCost } from '../../core/chat/pricing';
import { readUsage } from '../../core/providers/llm/openai/wire-parse';

/** A deterministic [0, 1) sequence (a linear congruential generator), so spreads are reproducible. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('upstream routing: breaker and order', () => {
  it('the breaker opens after `failures` consecutive failures, probes once after open_s, closes on success', () => {
    let now = 1_000_000;
    const states: string[] = [];
    const breaker = createBreaker(
      { failures: 3, openS: 30 },
      () => now,
      (s) => states.push(s),
    );
    for (let i = 0; i < 2; i += 1) {
      assert.equal(breaker.tryAcquire(), true);
      breaker.failure();
    }
    // A success in between resets the count: failures must be consecutive.
    assert.equal(breaker.tryAcquire(), true);
    breaker.success();
    for (let i = 0; i < 3; i += 1) {
      assert.equal(breaker.tryAcquire(), true);
      breaker.failure();
    }
    assert.equal(breaker.state(), 'open');
    assert.equal(breaker.tryAcquire(), false);
    now += 29_999;
    assert.equal(breaker.tryAcquire(), false);
    now += 1;
    assert.equal(breaker.tryAcquire(), true, 'the half-open probe');
    assert.equal(breaker.tryAcquire(), false, 'only one probe at a time');
    breaker.failure();
    assert.equal(breaker.state(), 'open', 'a failed probe opens it again at once');
    now += 30_000;
    assert.equal(breaker.tryAcquire(), true);
    breaker.abandon();
    assert.equal(breaker.tryAcquire(), true, 'an abandoned probe frees the probe');
    breaker.success();
    assert.equal(breaker.state(), 'closed');
    assert.equal(breaker.tryAcquire(), true);
    assert.deepEqual(states, ['open', 'half-open', 'open', 'half-open', 'closed']);
  });

  it('orders by priority, and spreads by weight within a priority', () => {
    const u = (name: string, priority: number, weight: number) => ({ name, config: { priority, weight } });
    const upstreams = [u('c', 2, 1), u('a', 1, 3), u('b', 1, 1), u('d', 2, 1)];
    const random = seeded(42);
    const firsts = new Map<string, number>();
    for (let i = 0; i < 4000; i += 1) {
      const order = attemptOrder(upstreams, random).map((x) => x.name);
      assert.deepEqual(order.slice(0, 2).sort(), ['a', 'b']);
      assert.deepEqual(order.slice(2).sort(), ['c', 'd']);
      firsts.set(order[0] as string, (firsts.get(order[0] as string) ?? 0) + 1);
    }
    // Weight 3 against 1: about 3000 of 4000 first; 4 standard deviations either way.
    const a = firsts.get('a') ?? 0;
    assert.ok(a > 2890 && a < 3110, `a first ${a} times of 4000`);
  });
});

describe('prices that follow usage (SPEC §6)', () => {
  const price = { inputPer1m: 150_000n, outputPer1m: 600_000n, cachedInputPer1m: 15_000n, cacheWritePer1m: 187_500n };

  it('charges uncached, cached, cache-write and output tokens at their rates, ceiling once', () => {
    // 1000 input of which 600 cache reads and 100 cache writes, 50 output (reasoning inside).
    const usage = {
      prompt_tokens: 1000,
      completion_tokens: 50,
      total_tokens: 1050,
      prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 100 },
      completion_tokens_details: { reasoning_tokens: 20 },
    };
    // (300×150000 + 600×15000 + 100×187500 + 50×600000) / 1e6 = (45e6 + 9e6 + 18.75e6 + 30e6) / 1e6 = 102.75 → 103
    assert.equal(usageCost(price, usage), 103n);
    // Without the cache prices every input token is at the input price: (1000×150000 + 50×600000)/1e6 = 180.
    assert.equal(usageCost({ inputPer1m: 150_000n, outputPer1m: 600_000n }, usage), 180n);
    // At least 1.
    assert.equal(usageCost(price, { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }), 1n);
    // Parts an upstream over-reports cannot make input negative.
    const over = { ...usage, prompt_tokens_details: { cached_tokens: 5000, cache_write_tokens: 5000 } };
    assert.equal(usageCost(price, over), (1000n * 15_000n + 50n * 600_000n + 999_999n) / 1_000_000n);
  });

  it('the hold prices the input bound at the highest input rate', () => {
    assert.equal(holdAmount(price, 1000, 100), (1000n * 187_500n + 100n * 600_000n + 999_999n) / 1_000_000n);
    assert.equal(holdAmount({ inputPer1m: 150_000n, outputPer1m: 600_000n, cachedInputPer1m: 1n }, 1000, 0), 150n);
  });

  // SPEC §13: one-hour writes are a part of the writes, priced at cache_write_1h_per_1m.
  const tiers = { ...price, cacheWrite1hPer1m: 300_000n };
  const written = (w1h: number) => ({
    prompt_tokens: 1000,
    completion_tokens: 50,
    total_tokens: 1050,
    prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 100, cache_write_1h_tokens: w1h },
  });

  it('charges one-hour writes at cache_write_1h_per_1m and the rest of the writes at cache_write_per_1m', () => {
    // (300×150000 + 600×15000 + 40×187500 + 60×300000 + 50×600000) / 1e6 = (45 + 9 + 7.5 + 18 + 30) = 109.5 → 110
    assert.equal(usageCost(tiers, written(60)), 110n);
    assert.deepEqual(tokenParts(written(60)), {
      uncached: 300,
      cached: 600,
      cacheWrite: 100,
      cacheWrite1h: 60,
      output: 50,
    });
    // Without the key, one-hour writes are at cache_write_per_1m: the price of every write before.
    assert.equal(usageCost(price, written(60)), 103n);
    // One-hour writes past the writes are capped by them.
    assert.equal(tokenParts(written(5000)).cacheWrite1h, 100);
    assert.equal(
      usageCost(tiers, written(5000)),
      (300n * 150_000n + 600n * 15_000n + 100n * 300_000n + 50n * 600_000n + 999_999n) / 1_000_000n,
    );
  });

  it('the hold prices every prompt token at the dearest of the input rates, one-hour writes included', () => {
    assert.equal(holdAmount(tiers, 1000, 100), (1000n * 300_000n + 100n * 600_000n + 999_999n) / 1_000_000n);
    // The one-hour rate defaults to the five-minute one, so the hold does too.
    assert.equal(holdAmount(price, 1000, 100), (1000n * 187_500n + 100n * 600_000n + 999_999n) / 1_000_000n);
    // Whatever the split of a bound's tokens over the tiers, the charge fits the hold.
    for (const [read, w5m, w1h] of [
      [0, 0, 1000],
      [1000, 0, 0],
      [0, 1000, 0],
      [200, 300, 500],
      [0, 0, 0],
    ] as const) {
      const usage = {
        prompt_tokens: 1000,
        completion_tokens: 100,
        total_tokens: 1100,
        prompt_tokens_details: { cached_tokens: read, cache_write_tokens: w5m + w1h, cache_write_1h_tokens: w1h },
      };
      assert.ok(usageCost(tiers, usage) <= holdAmount(tiers, 1000, 100), `${read}/${w5m}/${w1h}`);
    }
  });

  it('reads every OpenAI-family shape of cache reads and writes (SPEC §13)', () => {
    const usage = (extra: Record<string, unknown>) =>
      readUsage({ prompt_tokens: 1000, completion_tokens: 10, total_tokens: 1010, ...extra })?.prompt_tokens_details;
    assert.deepEqual(usage({ prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 100 } }), {
      cached_tokens: 600,
      cache_write_tokens: 100,
    });
    // DeepSeek: prompt_cache_hit_tokens / prompt_cache_miss_tokens.
    assert.deepEqual(usage({ prompt_cache_hit_tokens: 900, prompt_cache_miss_tokens: 100 }), { cached_tokens: 900 });
    assert.equal(usage({}), undefined);
  });

  it('what cache reads saved: their price at the input rate minus at the read rate, in millionths', () => {
    assert.equal(cacheSavedMicro(tiers, tokenParts(written(60))), 600n * (150_000n - 15_000n));
    assert.equal(cacheSavedMicro({ inputPer1m: 150_000n, outputPer1m: 600_000n }, tokenParts(written(60))), 0n);
  });
});
