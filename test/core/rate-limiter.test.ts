import assert from 'node:assert/strict';
import { createRateLimiter } from '../../core/limits/rate-limiter';
import type { SvcError } from '../../core/errors';

describe('rate limiter', function () {
  it('bursts up to the limit per key, refills at limit/60 per second, and says when to retry', function () {
    let clock = 0;
    const limiter = createRateLimiter({ requestsPerMinute: 60, now: () => clock });
    for (let i = 0; i < 60; i++) limiter.take('key_a');
    assert.throws(
      () => limiter.take('key_a'),
      (e: SvcError) => {
        assert.equal(e.code, 'rate_limited');
        assert.deepEqual(e.details, { limit: 60, remaining: 0, reset_ms: 1000, retry_after_s: 1 });
        return true;
      },
    );
    // Other keys have their own buckets.
    assert.equal(limiter.take('key_b').remaining, 59);
    clock += 1000;
    assert.equal(limiter.take('key_a').remaining, 0);
    assert.throws(() => limiter.take('key_a'));
    clock += 60_000;
    const state = limiter.take('key_a');
    assert.deepEqual(state, { limit: 60, remaining: 59, resetMs: 1000 });
  });
});
