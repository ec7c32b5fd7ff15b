import { crc32 } from 'node:zlib';
import { secretBase62, toBase62 } from '../ids';

/** Access tokens: told apart from `svc_sk_` keys by their prefix, without a database read. */
export const ACCESS_TOKEN_PREFIX = 'svc_oat_';
/** Refresh tokens: only the token endpoint takes them; they never authenticate a call. */
export const REFRESH_TOKEN_PREFIX = 'svc_ort_';
/** Authorization codes. */
export const CODE_PREFIX = 'svc_oac_';

const BODY_LENGTH = 40;
const CHECKSUM_LENGTH = 6;

type Prefix = typeof ACCESS_TOKEN_PREFIX | typeof REFRESH_TOKEN_PREFIX | typeof CODE_PREFIX;

function checksum(body: string): string {
  return toBase62(crc32(body), CHECKSUM_LENGTH);
}

/** A new secret: prefix + 40 random base62 characters + a base62 CRC32 of them (like API keys). */
export function generateToken(prefix: Prefix): string {
  const body = secretBase62(BODY_LENGTH);
  return `${prefix}${body}${checksum(body)}`;
}

/** True when `token` has the prefix, length, alphabet and checksum of a `prefix` secret. */
export function isWellFormedToken(prefix: Prefix, token: string): boolean {
  if (token.length !== prefix.length + BODY_LENGTH + CHECKSUM_LENGTH || !token.startsWith(prefix)) return false;
  const rest = token.slice(prefix.length);
  if (!/^[0-9A-Za-z]+$/.test(rest)) return false;
  return rest.slice(BODY_LENGTH) === checksum(rest.slice(0, BODY_LENGTH));
}
