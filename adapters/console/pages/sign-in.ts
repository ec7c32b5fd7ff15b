import { newPasswordInput } from '../forms';
import { html, type Html } from '../html';
import { t } from '../i18n';
import { bare, detailOf, notice, type Lang, type Notice } from '../layout';

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
