import { html, type Html } from '../html';
import { bare, notice, type Notice } from '../layout';

/** The sign-in page: email and password, and the operator's token behind a disclosure. */
export function signInPage(input: {
  csrf: string;
  email?: string;
  notice?: Notice;
  operatorOpen?: boolean;
  /** An authorization request of this console to return to (an app being connected). */
  next?: string;
}): Html {
  return bare(
    'Sign in',
    html`<div class="panel">
  <h1>Sign in</h1>
  <p class="lede">${input.next === undefined ? 'Manage your API keys, wallet and usage.' : 'Sign in to connect an app to your account.'}</p>
  <br>
  ${notice(input.notice)}
  <form method="post" action="/console/sign-in">
    <input type="hidden" name="csrf_token" value="${input.csrf}">
    ${input.next === undefined ? html`` : html`<input type="hidden" name="next" value="${input.next}" />`}
    <div class="field">
      <label for="email">Email address</label>
      <input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${input.email ?? ''}" dir="auto" ${input.operatorOpen === true ? '' : html`autofocus`}>
    </div>
    <div class="field">
      <label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="200">
    </div>
    <button class="btn" type="submit">Sign in</button>
  </form>
  <details${input.operatorOpen === true ? html` open` : html``}>
    <summary>Operator sign-in</summary>
    <form method="post" action="/console/sign-in/operator">
      <input type="hidden" name="csrf_token" value="${input.csrf}">
      <div class="field">
        <label for="admin_token">Admin token <span class="hint">(SVC_ADMIN_TOKEN)</span></label>
        <input id="admin_token" name="admin_token" type="password" autocomplete="off" required maxlength="500">
      </div>
      <button class="btn btn-quiet" type="submit">Sign in as operator</button>
    </form>
  </details>
</div>
<p class="fine">No account yet? Ask the operator of this service to create one.</p>`,
  );
}

/** A page for someone who is not signed in and hit a dead end. */
export function messagePage(title: string, text: string): Html {
  return bare(
    title,
    html`<div class="panel">
      <h1>${title}</h1>
      <p>${text}</p>
      <p><a class="btn" href="/console/sign-in">Go to sign-in</a></p>
    </div>`,
  );
}
