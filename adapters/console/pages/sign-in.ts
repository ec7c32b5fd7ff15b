import type { Context } from 'koa';
import { isSvcError } from '../../../core/edge';
import {
  callCore,
  clientAddress,
  formOf,
  langOf,
  meta,
  nextOf,
  refusal,
  seeOther,
  send,
  statusOf,
  tr,
  type ConsoleDeps,
  type Core,
} from '../context';
import { field, newPasswordInput, setCookie } from '../forms';
import { html, type Html } from '../html';
import { t } from '../i18n';
import { bare, detailOf, notice, type Lang, type Notice } from '../layout';
import { SESSION_COOKIE, clearSession, sessionToken, signInCsrf } from '../session';

/** The sign-in page: email and password, and the operator's token behind a disclosure. */
export function signInPage(input: {
  lang: Lang;
  csrf: string;
  email?: string;
  notice?: Notice;
  operatorOpen?: boolean;
  /** False when the server has no SVC_ADMIN_TOKEN: no operator sign-in to offer. */
  operator?: boolean;
  /** An authorization request of this console to return to (an app being connected). */
  next?: string;
  /** `console.signup: open`: offer "Create an account". */
  signUpOpen?: boolean;
}): Html {
  const l = input.lang.locale;
  return bare(
    input.lang,
    t(l, 'signIn.title'),
    html`<div class="panel">
  <h1>${t(l, 'signIn.title')}</h1>
  <p class="lede">${input.next === undefined ? t(l, 'signIn.lede') : t(l, 'signIn.ledeConnect')}</p>
  <br>
  ${notice(input.notice)}
  <form method="post" action="/console/sign-in">
    <input type="hidden" name="csrf_token" value="${input.csrf}">
    ${input.next === undefined ? html`` : html`<input type="hidden" name="next" value="${input.next}" />`}
    <div class="field">
      <label for="email">${t(l, 'signIn.email')}</label>
      <input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${input.email ?? ''}" dir="ltr" ${input.operatorOpen === true ? '' : html`autofocus`}>
    </div>
    <div class="field">
      <label for="password">${t(l, 'signIn.password')}</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="200">
    </div>
    <button class="btn" type="submit">${t(l, 'signIn.submit')}</button>
  </form>
  ${input.operator === false ? html`` : html`<details${input.operatorOpen === true ? html` open` : html``}>
    <summary>${t(l, 'signIn.operator')}</summary>
    <form method="post" action="/console/sign-in/operator">
      <input type="hidden" name="csrf_token" value="${input.csrf}">
      <div class="field">
        <label for="admin_token">${t(l, 'signIn.adminToken')} <span class="hint" dir="ltr">(SVC_ADMIN_TOKEN)</span></label>
        <input id="admin_token" name="admin_token" dir="ltr" type="password" autocomplete="off" required maxlength="500">
      </div>
      <button class="btn btn-quiet" type="submit">${t(l, 'signIn.submitOperator')}</button>
    </form>
  </details>`}
</div>
${
  input.signUpOpen === true
    ? html`<p class="fine"><a href="/console/sign-up" data-testid="sign-up-link">${t(l, 'signUp.link')}</a></p>`
    : html`<p class="fine">${t(l, 'signIn.noAccount')}</p>`
}`,
  );
}

/** "Create an account" (`console.signup: open`): email and password, the sign-in page's double-submit CSRF. */
export function signUpPage(input: { lang: Lang; csrf: string; email?: string; notice?: Notice }): Html {
  const l = input.lang.locale;
  return bare(
    input.lang,
    t(l, 'signUp.title'),
    html`<div class="panel">
      <h1>${t(l, 'signUp.title')}</h1>
      <p class="lede">${t(l, 'signUp.lede')}</p>
      ${notice(input.notice)}
      <form method="post" action="/console/sign-up">
        <input type="hidden" name="csrf_token" value="${input.csrf}" />
        <div class="field">
          <label for="email">${t(l, 'signIn.email')}</label>
          <input
            id="email"
            name="email"
            type="email"
            autocomplete="username"
            required
            maxlength="254"
            value="${input.email ?? ''}"
            dir="ltr"
            autofocus
          />
        </div>
        <div class="field">
          <label for="password"
            >${t(l, 'signIn.password')} <span class="hint">${t(l, 'signUp.passwordHint')}</span></label
          >
          ${newPasswordInput('password', 'password')}
        </div>
        <button class="btn" type="submit">${t(l, 'signUp.submit')}</button>
      </form>
      <p><a href="/console/sign-in">${t(l, 'signUp.toSignIn')}</a></p>
    </div>`,
  );
}

