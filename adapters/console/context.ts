import type { Context } from 'koa';
import type { ConsoleSession } from '../../gen/svc/core/v1/console';
import { SvcError, isSvcError, mappingFor } from '../../core/edge';
import { callCore, type CallMeta, type CoreClients } from '../http/core-client';
import { outcomeOf } from '../http/core-outcome';
import { clientGoneSignal, requestIds } from '../http/request';
import type { AdapterDeps } from '../http/types';
import { isHttps, type Form } from './forms';
import type { Html } from './html';
import { errorText, t, type MessageKey } from './i18n';
import type { Lang, Notice, Viewer } from './layout';

// What every page and form action of the console uses: the request's language, the signed-in
// session and the submitted form (put in `ctx.state` by the middleware in ./middleware.ts), the
// core's call metadata, and the answer as a page.

/** What a page module may take from the adapter's dependencies; each names the few it uses. */
export type ConsoleDeps = Pick<AdapterDeps, 'core' | 'logger' | 'adapterToken' | 'publicUrl' | 'operatorSignIn'>;
export type Core = CoreClients;

/** A signed-in session, as the session middleware read it from the core for this request. */
export interface Signed {
  readonly token: string;
  readonly session: ConsoleSession;
  readonly viewer: Viewer;
  readonly modelIds: readonly string[];
  /** The user's low-balance warning threshold; undefined: none. */
  readonly lowBalanceThreshold: bigint | undefined;
}

/** The session cookie named no session, or one the core no longer knows (`hadSession`). */
export class SessionEnded extends Error {
  constructor(readonly hadSession: boolean) {
    super('session ended');
  }
}

export const CSP =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** This page's CSP, with forms also allowed to answer with a redirect to `targets`. */
export function allowFormTargets(ctx: Context, targets: readonly string[]): void {
  ctx.set('content-security-policy', CSP.replace("form-action 'self'", `form-action 'self' ${targets.join(' ')}`));
}

// Forms are small; a label of 10,000 characters still fits and gets a clear refusal.
export const MAX_FORM_BYTES = 64 * 1024;

interface ConsoleState {
  lang?: Lang;
  signed?: Signed;
  form?: Form;
}

function state(ctx: Context): ConsoleState {
  return ctx.state as ConsoleState;
}

/** The reader's language and this page's address (set by the locale middleware). */
export function langOf(ctx: Context): Lang {
  const lang = state(ctx).lang;
  if (lang === undefined) throw new SvcError('internal', 'console: no locale for this request');
  return lang;
}

export function setLang(ctx: Context, lang: Lang): void {
  state(ctx).lang = lang;
}

/** The signed-in session of a page or form behind the session middleware. */
export function signedOf(ctx: Context): Signed {
  const signed = state(ctx).signed;
  if (signed === undefined) throw new SvcError('internal', 'console: no session for this request');
  return signed;
}

export function setSigned(ctx: Context, signed: Signed): void {
  state(ctx).signed = signed;
}

/** The submitted form of a form action (read, and its CSRF token checked, by the middleware). */
export function formOf(ctx: Context): Form {
  const form = state(ctx).form;
  if (form === undefined) throw new SvcError('internal', 'console: no form for this request');
  return form;
}

export function setForm(ctx: Context, form: Form): void {
  state(ctx).form = form;
}

export function tr(ctx: Context, key: MessageKey, params?: Readonly<Record<string, string | number | bigint>>): string {
  return t(langOf(ctx).locale, key, params);
}

/** A refusal as a notice, in the reader's language. */
export function noticeOf(ctx: Context, error: SvcError): Notice {
  return { kind: 'error', ...errorText(langOf(ctx).locale, error) };
}

/** A refusal as the text and detail of a message page. */
export function refusal(ctx: Context, error: SvcError): [string, string | undefined] {
  const { text, detail } = errorText(langOf(ctx).locale, error);
  return [text, detail];
}

/**
 * A refusal a form shows on its own page (the form again, with the notice); anything else —
 * an internal error, an ended session — goes on to the refusals middleware.
 */
export function isFormRefusal(error: unknown): error is SvcError {
  return isSvcError(error) && error.code !== 'internal' && error.code !== 'session_expired';
}

export function statusOf(error: SvcError): number {
  return mappingFor(error.code).http;
}

/** Fixed confirmations chosen by a `done` query parameter; nothing from the URL is echoed. */
const DONE: Readonly<Record<string, MessageKey>> = {
  revoked: 'done.revoked',
  caps: 'done.caps',
  edited: 'done.edited',
  low_balance: 'done.low_balance',
  password: 'done.password',
  account: 'done.account',
  topup: 'done.topup',
  sign_in: 'done.sign_in',
  concurrent: 'done.concurrent',
  app_revoked: 'done.app_revoked',
  rate: 'done.rate',
};

/** The confirmation a form's redirect asked for (`?done=`), if any. */
export function done(ctx: Context): Notice {
  const key = DONE[String(ctx.query['done'] ?? '')];
  return key === undefined ? undefined : { kind: 'ok', text: tr(ctx, key) };
}

export function send(ctx: Context, status: number, body: Html): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = body.__html;
}

/** A 303 to `location`: every form is POST → redirect → GET. */
export function seeOther(ctx: Context, location: string): void {
  ctx.redirect(location);
  ctx.status = 303;
}

/** The metadata of a core call for this request, as the session `token` when given. */
export function meta(ctx: Context, token?: string): CallMeta {
  return {
    authorization: token === undefined ? undefined : `Session ${token}`,
    ids: requestIds(ctx),
    signal: clientGoneSignal(ctx),
    outcome: outcomeOf(ctx.req),
  };
}

/** A core call as the signed-in session of this request. */
export function asSession(ctx: Context): CallMeta {
  return meta(ctx, signedOf(ctx).token);
}

export { callCore };

/** The parameters of an OAuth authorization request, carried from the query to the consent form. */
export const AUTHORIZE_FIELDS = [
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

export function nextOf(value: string): string | undefined {
  return NEXT_RE.test(value) ? value : undefined;
}

export function clientAddress(ctx: Context): string {
  return ctx.req.socket.remoteAddress ?? 'unknown';
}

export function origin(ctx: Context): string {
  const host = ctx.get('host');
  return `${isHttps(ctx) ? 'https' : 'http'}://${/^[A-Za-z0-9.:[\]-]{1,255}$/.test(host) ? host : 'localhost'}`;
}
