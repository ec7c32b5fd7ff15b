import type { Context, Next } from 'koa';
import { SvcError, isSvcError } from '../../core/edge';
import {
  AUTHORIZE_FIELDS,
  CSP,
  MAX_FORM_BYTES,
  SessionEnded,
  formOf,
  langOf,
  nextOf,
  refusal,
  send,
  seeOther,
  setForm,
  setLang,
  setSigned,
  signedOf,
  statusOf,
  tr,
  type ConsoleDeps,
  type Core,
} from './context';
import { field, readCookies, readForm, setCookie } from './forms';
import { LOCALE_COOKIE, resolveLocale, type Locale } from './i18n';
import { messagePage, signInPage } from './pages/sign-in';
import { clearSession, csrfFailed, csrfOf, loadSession, same, sessionToken, signInCsrf, signInCsrfCookie } from './session';

// What every page of the console shares, as Koa middleware the router applies (see ./app.ts):
// the security headers, the locale, the mapping of refusals to pages, the signed-in session and
// its role, and the form with its CSRF check. Each lives here once; no handler calls them.

type Middleware = (ctx: Context, next: Next) => Promise<void>;

/** Every answer: no framing, no sniffing, no referrer, nothing cached (pages can show a key once). */
export const securityHeaders: Middleware = async (ctx, next) => {
  ctx.set('content-security-policy', CSP);
  ctx.set('x-content-type-options', 'nosniff');
  ctx.set('x-frame-options', 'DENY');
  ctx.set('referrer-policy', 'no-referrer');
  // Pages can show a key once; nothing the console serves may be kept by a cache.
  ctx.set('cache-control', 'no-store');
  await next();
};

/** The page a form's answer belongs to, by the form action's first segment (a POST URL cannot be reloaded). */
const FORM_PAGES: Readonly<Record<string, string>> = {
  'sign-in': '/console/sign-in',
  keys: '/console/keys',
  apps: '/console/keys',
  wallet: '/console/wallet',
  account: '/console/account',
  accounts: '/console/accounts',
  pricing: '/console/pricing',
};

/** The address the language switch comes back to: this page, or for a form's answer, its page. */
function hereOf(ctx: Context): string {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return FORM_PAGES[ctx.path.split('/')[1] ?? ''] ?? '/console/';
  // An app being connected keeps its authorization request through the switch; otherwise only
  // the id of a key or account page is carried: nothing else typed into a URL is echoed.
  const query = new URLSearchParams();
  if (ctx.path === '/authorize')
    for (const name of AUTHORIZE_FIELDS) {
      const value = ctx.query[name];
      if (typeof value === 'string') query.set(name, value.slice(0, 2000));
    }
  const next = nextOf(String(ctx.query['next'] ?? ''));
  if (ctx.path === '/sign-in' && next !== undefined) query.set('next', next);
  const id = String(ctx.query['id'] ?? '');
  if (id !== '') query.set('id', id.slice(0, 100));
  const rest = query.toString();
  return `/console${ctx.path}${rest === '' ? '' : `?${rest}`}`;
}

/** The reader's language (the `svc_lang` cookie, else Accept-Language), for every renderer. */
export const locale: Middleware = async (ctx, next) => {
  const chosen = resolveLocale(readCookies(ctx.get('cookie')).get(LOCALE_COOKIE), ctx.get('accept-language'));
  setLang(ctx, { locale: chosen, here: hereOf(ctx) });
  await next();
};

// The language cookie lasts a year: it is a preference, not a credential.
const LOCALE_MAX_AGE = 365 * 86_400;
/** Where the language switch may return to: a page of this console, never another site. */
const BACK_RE = /^\/console\/[A-Za-z0-9._~!$&'()*+,;=:@%/?-]{0,2000}$/;

/** GET /console/lang?to=fa&back=/console/keys: keeps the choice in a cookie and goes back. */
export async function switchLanguage(ctx: Context): Promise<void> {
  const to = String(ctx.query['to'] ?? '');
  const chosen: Locale | undefined = to === 'fa' || to === 'en' ? to : undefined;
  if (chosen !== undefined) setCookie(ctx, LOCALE_COOKIE, chosen, { maxAgeSeconds: LOCALE_MAX_AGE });
  const back = String(ctx.query['back'] ?? '');
  seeOther(ctx, BACK_RE.test(back) && !back.includes('//') ? back : '/console/');
}

/**
 * What a handler did not answer itself, as a page: an ended session is the sign-in page (a
 * redirect for a GET), a refusal of the core a message page with its status, anything else a
 * 500 page with the request id (and a log line).
 */
export function refusals(deps: Pick<ConsoleDeps, 'logger' | 'operatorSignIn'>): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (error) {
      if (error instanceof SessionEnded || (isSvcError(error) && error.code === 'session_expired'))
        return sessionEnded(ctx, deps, !(error instanceof SessionEnded) || error.hadSession);
      if (isSvcError(error) && error.code !== 'internal') {
        const title = tr(ctx, error.code === 'request_too_large' ? 'message.tooLarge' : 'message.refused');
        return send(ctx, statusOf(error), messagePage(langOf(ctx), title, ...refusal(ctx, error)));
      }
      deps.logger.error({ err: error, requestId: ctx.state['requestId'] }, 'console request failed');
      send(
        ctx,
        500,
        messagePage(
          langOf(ctx),
          tr(ctx, 'message.wrong'),
          tr(ctx, 'message.wrongText', { ref: String(ctx.state['requestId']) }),
        ),
      );
    }
  };
}

