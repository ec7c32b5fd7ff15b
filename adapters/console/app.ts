import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import Koa, { type Context } from 'koa';
import type { ConsoleSession } from '../../gen/svc/core/v1/console';
import type { ApiKey } from '../../gen/svc/core/v1/keys';
import type { AuthorizationParams } from '../../gen/svc/core/v1/oauth';
import { SvcError, isSvcError, mappingFor } from '../../core';
import { callCore, type CallMeta } from '../http/core-client';
import { outcomeOf } from '../http/core-outcome';
import { publicBaseUrl } from '../http/public-url';
import { clientGoneSignal, requestIdMiddleware, requestIds } from '../http/request';
import type { AdapterDeps, AdapterState } from '../http/types';
import { CONSOLE_CSS, CONSOLE_JS } from './assets';
import { field, isHttps, readCookies, readForm, setCookie, type Form } from './forms';
import type { Html } from './html';
import type { Notice, Viewer } from './layout';
import { accountPage } from './pages/account';
import { accountsPage } from './pages/accounts';
import { authorizeErrorPage, consentPage } from './pages/authorize';
import { connectPage } from './pages/connect';
import { keysPage, revokePage } from './pages/keys';
import { messagePage, signInPage } from './pages/sign-in';
import { USAGE_DAYS, usagePage, type UsageFilterForm } from './pages/usage';
import { walletPage } from './pages/wallet';

const SESSION_COOKIE = 'svc_session';
const CSRF_COOKIE = 'svc_csrf';
// Forms are small; a label of 10,000 characters still fits and gets a clear refusal.
const MAX_FORM_BYTES = 64 * 1024;

const CSP =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** Fixed confirmations chosen by a `done` query parameter; nothing from the URL is echoed. */
const DONE: Readonly<Record<string, string>> = {
  revoked: 'The key was revoked. Requests made with it are refused from now on.',
  password: 'Your password was changed. Other browsers were signed out.',
  account: 'The account was created. Share the sign-in address and the initial password with its owner.',
  topup: 'The wallet was topped up.',
  app_revoked: 'The app was disconnected. Its tokens are refused from now on.',
};

/** The parameters of an OAuth authorization request, carried from the query to the consent form. */
const AUTHORIZE_FIELDS = [
  'client_id',
  'redirect_uri',
  'response_type',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'resource',
] as const;

/** Where sign-in may send the browser back to: only an authorization request of this console. */
const NEXT_RE = /^\/console\/authorize\?[^\s]{0,4000}$/;

interface Signed {
  readonly token: string;
  readonly session: ConsoleSession;
  readonly viewer: Viewer;
  readonly modelIds: readonly string[];
}

class SessionEnded extends Error {
  constructor(readonly hadSession: boolean) {
    super('session ended');
  }
}

function same(a: string, b: string): boolean {
  const digest = (v: string): Buffer => createHash('sha256').update(v).digest();
  return a !== '' && b !== '' && timingSafeEqual(digest(a), digest(b));
}

function send(ctx: Context, status: number, body: Html): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = body.__html;
}

/** The CSP source that lets a form's redirect reach `uri`: its origin, or its scheme for an app scheme. */
function formTarget(uri: string): string {
  const url = new URL(uri);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
}

function noticeOf(error: SvcError): Notice {
  return { kind: 'error', text: error.message };
}

function statusOf(error: SvcError): number {
  return mappingFor(error.code).http;
}

/**
 * The web console, mounted at `/console`: server-rendered pages over the core's ConsoleService.
 * The session lives in an HttpOnly, SameSite=Strict cookie; every form carries a CSRF token that
 * the core checks (the sign-in forms, before any session exists, use a double-submit cookie).
 */
