import type { Context } from 'koa';
import {
  asSession,
  callCore,
  done,
  formOf,
  isFormRefusal,
  noticeOf,
  seeOther,
  send,
  signedOf,
  statusOf,
  type Core,
} from '../context';
import { field, newPasswordInput } from '../forms';
import { html, type Html } from '../html';
import { t } from '../i18n';
import { page, type Notice, type Viewer } from '../layout';

/** The signed-in user's account and the password change form. */
export function accountPage(input: { viewer: Viewer; accountId: string; notice?: Notice }): Html {
  const { viewer } = input;
  const l = viewer.locale;
  return page({
    title: t(l, 'account.title'),
    path: '/console/account',
    viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel" aria-labelledby="profile-heading">
        <h2 id="profile-heading">${t(l, 'account.profile')}</h2>
        <div class="table-wrap">
          <table>
            <tbody>
              <tr>
                <th scope="row">${t(l, 'account.name')}</th>
                <td dir="auto">${viewer.accountName}</td>
              </tr>
              <tr>
                <th scope="row">${t(l, 'account.email')}</th>
                <td dir="ltr">${viewer.email}</td>
              </tr>
              <tr>
                <th scope="row">${t(l, 'account.id')}</th>
                <td class="mono">${input.accountId}</td>
              </tr>
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="password-heading">
        <h2 id="password-heading">${t(l, 'account.changePassword')}</h2>
        <form method="post" action="/console/account/password">
          <input type="hidden" name="csrf_token" value="${viewer.csrfToken}" />
          <input type="text" name="username" autocomplete="username" value="${viewer.email}" hidden />
          <div class="field">
            <label for="current_password">${t(l, 'account.current')}</label>
            <input
              id="current_password"
              name="current_password"
              type="password"
              autocomplete="current-password"
              required
              maxlength="200"
            />
          </div>
          <div class="field">
            <label for="new_password">${t(l, 'account.new')} <span class="hint">${t(l, 'account.newHint')}</span></label>
            ${newPasswordInput('new_password', 'new_password')}
          </div>
          <button class="btn" type="submit">${t(l, 'account.changePassword')}</button>
          <p class="hint">${t(l, 'account.signsOut')}</p>
        </form>
      </section>`,
  });
}

// ---- the page and its form (routed in ../app.ts) ----

/** GET /console/account; a refused form shows it again with its notice. */
export async function showAccount(ctx: Context, extra: { notice?: Notice; status?: number } = {}): Promise<void> {
  const s = signedOf(ctx);
  const n = extra.notice ?? done(ctx);
  send(
    ctx,
    extra.status ?? 200,
    accountPage({ viewer: s.viewer, accountId: s.session.accountId, ...(n === undefined ? {} : { notice: n }) }),
  );
}

/** POST /console/account/password. */
export async function changePassword(ctx: Context, core: Pick<Core, 'console'>): Promise<void> {
  const form = formOf(ctx);
  try {
    await callCore(asSession(ctx), (o) =>
      core.console.changePassword(
        {
          currentPassword: field(form, 'current_password'),
          newPassword: field(form, 'new_password'),
        },
        o,
      ),
    );
    seeOther(ctx, '/console/account?done=password');
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showAccount(ctx, { notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}
