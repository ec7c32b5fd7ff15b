import { oauthError } from './oauth-error';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
const MAX_URIS = 10;

function parse(uri: string): URL | undefined {
  try {
    return new URL(uri);
  } catch {
    return undefined;
  }
}

function isLoopbackHttp(url: URL): boolean {
  return url.protocol === 'http:' && LOOPBACK.has(url.hostname);
}

/**
 * The redirect URIs a client may register: https, http on a loopback address (native apps, RFC
 * 8252 §7.3), or a private-use scheme in reverse-domain form (RFC 8252 §7.1). No fragments.
 */
export function checkRedirectUris(uris: readonly string[]): string[] {
  if (uris.length === 0)
    throw oauthError('invalid_redirect_uri', 'redirect_uris must name at least one URI.', 'redirect_uris');
  if (uris.length > MAX_URIS)
    throw oauthError('invalid_redirect_uri', `At most ${MAX_URIS} redirect_uris.`, 'redirect_uris');
  for (const uri of uris) {
    const url = uri.length > 2000 ? undefined : parse(uri);
    const ok =
      url !== undefined &&
      url.hash === '' &&
      url.username === '' &&
      url.password === '' &&
      (url.protocol === 'https:' || isLoopbackHttp(url) || /^[a-z][a-z0-9+-]*\.[a-z0-9.+-]+:$/.test(url.protocol));
    if (!ok)
      throw oauthError(
        'invalid_redirect_uri',
        `Not an acceptable redirect URI: ${JSON.stringify(uri.slice(0, 200))}. Use https, http://localhost (or 127.0.0.1), or a reverse-domain app scheme; no fragment.`,
        'redirect_uris',
      );
  }
  return [...uris];
}

/**
 * Exact match, except that a loopback redirect may use any port (RFC 8252 §7.3: a native app
 * learns its port only when it starts listening).
 */
export function redirectMatches(registered: string, given: string): boolean {
  if (registered === given) return true;
  const a = parse(registered);
  const b = parse(given);
  if (a === undefined || b === undefined || !isLoopbackHttp(a) || !isLoopbackHttp(b)) return false;
  return a.hostname === b.hostname && a.pathname === b.pathname && a.search === b.search && b.hash === '';
}
