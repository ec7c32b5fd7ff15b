import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { secretBase62, toBase62 } from '../ids';

export const KEY_PREFIX = 'svc_sk_';
const BODY_LENGTH = 40;
// CRC32 < 62^6, so six base62 characters hold it.
const CHECKSUM_LENGTH = 6;
const KEY_RE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

function checksum(body: string): string {
  return toBase62(crc32(body), CHECKSUM_LENGTH);
}

/**
 * A new key: `svc_sk_` + 40 random base62 characters (≈238 bits) + a 6-character base62 CRC32
 * of them, so that a typo or a truncated key is rejected without a database read and secret
 * scanners can verify candidates offline.
 */
export function generateKey(): string {
  const body = secretBase62(BODY_LENGTH);
  return `${KEY_PREFIX}${body}${checksum(body)}`;
}

/** True when `key` has the right prefix, length, alphabet and checksum. */
export function isWellFormedKey(key: string): boolean {
  if (!KEY_RE.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return key.slice(KEY_PREFIX.length + BODY_LENGTH) === checksum(body);
}

/** The only form of a key that is ever stored. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The display parts kept beside the hash: a short prefix and the last four characters. */
export function displayParts(key: string): { prefix: string; lastFour: string } {
  return { prefix: key.slice(0, KEY_PREFIX.length + 4), lastFour: key.slice(-4) };
}
