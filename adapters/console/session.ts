import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { SvcError, isSvcError } from '../../core/edge';
import { callCore, langOf, meta, SessionEnded, type Core, type Signed } from './context';
import { readCookies, setCookie } from './forms';

// The console's cookies: the session (HttpOnly, SameSite=Strict, sent to the core as the caller)
// and the CSRF tokens every form carries. The core never sees CSRF; the middleware checks every
// form here before the core is called.

export const SESSION_COOKIE = 'svc_session';
export const CSRF_COOKIE = 'svc_csrf';

/** Equal non-empty strings, compared in constant time. */
export function same(a: string, b: string): boolean {
  const digest = (v: string): Buffer => createHash('sha256').update(v).digest();
  return a !== '' && b !== '' && timingSafeEqual(digest(a), digest(b));
}

/**
 * A session's CSRF token: an HMAC keyed by the session token (which only the browser's HttpOnly
 * cookie and this adapter hold), so another site can neither read nor make it, and no state is
 * kept for it.
 */
export function csrfOf(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('svc console csrf v1').digest('base64url');
}

export function csrfFailed(): SvcError {
  return new SvcError(
    'csrf_failed',
    'This form has expired or did not come from this console. Reload the page and try again.',
  );
}

export function sessionToken(ctx: Context): string | undefined {
  return readCookies(ctx.get('cookie')).get(SESSION_COOKIE);
}

export function clearSession(ctx: Context): void {
  setCookie(ctx, SESSION_COOKIE, '', { maxAgeSeconds: 0 });
}

/** The pre-session CSRF token of the sign-in forms (a double-submit cookie), made when missing. */
export function signInCsrf(ctx: Context): string {
  const existing = readCookies(ctx.get('cookie')).get(CSRF_COOKIE);
  if (existing !== undefined && /^[A-Za-z0-9_-]{32}$/.test(existing)) return existing;
  const token = randomBytes(24).toString('base64url');
  setCookie(ctx, CSRF_COOKIE, token, {});
  return token;
}

/** The pre-session CSRF cookie as the browser sent it ('' without one). */
export function signInCsrfCookie(ctx: Context): string {
  return readCookies(ctx.get('cookie')).get(CSRF_COOKIE) ?? '';
}

/** The browser's session, read from the core; SessionEnded without one or when it has ended. */
export async function loadSession(ctx: Context, core: Pick<Core, 'console'>): Promise<Signed> {
  const token = sessionToken(ctx);
  if (token === undefined) throw new SessionEnded(false);
  try {
    const { session, modelIds, lowBalanceThreshold, available } = await callCore(meta(ctx, token), (o) =>
      core.console.getSession({}, o),
    );
    if (session === undefined) throw new SessionEnded(true);
    const low =
      lowBalanceThreshold !== undefined && available < lowBalanceThreshold
        ? { lowBalance: { available, threshold: lowBalanceThreshold } }
        : {};
    return {
      token,
      session,
      modelIds,
      viewer: {
        ...langOf(ctx),
        accountName: session.accountName,
        email: session.email,
        operator: session.operator,
        csrfToken: csrfOf(token),
        ...low,
      },
      lowBalanceThreshold,
    };
  } catch (error) {
    if (isSvcError(error) && error.code === 'session_expired') throw new SessionEnded(true);
    throw error;
  }
}