export function createApp(deps: AdapterDeps): Koa<AdapterState> {
  const app = new Koa<AdapterState>();
  const { core, logger } = deps;

  function meta(ctx: Context, token?: string): CallMeta {
    return {
      authorization: token === undefined ? undefined : `Session ${token}`,
      ids: requestIds(ctx),
      signal: clientGoneSignal(ctx),
      outcome: outcomeOf(ctx.req),
    };
  }

  function sessionToken(ctx: Context): string | undefined {
    return readCookies(ctx.get('cookie')).get(SESSION_COOKIE);
  }

  async function signed(ctx: Context): Promise<Signed> {
    const token = sessionToken(ctx);
    if (token === undefined) throw new SessionEnded(false);
    try {
      const { session, modelIds } = await callCore(meta(ctx, token), (o) => core.console.getSession({}, o));
      if (session === undefined) throw new SessionEnded(true);
      return {
        token,
        session,
        modelIds,
        viewer: {
          accountName: session.accountName,
          email: session.email,
          operator: session.operator,
          csrfToken: session.csrfToken,
        },
      };
    } catch (error) {
      if (isSvcError(error) && error.code === 'session_expired') throw new SessionEnded(true);
      throw error;
    }
  }

  /** The pre-session CSRF token (double-submit cookie), made when missing. */
  function signInCsrf(ctx: Context): string {
    const existing = readCookies(ctx.get('cookie')).get(CSRF_COOKIE);
    if (existing !== undefined && /^[A-Za-z0-9_-]{32}$/.test(existing)) return existing;
    const token = randomBytes(24).toString('base64url');
    setCookie(ctx, CSRF_COOKIE, token, {});
    return token;
  }

  function clearSession(ctx: Context): void {
    setCookie(ctx, SESSION_COOKIE, '', { maxAgeSeconds: 0 });
  }

  function done(ctx: Context): Notice {
    const text = DONE[String(ctx.query['done'] ?? '')];
    return text === undefined ? undefined : { kind: 'ok', text };
  }

  function clientAddress(ctx: Context): string {
    return ctx.req.socket.remoteAddress ?? 'unknown';
  }

  function origin(ctx: Context): string {
    const host = ctx.get('host');
    return `${isHttps(ctx) ? 'https' : 'http'}://${/^[A-Za-z0-9.:[\]-]{1,255}$/.test(host) ? host : 'localhost'}`;
  }

  // ---- sign-in and sign-out ----

  async function showSignIn(ctx: Context): Promise<void> {
    const notices: Record<string, Notice> = {
      ended: { kind: 'warn', text: 'Your session has ended. Sign in again to continue.' },
      signed_out: { kind: 'ok', text: 'You are signed out.' },
    };
    const n = notices[String(ctx.query['m'] ?? '')];
    const next = nextOf(String(ctx.query['next'] ?? ''));
    send(
      ctx,
      200,
      signInPage({
        csrf: signInCsrf(ctx),
        ...(n === undefined ? {} : { notice: n }),
        ...(next === undefined ? {} : { next }),
      }),
    );
  }

  function nextOf(value: string): string | undefined {
    return NEXT_RE.test(value) ? value : undefined;
  }

  async function signIn(ctx: Context, operator: boolean): Promise<void> {
    const form = await readForm(ctx, MAX_FORM_BYTES);
    const csrf = signInCsrf(ctx);
    const email = field(form, 'email').slice(0, 254);
    const next = operator ? undefined : nextOf(field(form, 'next'));
    const again = (status: number, text: string): void =>
      send(
        ctx,
        status,
        signInPage({
          csrf,
          email,
          operatorOpen: operator,
          notice: { kind: 'error', text },
          ...(next === undefined ? {} : { next }),
        }),
      );
    if (!same(field(form, 'csrf_token'), readCookies(ctx.get('cookie')).get(CSRF_COOKIE) ?? '')) {
      return again(403, 'This sign-in form has expired or did not come from this console. Please try again.');
    }
    try {
      const signInMeta = { ...meta(ctx), adapterToken: deps.adapterToken };
      const result = operator
        ? await callCore(signInMeta, (o) =>
            core.console.signInOperator(
              { adminToken: field(form, 'admin_token'), clientAddress: clientAddress(ctx) },
              o,
            ),
          )
        : await callCore(signInMeta, (o) =>
            core.console.signIn({ email, password: field(form, 'password'), clientAddress: clientAddress(ctx) }, o),
          );
      const expires = result.session?.expiresAt?.getTime() ?? Date.now();
      setCookie(ctx, SESSION_COOKIE, result.sessionToken, {
        maxAgeSeconds: Math.max(1, Math.floor((expires - Date.now()) / 1000)),
      });
      ctx.redirect(next ?? (operator ? '/console/accounts' : '/console/keys'));
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal') throw error;
      const retry = error.details?.['retry_after_seconds'];
      if (typeof retry === 'number') ctx.set('retry-after', String(retry));
      again(statusOf(error), error.message);
    }
  }

  async function signOut(ctx: Context): Promise<void> {
    const form = await readForm(ctx, MAX_FORM_BYTES);
    const token = sessionToken(ctx);
    if (token === undefined) {
      // A browser withholds the SameSite=Strict cookie from another site's form, so a sign-out
      // without it proves nothing: clearing the cookie here would let any site sign people out
      // (and leave their server session alive). Only the core, after its CSRF check, ends one.
      ctx.redirect('/console/sign-in');
      ctx.status = 303;
      return;
    }
    try {
      await callCore(meta(ctx, token), (o) => core.console.signOut({ csrfToken: field(form, 'csrf_token') }, o));
    } catch (error) {
      // An ended session is already signed out; a bad CSRF token must not sign anyone out.
      if (!(isSvcError(error) && error.code === 'session_expired')) throw error;
    }
    clearSession(ctx);
    ctx.redirect('/console/sign-in?m=signed_out');
    ctx.status = 303;
  }

  // ---- pages of a signed-in account ----

  async function keys(
    ctx: Context,
    s: Signed,
    extra: { notice?: Notice; created?: { key: ApiKey; secret: string }; label?: string; status?: number } = {},
  ): Promise<void> {
    const [{ keys: list }, { apps }] = await Promise.all([
      callCore(meta(ctx, s.token), (o) => core.console.listConsoleKeys({}, o)),
      callCore(meta(ctx, s.token), (o) => core.oauth.listConnectedApps({}, o)),
    ]);
    const n = extra.notice ?? done(ctx);
    send(
      ctx,
      extra.status ?? 200,
      keysPage({
        viewer: s.viewer,
        keys: list,
        apps,
        now: Date.now(),
        ...(n === undefined ? {} : { notice: n }),
        ...(extra.created === undefined ? {} : { created: extra.created }),
        ...(extra.label === undefined ? {} : { label: extra.label }),
      }),
    );
  }

  /** An optional cap field of the key form: empty is no cap. */
  function capField(form: Form, name: 'cap_daily' | 'cap_monthly'): bigint | undefined {
    const text = field(form, name).replace(/[,\s_]/g, '');
    if (text === '') return undefined;
    if (!/^\d{1,16}$/.test(text)) {
      const period = name === 'cap_daily' ? 'daily' : 'monthly';
      throw new SvcError(
        'invalid_argument',
        `The ${period} cap must be a whole number of toman, e.g. 50000, or empty.`,
        {
          param: name,
        },
      );
    }
    return BigInt(text);
  }

  async function createKey(ctx: Context, s: Signed, form: Form): Promise<void> {
    const name = field(form, 'name');
    try {
      const daily = capField(form, 'cap_daily');
      const monthly = capField(form, 'cap_monthly');
      const caps = {
        ...(daily === undefined ? {} : { capDaily: daily }),
        ...(monthly === undefined ? {} : { capMonthly: monthly }),
      };
      const { key, secret } = await callCore(meta(ctx, s.token), (o) =>
        core.console.createConsoleKey(
          { csrfToken: field(form, 'csrf_token'), name, scope: field(form, 'scope'), ...caps },
          o,
        ),
      );
      if (key === undefined) throw new SvcError('internal', 'core returned no key');
      await keys(ctx, s, { created: { key, secret } });
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      // The rejected label goes back into the field (escaped) only when it is short enough to fix.
      await keys(ctx, s, { notice: noticeOf(error), status: statusOf(error), label: name.length <= 100 ? name : '' });
    }
  }

  async function confirmRevoke(ctx: Context, s: Signed): Promise<void> {
    const id = String(ctx.query['id'] ?? '');
    const { keys: list } = await callCore(meta(ctx, s.token), (o) => core.console.listConsoleKeys({}, o));
    const key = list.find((k) => k.id === id && k.revokedAt === undefined);
    if (key === undefined) {
      return keys(ctx, s, {
        notice: { kind: 'error', text: 'There is no such active API key in your account.' },
        status: 404,
      });
    }
    send(ctx, 200, revokePage({ viewer: s.viewer, key }));
  }

  async function revoke(ctx: Context, s: Signed, form: Form): Promise<void> {
    try {
      await callCore(meta(ctx, s.token), (o) =>
        core.console.revokeConsoleKey({ csrfToken: field(form, 'csrf_token'), keyId: field(form, 'key_id') }, o),
      );
      ctx.redirect('/console/keys?done=revoked');
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      await keys(ctx, s, { notice: noticeOf(error), status: statusOf(error) });
    }
  }

  async function revokeApp(ctx: Context, s: Signed, form: Form): Promise<void> {
    try {
      await callCore(meta(ctx, s.token), (o) =>
        core.oauth.revokeConnectedApp({ csrfToken: field(form, 'csrf_token'), grantId: field(form, 'grant_id') }, o),
      );
      ctx.redirect('/console/keys?done=app_revoked');
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      await keys(ctx, s, { notice: noticeOf(error), status: statusOf(error) });
    }
  }

  // ---- OAuth: sign-in and consent for an MCP client (the core decides; see adapters/oauth) ----

  function authorizeFields(source: (name: string) => string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const name of AUTHORIZE_FIELDS) {
      const value = source(name).slice(0, 2000);
      if (value !== '') out[name] = value;
    }
    return out;
  }

  function paramsOf(fields: Record<string, string>): AuthorizationParams {
    return {
      clientId: fields['client_id'] ?? '',
      redirectUri: fields['redirect_uri'] ?? '',
      responseType: fields['response_type'] ?? '',
      scope: fields['scope'] ?? '',
      codeChallenge: fields['code_challenge'] ?? '',
      codeChallengeMethod: fields['code_challenge_method'] ?? '',
      resource: fields['resource'] ?? '',
    };
  }

  /** The authorization response (RFC 6749 §4.1.2, with `iss` of RFC 9207) at the app's redirect URI. */
  function backToApp(ctx: Context, redirectUri: string, state: string | undefined, answer: Record<string, string>) {
    const url = new URL(redirectUri);
    for (const [name, value] of Object.entries(answer)) url.searchParams.set(name, value);
    if (state !== undefined) url.searchParams.set('state', state);
    url.searchParams.set('iss', publicBaseUrl(ctx, deps.publicUrl));
    ctx.redirect(url.href);
    ctx.status = 303;
  }

  /** Checks the request with the core: the app and redirect URI it names, or a page saying why not. */
  async function checkAuthorize(ctx: Context, s: Signed, fields: Record<string, string>) {
    try {
      const check = await callCore(meta(ctx, s.token), (o) =>
        core.oauth.checkAuthorization({ params: paramsOf(fields) }, o),
      );
      if (check.client === undefined) throw new SvcError('internal', 'core returned no client');
      return {
        ...check,
        client: check.client,
        redirectUri: fields['redirect_uri'] ?? check.client.redirectUris[0] ?? '',
      };
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      send(ctx, statusOf(error), authorizeErrorPage(error.message));
      return undefined;
    }
  }

  async function showAuthorize(ctx: Context): Promise<void> {
    const fields = authorizeFields((name) => String(ctx.query[name] ?? ''));
    let s: Signed;
    try {
      s = await signed(ctx);
    } catch (error) {
      if (!(error instanceof SessionEnded)) throw error;
      if (error.hadSession) clearSession(ctx);
      ctx.redirect(
        `/console/sign-in?next=${encodeURIComponent(`/console/authorize?${new URLSearchParams(fields).toString()}`)}`,
      );
      ctx.status = 303;
      return;
    }
    const check = await checkAuthorize(ctx, s, fields);
    if (check === undefined) return;
    if (!check.ok)
      return backToApp(ctx, check.redirectUri, fields['state'], {
        error: check.oauthError,
        error_description: check.errorDescription,
      });
    // RFC 8707: a token is only ever for this server's MCP endpoint.
    const resource = fields['resource'];
    if (resource !== undefined && resource !== `${publicBaseUrl(ctx, deps.publicUrl)}/v1/mcp`)
      return backToApp(ctx, check.redirectUri, fields['state'], {
        error: 'invalid_target',
        error_description: 'This server issues tokens only for its MCP endpoint (…/v1/mcp).',
      });
    // The consent form's answer is a redirect to the app: the page's form-action must allow it.
    ctx.set(
      'content-security-policy',
      CSP.replace("form-action 'self'", `form-action 'self' ${formTarget(check.redirectUri)}`),
    );
    send(
      ctx,
      200,
      consentPage({
        viewer: s.viewer,
        client: check.client,
        scope: check.scope,
        redirectUri: check.redirectUri,
        fields,
      }),
    );
  }

  async function answerAuthorize(ctx: Context, s: Signed, form: Form): Promise<void> {
    const fields = authorizeFields((name) => field(form, name));
    if (field(form, 'decision') !== 'allow') {
      if (!same(field(form, 'csrf_token'), s.session.csrfToken))
        throw new SvcError(
          'csrf_failed',
          'This form has expired or did not come from this console. Reload the page and try again.',
        );
      const check = await checkAuthorize(ctx, s, fields);
      if (check === undefined) return;
      return backToApp(ctx, check.redirectUri, fields['state'], {
        error: 'access_denied',
        error_description: 'The account owner denied the request.',
      });
    }
    try {
      const { code } = await callCore(meta(ctx, s.token), (o) =>
        core.oauth.approveAuthorization({ params: paramsOf(fields), csrfToken: field(form, 'csrf_token') }, o),
      );
      const check = await checkAuthorize(ctx, s, fields);
      if (check === undefined) return;
      backToApp(ctx, check.redirectUri, fields['state'], { code });
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      send(ctx, statusOf(error), authorizeErrorPage(error.message));
    }
  }

  function usageFilter(ctx: Context): UsageFilterForm {
    const q = (name: string, max: number): string => String(ctx.query[name] ?? '').slice(0, max);
    const days = Number(q('days', 3));
    const what = q('what', 110);
    return {
      key: q('key', 40),
      what: /^(model|tool):./.test(what) ? what : '',
      days: (USAGE_DAYS as readonly number[]).includes(days) ? days : 14,
    };
  }

  async function usage(ctx: Context, s: Signed): Promise<void> {
    const filter = usageFilter(ctx);
    const m = meta(ctx, s.token);
    const [wallet, result, keyList] = await Promise.all([
      callCore(m, (o) => core.console.getConsoleWallet({ ledgerLimit: 1 }, o)),
      callCore(m, (o) =>
        core.console.listConsoleUsage(
          {
            keyId: filter.key,
            model: filter.what.startsWith('model:') ? filter.what.slice(6) : '',
            tool: filter.what.startsWith('tool:') ? filter.what.slice(5) : '',
            limit: 100,
            days: filter.days,
          },
          o,
        ),
      ),
      callCore(m, (o) => core.console.listConsoleKeys({}, o)),
    ]);
    if (wallet.wallet === undefined) throw new SvcError('internal', 'core returned no wallet');
    send(
      ctx,
      200,
      usagePage({
        viewer: s.viewer,
        wallet: wallet.wallet,
        usage: result,
        keys: keyList.keys,
        filter,
        today: new Date().toISOString().slice(0, 10),
      }),
    );
  }

  async function wallet(ctx: Context, s: Signed): Promise<void> {
    const result = await callCore(meta(ctx, s.token), (o) => core.console.getConsoleWallet({ ledgerLimit: 50 }, o));
    if (result.wallet === undefined) throw new SvcError('internal', 'core returned no wallet');
    send(ctx, 200, walletPage({ viewer: s.viewer, wallet: result.wallet, entries: result.entries }));
  }

  async function account(ctx: Context, s: Signed, extra: { notice?: Notice; status?: number } = {}): Promise<void> {
    const n = extra.notice ?? done(ctx);
    send(
      ctx,
      extra.status ?? 200,
      accountPage({ viewer: s.viewer, accountId: s.session.accountId, ...(n === undefined ? {} : { notice: n }) }),
    );
  }

  async function changePassword(ctx: Context, s: Signed, form: Form): Promise<void> {
    try {
      await callCore(meta(ctx, s.token), (o) =>
        core.console.changePassword(
          {
            csrfToken: field(form, 'csrf_token'),
            currentPassword: field(form, 'current_password'),
            newPassword: field(form, 'new_password'),
          },
          o,
        ),
      );
      ctx.redirect('/console/account?done=password');
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      await account(ctx, s, { notice: noticeOf(error), status: statusOf(error) });
    }
  }

  // ---- the operator's pages ----

  async function accounts(
    ctx: Context,
    s: Signed,
    extra: { notice?: Notice; status?: number; form?: { name: string; email: string } } = {},
  ): Promise<void> {
    const { accounts: list } = await callCore(meta(ctx, s.token), (o) => core.console.listAccounts({}, o));
    const n = extra.notice ?? done(ctx);
    send(
      ctx,
      extra.status ?? 200,
      accountsPage({
        viewer: s.viewer,
        accounts: list,
        ...(n === undefined ? {} : { notice: n }),
        ...(extra.form === undefined ? {} : { form: extra.form }),
      }),
    );
  }

  async function createAccount(ctx: Context, s: Signed, form: Form): Promise<void> {
    const input = { name: field(form, 'name'), email: field(form, 'email') };
    try {
      await callCore(meta(ctx, s.token), (o) =>
        core.console.createConsoleAccount(
          { csrfToken: field(form, 'csrf_token'), ...input, password: field(form, 'password') },
          o,
        ),
      );
      ctx.redirect('/console/accounts?done=account');
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      const keep = { name: input.name.slice(0, 200), email: input.email.slice(0, 254) };
      await accounts(ctx, s, { notice: noticeOf(error), status: statusOf(error), form: keep });
    }
  }

  async function topUp(ctx: Context, s: Signed, form: Form): Promise<void> {
    try {
      const text = field(form, 'amount').replace(/[,\s_]/g, '');
      if (!/^\d{1,13}$/.test(text))
        throw new SvcError('invalid_argument', 'The amount must be a whole number of toman, e.g. 50000.', {
          param: 'amount',
        });
      await callCore(meta(ctx, s.token), (o) =>
        core.console.topUpAccount(
          {
            csrfToken: field(form, 'csrf_token'),
            accountId: field(form, 'account_id'),
            amount: BigInt(text),
            reference: field(form, 'reference'),
            formId: field(form, 'form_id'),
          },
          o,
        ),
      );
      ctx.redirect('/console/accounts?done=topup');
      ctx.status = 303;
    } catch (error) {
      if (!isSvcError(error) || error.code === 'internal' || error.code === 'session_expired') throw error;
      await accounts(ctx, s, { notice: noticeOf(error), status: statusOf(error) });
    }
  }

  // ---- routing ----

  type Page = (ctx: Context, s: Signed) => Promise<void>;
  type Action = (ctx: Context, s: Signed, form: Form) => Promise<void>;

  const userPages: Record<string, Page> = {
    '/keys': (ctx, s) => keys(ctx, s),
    '/keys/revoke': confirmRevoke,
    '/usage': usage,
    '/wallet': wallet,
    '/account': (ctx, s) => account(ctx, s),
  };
  const userActions: Record<string, Action> = {
    '/keys': createKey,
    '/keys/revoke': revoke,
    '/account/password': changePassword,
    '/apps/revoke': revokeApp,
    '/authorize': answerAuthorize,
  };
  const operatorPages: Record<string, Page> = { '/accounts': (ctx, s) => accounts(ctx, s) };
  const operatorActions: Record<string, Action> = { '/accounts': createAccount, '/accounts/topup': topUp };
  const sharedPages: Record<string, Page> = {
    '/connect': async (ctx, s) =>
      send(ctx, 200, connectPage({ viewer: s.viewer, origin: origin(ctx), model: s.modelIds[0] ?? 'svc-pro' })),
    '/': async (ctx, s) => {
      ctx.redirect(s.session.operator ? '/console/accounts' : '/console/keys');
      ctx.status = 303;
    },
  };

  async function route(ctx: Context): Promise<boolean> {
    const path = ctx.path;
    if (ctx.method === 'GET' && path === '/assets/console.css') {
      ctx.type = 'text/css; charset=utf-8';
      ctx.set('cache-control', 'public, max-age=3600');
      ctx.body = CONSOLE_CSS;
      return true;
    }
    if (ctx.method === 'GET' && path === '/assets/console.js') {
      ctx.type = 'text/javascript; charset=utf-8';
      ctx.set('cache-control', 'public, max-age=3600');
      ctx.body = CONSOLE_JS;
      return true;
    }
    if (path === '/sign-in' && ctx.method === 'GET') return showSignIn(ctx).then(() => true);
    if (path === '/sign-in' && ctx.method === 'POST') return signIn(ctx, false).then(() => true);
    if (path === '/sign-in/operator' && ctx.method === 'POST') return signIn(ctx, true).then(() => true);
    if (path === '/sign-out' && ctx.method === 'POST') return signOut(ctx).then(() => true);
    if (path === '/authorize' && (ctx.method === 'GET' || ctx.method === 'HEAD'))
      return showAuthorize(ctx).then(() => true);

    const get = ctx.method === 'GET' || ctx.method === 'HEAD';
    const post = ctx.method === 'POST';
    const known =
      (get && (path in userPages || path in operatorPages || path in sharedPages)) ||
      (post && (path in userActions || path in operatorActions));
    if (!known) return false;
    const s = await signed(ctx);
    const operator = s.session.operator;
    if (get) {
      const pageFn = sharedPages[path] ?? (operator ? operatorPages[path] : userPages[path]);
      if (pageFn === undefined) {
        ctx.redirect(operator ? '/console/accounts' : '/console/keys');
        ctx.status = 303;
        return true;
      }
      await pageFn(ctx, s);
      return true;
    }
    const action = operator ? operatorActions[path] : userActions[path];
    if (action === undefined)
      throw new SvcError(
        'permission_denied',
        operator
          ? 'The operator has no keys or password here; sign in as the account instead.'
          : 'Only the operator can manage accounts.',
      );
    await action(ctx, s, await readForm(ctx, MAX_FORM_BYTES));
    return true;
  }

  app.use(requestIdMiddleware);
  app.use(async (ctx, next) => {
    ctx.set('content-security-policy', CSP);
    ctx.set('x-content-type-options', 'nosniff');
    ctx.set('x-frame-options', 'DENY');
    ctx.set('referrer-policy', 'no-referrer');
    // Pages can show a key once; nothing the console serves may be kept by a cache.
    ctx.set('cache-control', 'no-store');
    await next();
  });
  app.use(async (ctx) => {
    try {
      if (!(await route(ctx)))
        send(ctx, 404, messagePage('Page not found', 'There is no console page at this address.'));
    } catch (error) {
      if (error instanceof SessionEnded || (isSvcError(error) && error.code === 'session_expired')) {
        const hadSession = !(error instanceof SessionEnded) || error.hadSession;
        if (hadSession) clearSession(ctx);
        if (ctx.method === 'GET' || ctx.method === 'HEAD') {
          ctx.redirect(hadSession ? '/console/sign-in?m=ended' : '/console/sign-in');
          ctx.status = 303;
          return;
        }
        const text = hadSession
          ? 'Your session has ended, so nothing was changed. Sign in again to continue.'
          : 'You are not signed in, so nothing was changed. Sign in to continue.';
        send(ctx, 401, signInPage({ csrf: signInCsrf(ctx), notice: { kind: 'warn', text } }));
        return;
      }
      if (isSvcError(error) && error.code !== 'internal') {
        send(
          ctx,
          statusOf(error),
          messagePage(error.code === 'request_too_large' ? 'Form too large' : 'Request refused', error.message),
        );
        return;
      }
      logger.error({ err: error, requestId: ctx.state['requestId'] }, 'console request failed');
      send(
        ctx,
        500,
        messagePage(
          'Something went wrong',
          `The console could not complete this request. Reference: ${String(ctx.state['requestId'])}`,
        ),
      );
    }
  });
  return app;
}