function sessionEnded(ctx: Context, deps: Pick<ConsoleDeps, 'operatorSignIn'>, hadSession: boolean): void {
  if (hadSession) clearSession(ctx);
  if (ctx.method === 'GET' || ctx.method === 'HEAD') {
    seeOther(ctx, hadSession ? '/console/sign-in?m=ended' : '/console/sign-in');
    return;
  }
  const text = hadSession ? tr(ctx, 'signIn.endedNothing') : tr(ctx, 'signIn.notSignedIn');
  const operator = deps.operatorSignIn !== false;
  send(ctx, 401, signInPage({ operator, lang: langOf(ctx), csrf: signInCsrf(ctx), notice: { kind: 'warn', text } }));
}

/** Whatever no route answered. */
export async function notFound(ctx: Context): Promise<void> {
  send(ctx, 404, messagePage(langOf(ctx), tr(ctx, 'message.notFound'), tr(ctx, 'message.notFoundText')));
}

/** Routes that answer GET only: `router.get` also answers HEAD, which these leave to the 404. */
export const getOnly: Middleware = async (ctx, next) => {
  if (ctx.method === 'GET') await next();
  else await notFound(ctx);
};

/** The signed-in session, read from the core once per request (SessionEnded without one). */
export function signedIn(core: Pick<Core, 'console'>): Middleware {
  return async (ctx, next) => {
    setSigned(ctx, await loadSession(ctx, core));
    await next();
  };
}

/** A page of one role: the other is sent to its own first page. */
export function pageOf(role: 'user' | 'operator'): Middleware {
  return async (ctx, next) => {
    const operator = signedOf(ctx).session.operator;
    if (operator === (role === 'operator')) return next();
    seeOther(ctx, operator ? '/console/accounts' : '/console/keys');
  };
}

/** A form action of one role: the other is refused before its form is read. */
export function actionOf(role: 'user' | 'operator'): Middleware {
  return async (ctx, next) => {
    const operator = signedOf(ctx).session.operator;
    if (operator === (role === 'operator')) return next();
    throw new SvcError(
      'permission_denied',
      operator
        ? 'The operator has no keys or password here; sign in as the account instead.'
        : 'Only the operator can manage accounts.',
    );
  };
}

/** Reads the submitted form (at most 64 KiB, url-encoded only) for the CSRF check and the action. */
export const form: Middleware = async (ctx, next) => {
  setForm(ctx, await readForm(ctx, MAX_FORM_BYTES));
  await next();
};

/**
 * The CSRF check of a form, before anything reaches the core: its `csrf_token` must be the one
 * `expected` gives (the session's HMAC, or before a session the double-submit cookie's); a
 * mismatch is `refused` (default: the `csrf_failed` refusal, a 403 page).
 */
export function csrf(
  expected: (ctx: Context) => string,
  refused: (ctx: Context) => Promise<void> | void = () => {
    throw csrfFailed();
  },
): Middleware {
  return async (ctx, next) => {
    if (same(field(formOf(ctx), 'csrf_token'), expected(ctx))) return next();
    await refused(ctx);
  };
}

/**
 * A form that ends the session needs its cookie. A browser withholds the SameSite=Strict cookie
 * from another site's form, so a sign-out without it proves nothing: clearing the cookie here
 * would let any site sign people out (and leave their server session alive). Only a form with
 * the session's CSRF token ends one; without the cookie, the answer is the sign-in page.
 */
export const sessionCookie: Middleware = async (ctx, next) => {
  if (sessionToken(ctx) === undefined) return seeOther(ctx, '/console/sign-in');
  await next();
};

/** The CSRF check of a form that ends the session (no session read from the core first). */
export const sessionCookieCsrf = csrf((ctx) => csrfOf(sessionToken(ctx) ?? ''));

/** The CSRF check of every form of a signed-in page. */
export const sessionCsrf = csrf((ctx) => signedOf(ctx).viewer.csrfToken);

/** The CSRF check of the sign-in forms, before a session exists: the double-submit cookie. */
export function signInFormCsrf(refused: (ctx: Context) => void): Middleware {
  return csrf(signInCsrfCookie, refused);
}