/** A page for someone who is not signed in and hit a dead end. */
export function messagePage(lang: Lang, title: string, text: string, detail?: string): Html {
  return bare(
    lang,
    title,
    html`<div class="panel">
      <h1>${title}</h1>
      <p>${text}${detailOf(detail)}</p>
      <p><a class="btn" href="/console/sign-in">${t(lang.locale, 'message.toSignIn')}</a></p>
    </div>`,
  );
}

// ---- the sign-in, sign-up and sign-out forms (routed in ../app.ts) ----

type SignInDeps = Pick<ConsoleDeps, 'core' | 'adapterToken' | 'operatorSignIn'>;

/** GET /console/sign-in (`?m=` a fixed notice, `?next=` an authorization request to return to). */
export async function showSignIn(ctx: Context, deps: SignInDeps): Promise<void> {
  const notices: Record<string, Notice> = {
    ended: { kind: 'warn', text: tr(ctx, 'signIn.ended') },
    signed_out: { kind: 'ok', text: tr(ctx, 'signIn.signedOut') },
  };
  const n = notices[String(ctx.query['m'] ?? '')];
  const next = nextOf(String(ctx.query['next'] ?? ''));
  const { open } = await callCore(meta(ctx), (o) => deps.core.console.getSignUp({}, o));
  send(
    ctx,
    200,
    signInPage({
      operator: deps.operatorSignIn !== false,
      lang: langOf(ctx),
      csrf: signInCsrf(ctx),
      signUpOpen: open,
      ...(n === undefined ? {} : { notice: n }),
      ...(next === undefined ? {} : { next }),
    }),
  );
}

/** GET /console/sign-up: the form, or a page saying sign-up is closed. */
export async function showSignUp(ctx: Context, core: Pick<Core, 'console'>): Promise<void> {
  const { open } = await callCore(meta(ctx), (o) => core.console.getSignUp({}, o));
  if (!open) return send(ctx, 403, messagePage(langOf(ctx), tr(ctx, 'signUp.title'), tr(ctx, 'signUp.closed')));
  send(ctx, 200, signUpPage({ lang: langOf(ctx), csrf: signInCsrf(ctx) }));
}

/** The sign-up form again, as typed, with a refusal (and the form's `csrf` token). */
function signUpAgain(ctx: Context, csrf: string, status: number, text: string, detail?: string): void {
  send(
    ctx,
    status,
    signUpPage({
      lang: langOf(ctx),
      csrf,
      email: field(formOf(ctx), 'email').slice(0, 254),
      notice: { kind: 'error', text, ...(detail === undefined ? {} : { detail }) },
    }),
  );
}

/** The sign-up form whose CSRF token did not match (the csrf middleware's answer). */
export function expiredSignUp(ctx: Context): void {
  signUpAgain(ctx, signInCsrf(ctx), 403, tr(ctx, 'signIn.expiredForm'));
}

