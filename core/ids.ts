import { randomBytes, randomFillSync } from 'node:crypto';

// Ids minted per request (request, completion and hold ids) draw from one pool of CSPRNG bytes,
// refilled 4 KiB at a time: one `randomBytes` call per id cost more than the rest of minting it
// (a call into the C++ CSPRNG and a new Buffer each time); Node's randomUUID pools the same way.
// Secrets (API keys, session tokens, passwords' salts) keep calling randomBytes directly.
const POOL_SIZE = 4096;
const pool = Buffer.allocUnsafe(POOL_SIZE);
let poolOffset = POOL_SIZE;

function take(n: number): number {
  if (n > POOL_SIZE) throw new RangeError(`at most ${POOL_SIZE} random bytes per id`);
  if (poolOffset + n > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const start = poolOffset;
  poolOffset += n;
  return start;
}

/** `bytes` random bytes as lowercase hex (an id, not a secret). */
export function randomHex(bytes: number): string {
  const start = take(bytes);
  return pool.toString('hex', start, start + bytes);
}

/** `bytes` random bytes as base64url (an id, not a secret). */
export function randomBase64url(bytes: number): string {
  const start = take(bytes);
  return pool.toString('base64url', start, start + bytes);
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Base62 characters from random bytes (rejection sampling: no modulo bias) until `length`. */
function base62(length: number, fill: (n: number) => Uint8Array): string {
  let out = '';
  while (out.length < length) {
    for (const byte of fill(Math.min(2 * (length - out.length), 256))) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** `length` uniformly random base62 characters, for ids (from the shared pool). */
export function randomBase62(length: number): string {
  return base62(length, (n) => {
    const start = take(n);
    return pool.subarray(start, start + n);
  });
}

/** `length` uniformly random base62 characters for a secret (an API key or token body): fresh CSPRNG bytes of its own. */
export function secretBase62(length: number): string {
  return base62(length, (n) => randomBytes(n));
}

/** A fixed-width base62 rendering of a non-negative integer. */
export function toBase62(value: number, width: number): string {
  let n = value;
  let out = '';
  for (let i = 0; i < width; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** A prefixed random id, e.g. `acc_3kT9…` (16 base62 characters ≈ 95 bits). */
export function newId(prefix: 'acc' | 'key' | 'hold' | 'oac' | 'oag' | 'pay'): string {
  return `${prefix}_${randomBase62(16)}`;
}

/** The current time in ms as 11 lowercase hex digits (fixed width until the year 2527), so ids sort by it. */
export function timeHex(ms: number): string {
  return Math.max(0, Math.floor(ms)).toString(16).padStart(11, '0');
}

/**
 * A prefixed id that starts with the time it was minted (`timeHex`), then 16 random base62
 * characters (≈ 95 bits, as `newId`), e.g. `hold_18ec3a1f2b07kT9…`. For rows written on every
 * call: new keys land at the end of the table's index (the B-tree page a recent insert made
 * dirty already) instead of anywhere in it, so a commit writes fewer pages (SQLite's WAL, InnoDB's
 * clustered index). Hex, not base62, so the order holds in a case-insensitive collation too.
 */
export function newTimeOrderedId(prefix: 'hold', ms: number): string {
  return `${prefix}_${timeHex(ms)}${randomBase62(16)}`;
}

/**
 * A request id, the identity of a call's hold, charge and usage record: `req_`, the time
 * (`timeHex`), then 24 random hex digits (96 bits, as before the time was added), e.g.
 * `req_18ec3a1f2b0` + 24 hex. Time-ordered for the same reason as `newTimeOrderedId`: the
 * indexes led by the request id (holds, ledger entries, usage records) grow at one end.
 */
export function newRequestId(ms: number = Date.now()): string {
  return `req_${timeHex(ms)}${randomHex(12)}`;
}
