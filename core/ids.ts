import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `length` uniformly random base62 characters (rejection sampling: no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const bytes = randomBytes(length * 2);
    for (const byte of bytes) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
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
export function newId(prefix: 'acc' | 'key' | 'hold' | 'oac' | 'oag'): string {
  return `${prefix}_${randomBase62(16)}`;
}