/** POST /console/sign-up: a new account, the same answer whether or not the email was taken (the core decides both). */
export async function signUp(ctx: Context, deps: SignInDeps): Promise<void> {
  const form = formOf(ctx);
  const csrf = signInCsrf(ctx);
  const email = field(form, 'email').slice(0, 254);
  try {
    await callCore({ ...meta(ctx), adapterToken: deps.adapterToken }, (o) =>
      deps.core.console.signUp({ email, password: field(form, 'password'), clientAddress: clientAddress(ctx) }, o),
    );
  } catch (error) {
    if (!isSvcError(error) || error.code === 'internal') throw error;
    const retry = error.details?.['retry_after_seconds'];
    if (typeof retry === 'number') ctx.set('retry-after', String(retry));
    return signUpAgain(ctx, csrf, statusOf(error), ...refusal(ctx, error));
  }
  send(
    ctx,
    200,
    signInPage({
      lang: langOf(ctx),
      csrf,
      email,
      signUpOpen: true,
      notice: { kind: 'ok', text: tr(ctx, 'signUp.done') },
    }),
  );
}

/** The sign-in form again, as typed (the user's or the operator's), with a refusal (and the form's `csrf` token). */
function signInAgain(
  ctx: Context,
  deps: Pick<SignInDeps, 'operatorSignIn'>,
  operator: boolean,
  csrf: string,
  status: number,
  text: string,
  detail?: string,
): void {
  const form = formOf(ctx);
  const next = operator ? undefined : nextOf(field(form, 'next'));
  send(
    ctx,
    status,
    signInPage({
      operator: deps.operatorSignIn !== false,
      lang: langOf(ctx),
      csrf,
      email: field(form, 'email').slice(0, 254),
      operatorOpen: operator,
      notice: { kind: 'error', text, ...(detail === undefined ? {} : { detail }) },
      ...(next === undefined ? {} : { next }),
    }),
  );
}

/** The sign-in form whose CSRF token did not match (the csrf middleware's answer). */
export function expiredSignIn(deps: Pick<SignInDeps, 'operatorSignIn'>, operator: boolean): (ctx: Context) => void {
  return (ctx) => signInAgain(ctx, deps, operator, signInCsrf(ctx), 403, tr(ctx, 'signIn.expiredForm'));
}

/** POST /console/sign-in (email and password) and /console/sign-in/operator (the admin token). */
export async function signIn(ctx: Context, deps: SignInDeps, operator: boolean): Promise<void> {
  const form = formOf(ctx);
  const csrf = signInCsrf(ctx);
  const email = field(form, 'email').slice(0, 254);
  const next = operator ? undefined : nextOf(field(form, 'next'));
  try {
    const signInMeta = { ...meta(ctx), adapterToken: deps.adapterToken };
    const result = operator
      ? await callCore(signInMeta, (o) =>
          deps.core.console.signInOperator(
            { adminToken: field(form, 'admin_token'), clientAddress: clientAddress(ctx) },
            o,
          ),
        )
      : await callCore(signInMeta, (o) =>
          deps.core.console.signIn(
            { email, password: field(form, 'password'), clientAddress: clientAddress(ctx) },
            o,
          ),
        );
    const expires = result.session?.expiresAt?.getTime() ?? Date.now();
    setCookie(ctx, SESSION_COOKIE, result.sessionToken, {
      maxAgeSeconds: Math.max(1, Math.floor((expires - Date.now()) / 1000)),
    });
    seeOther(ctx, next ?? (operator ? '/console/accounts' : '/console/keys'));
  } catch (error) {
    if (!isSvcError(error) || error.code === 'internal') throw error;
    const retry = error.details?.['retry_after_seconds'];
    if (typeof retry === 'number') ctx.set('retry-after', String(retry));
    signInAgain(ctx, deps, operator, csrf, statusOf(error), ...refusal(ctx, error));
  }
}

/** POST /console/sign-out, behind the session-cookie and CSRF middleware: a bad token signs no one out. */
export async function signOut(ctx: Context, core: Pick<Core, 'console'>): Promise<void> {
  try {
    await callCore(meta(ctx, sessionToken(ctx)), (o) => core.console.signOut({}, o));
  } catch (error) {
    // An ended session is already signed out.
    if (!(isSvcError(error) && error.code === 'session_expired')) throw error;
  }
  clearSession(ctx);
  seeOther(ctx, '/console/sign-in?m=signed_out');
}
