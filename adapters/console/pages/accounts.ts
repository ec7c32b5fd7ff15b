import { randomBytes } from 'node:crypto';
import type { ConsoleAccount } from '../../../gen/svc/core/v1/console';
import { groupDigits, utc } from '../format';
import { html, type Html } from '../html';
import { page, type Notice, type Viewer } from '../layout';

export interface NewAccountForm {
  readonly name: string;
  readonly email: string;
}

function topUpForm(csrf: string, account: ConsoleAccount): Html {
  const id = account.id;
  return html`<form class="inline" method="post" action="/console/accounts/topup" aria-label="Top up ${account.name}">
    <input type="hidden" name="csrf_token" value="${csrf}" />
    <input type="hidden" name="account_id" value="${id}" />
    <input type="hidden" name="form_id" value="${randomBytes(18).toString('base64url')}" />
    <div class="field">
      <label class="visually-hidden" for="amount-${id}">Amount in toman for ${account.name}</label>
      <input
        id="amount-${id}"
        name="amount"
        inputmode="numeric"
        pattern="[0-9,]+"
        required
        size="9"
        placeholder="toman"
      />
    </div>
    <div class="field">
      <label class="visually-hidden" for="ref-${id}">Reference</label>
      <input id="ref-${id}" name="reference" maxlength="200" size="12" placeholder="reference" dir="auto" />
    </div>
    <button class="btn btn-quiet btn-small" type="submit">Top up</button>
  </form>`;
}

/** The operator's page: every account with its wallet, a top-up form each, and account creation. */
export function accountsPage(input: {
  viewer: Viewer;
  accounts: readonly ConsoleAccount[];
  form?: NewAccountForm;
  notice?: Notice;
}): Html {
  const csrf = input.viewer.csrfToken;
  return page({
    title: 'Accounts',
    path: '/console/accounts',
    viewer: input.viewer,
    lede: 'Every account of this service. Create accounts with a console sign-in and top up their wallets.',
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel" aria-labelledby="new-account-heading">
        <h2 id="new-account-heading">Create an account</h2>
        <form class="inline" method="post" action="/console/accounts">
          <input type="hidden" name="csrf_token" value="${csrf}" />
          <div class="field">
            <label for="acc-name">Name</label
            ><input id="acc-name" name="name" required maxlength="200" value="${input.form?.name ?? ''}" dir="auto" />
          </div>
          <div class="field">
            <label for="acc-email">Email</label
            ><input
              id="acc-email"
              name="email"
              type="email"
              required
              maxlength="254"
              value="${input.form?.email ?? ''}"
            />
          </div>
          <div class="field">
            <label for="acc-password">Initial password <span class="hint">10+ characters</span></label
            ><input
              id="acc-password"
              name="password"
              type="password"
              autocomplete="new-password"
              required
              minlength="10"
              maxlength="200"
            />
          </div>
          <button class="btn" type="submit">Create account</button>
        </form>
      </section>
      <section class="panel" aria-labelledby="accounts-heading">
        <h2 id="accounts-heading">Accounts</h2>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Account</th>
                <th scope="col">Email</th>
                <th scope="col">Created</th>
                <th scope="col" class="num">Balance</th>
                <th scope="col" class="num">Held</th>
                <th scope="col">Top up</th>
              </tr>
            </thead>
            <tbody>
              ${
                input.accounts.length === 0
                  ? html`<tr>
                      <td colspan="6" class="empty">No accounts yet.</td>
                    </tr>`
                  : input.accounts.map(
                      (a) =>
                        html`<tr>
                          <td><span dir="auto">${a.name}</span><br /><span class="mono hint">${a.id}</span></td>
                          <td dir="auto">${a.email === '' ? html`<span class="hint">no sign-in</span>` : a.email}</td>
                          <td>${utc(a.createdAt)}</td>
                          <td class="num">${groupDigits(a.balance)}</td>
                          <td class="num">${groupDigits(a.held)}</td>
                          <td>${topUpForm(csrf, a)}</td>
                        </tr>`,
                    )
              }
            </tbody>
          </table>
        </div>
      </section>`,
  });
}
