import assert from 'node:assert/strict';
import { newRequestId, newTimeOrderedId, randomBase62, randomBase64url, randomHex, secretBase62 } from '../../core/ids';

describe('ids', () => {
  it('mints hex, base64url and base62 ids of the asked length from the pooled bytes, never twice', () => {
    const seen = new Set<string>();
    // 4,000 ids of 12 + 14 + 32 bytes cross the 4 KiB pool's refill many times.
    for (let i = 0; i < 4000; i++) {
      const hex = randomHex(12);
      const b64 = randomBase64url(14);
      const b62 = randomBase62(16);
      assert.match(hex, /^[0-9a-f]{24}$/);
      assert.match(b64, /^[A-Za-z0-9_-]{19}$/);
      assert.match(b62, /^[0-9A-Za-z]{16}$/);
      for (const id of [hex, b64, b62]) {
        assert.equal(seen.has(id), false, `${id} minted twice`);
        seen.add(id);
      }
    }
  });

  it('spreads base62 characters evenly (no modulo bias towards the first characters)', () => {
    const counts = new Map<string, number>();
    const text = randomBase62(62 * 400);
    for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
    assert.equal(counts.size, 62);
    // 400 expected per character; a bias of byte % 62 without rejection would give the first
    // eight characters 5/4 of the others (500 vs 400): far outside these bounds.
    for (const [c, n] of counts) assert.ok(n > 300 && n < 500, `${c}: ${n}`);
  });

  it('mints secrets of the asked length too', () => {
    const a = secretBase62(40);
    assert.match(a, /^[0-9A-Za-z]{40}$/);
    assert.notEqual(a, secretBase62(40));
  });

  it('mints request and hold ids that sort by the time they were minted, with all their random part', () => {
    const times = [0, 1, 999, 1_000, 1_764_201_600_000, 1_764_201_600_001, 2 ** 43];
    const requests = times.map((ms) => newRequestId(ms));
    const holds = times.map((ms) => newTimeOrderedId('hold', ms));
    for (const id of requests) assert.match(id, /^req_[0-9a-f]{35}$/);
    for (const id of holds) assert.match(id, /^hold_[0-9a-f]{11}[0-9A-Za-z]{16}$/);
    // Minted in time order, they sort in it (byte order and a case-insensitive order alike).
    assert.deepEqual([...requests].reverse().sort(), requests);
    assert.deepEqual(
      [...holds].reverse().sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())),
      holds,
    );
    assert.equal(requests[4]?.slice(4, 15), (1_764_201_600_000).toString(16).padStart(11, '0'));
    // The same millisecond: still distinct, by the random part.
    const same = new Set(Array.from({ length: 2000 }, () => newRequestId(1_764_201_600_000)));
    assert.equal(same.size, 2000);
  });

  it('refuses an id longer than the pool', () => {
    assert.throws(() => randomHex(5000), RangeError);
  });
});
