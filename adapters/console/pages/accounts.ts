import { randomBytes } from 'node:crypto';
import type { ConsoleAccount, GetConsoleAccountResponse } from '../../../gen/svc/core/v1/console';
import { groupDigits, inWords, utc } from '../format';
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
  query: string;
  nextPageToken: string;
  paged: boolean;
  form?: NewAccountForm;
  notice?: Notice;
}): Html {
  const more = (token: string): string => {
    const q = new URLSearchParams();
    if (input.query !== '') q.set('q', input.query);
    if (token !== '') q.set('cursor', token);
    return `/console/accounts?${q.toString()}`;
  };
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
        <form class="inline" method="get" action="/console/accounts" role="search" aria-label="Search accounts">
          <div class="field">
            <label for="acc-q">Find an account</label>
            <input
              id="acc-q"
              name="q"
              type="search"
              maxlength="100"
              value="${input.query}"
              dir="auto"
              aria-describedby="acc-q-hint"
            />
            <span class="hint" id="acc-q-hint">by name, sign-in address or id</span>
          </div>
          <button class="btn btn-quiet" type="submit">Search</button>
        </form>
        <br />
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
                      <td colspan="6" class="empty">${input.query === '' ? 'No accounts yet.' : 'No account matches.'}</td>
                    </tr>`
                  : input.accounts.map(
                      (a) =>
                        html`<tr>
                          <td>
                            <a href="/console/accounts/view?id=${encodeURIComponent(a.id)}" dir="auto">${a.name}</a><br /><span
                              class="mono hint"
                              >${a.id}</span
                            >
                          </td>
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
        <nav class="pager" aria-label="Pages of accounts">
          ${input.paged ? html`<a class="btn btn-quiet btn-small" href="${more('')}">First page</a>` : html``}
          ${
            input.nextPageToken === ''
              ? html``
              : html`<a class="btn btn-quiet btn-small" rel="next" href="${more(input.nextPageToken)}">More accounts</a>`
          }
        </nav>
      </section>`,
  });
}

/** The top-up, read back before it is applied: the amount in figures and words, the balance after, the reference. */
export function topUpConfirmPage(input: {
  viewer: Viewer;
  account: ConsoleAccount;
  amount: bigint;
  reference: string;
  formId: string;
}): Html {
  const a = input.account;
  return page({
    title: 'Confirm top-up',
    path: '/console/accounts',
    viewer: input.viewer,
    body: html`<section class="panel" aria-labelledby="confirm-heading">
      <h2 id="confirm-heading">Top up “<bdi>${a.name}</bdi>”?</h2>
      <dl class="facts">
        <dt>Account</dt>
        <dd><span dir="auto">${a.name}</span> <span class="mono hint">${a.id}</span></dd>
        <dt>Amount</dt>
        <dd data-testid="topup-amount"><strong>${groupDigits(input.amount)} toman</strong></dd>
        <dt>In words</dt>
        <dd data-testid="topup-words">${inWords(input.amount)} toman</dd>
        <dt>Balance now</dt>
        <dd>${groupDigits(a.balance)} toman</dd>
        <dt>Balance after</dt>
        <dd data-testid="topup-after"><strong>${groupDigits(a.balance + input.amount)} toman</strong></dd>
        <dt>Reference</dt>
        <dd dir="auto">${input.reference === '' ? html`<span class="hint">none (recorded as “console top-up”)</span>` : input.reference}</dd>
      </dl>
      <br />
      <form class="inline" method="post" action="/console/accounts/topup">
        <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
        <input type="hidden" name="account_id" value="${a.id}" />
        <input type="hidden" name="form_id" value="${input.formId}" />
        <input type="hidden" name="amount" value="${input.amount.toString()}" />
        <input type="hidden" name="reference" value="${input.reference}" />
        <input type="hidden" name="confirm" value="yes" />
        <button class="btn" type="submit">Confirm top-up</button>
        <a class="btn btn-quiet" href="/console/accounts/view?id=${encodeURIComponent(a.id)}">Cancel</a>
      </form>
    </section>`,
  });
}

const AUDIT_LABELS: Readonly<Record<string, string>> = { account_created: 'Account created', top_up: 'Top-up' };

/** One account as the operator sees it: wallet, keys, recent usage and ledger, operator actions, a top-up. */
export function accountPage(input: {
  viewer: Viewer;
  detail: GetConsoleAccountResponse;
  account: ConsoleAccount;
  notice?: Notice;
}): Html {
  const { detail, account: a } = input;
  return page({
    title: a.name,
    path: '/console/accounts',
    viewer: input.viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<div class="grid">
        <div class="stat">
          <div class="stat-label">Balance</div>
          <div class="stat-value" data-testid="account-balance">${groupDigits(a.balance)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Held</div>
          <div class="stat-value">${groupDigits(a.held)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Sign-in</div>
          <div dir="auto">${a.email === '' ? 'none' : a.email}</div>
        </div>
      </div>
      <section class="panel" aria-labelledby="topup-heading">
        <h2 id="topup-heading">Top up</h2>
        ${topUpForm(input.viewer.csrfToken, a)}
      </section>
      <section class="panel" aria-labelledby="acc-keys-heading">
        <h2 id="acc-keys-heading">Keys</h2>
        <ul class="activity">
          ${detail.keys.length === 0 ? html`<li class="hint">No keys.</li>` : detail.keys.map(
            (k) => html`<li>
              <span dir="auto">${k.name === '' ? '(no label)' : k.name}</span>
              <span class="mono hint">${k.prefix}…${k.lastFour}</span>
              <span>${k.revokedAt === undefined ? 'active' : 'revoked'}</span>
              <span class="hint">spent today ${groupDigits(k.spentToday)}, this month ${groupDigits(k.spentThisMonth)}</span>
            </li>`,
          )}
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-usage-heading">
        <h2 id="acc-usage-heading">Recent requests <small>newest 50</small></h2>
        <ul class="activity">
          ${detail.usage.length === 0 ? html`<li class="hint">No requests.</li>` : detail.usage.map(
            (r) => html`<li>
              <time datetime="${r.createdAt?.toISOString() ?? ''}">${utc(r.createdAt)}</time>
              <span dir="auto">${r.resource}</span>
              <span>${groupDigits(r.cost)} toman</span>
              <span class="hint">${r.status}</span>
              <span class="mono hint">${r.requestId}</span>
            </li>`,
          )}
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-ledger-heading">
        <h2 id="acc-ledger-heading">Ledger <small>newest 50</small></h2>
        <ul class="activity" data-testid="account-ledger">
          ${detail.ledger.length === 0 ? html`<li class="hint">No entries.</li>` : detail.ledger.map(
            (e) => html`<li>
              <time datetime="${e.createdAt?.toISOString() ?? ''}">${utc(e.createdAt)}</time>
              <span>${e.amount > 0n ? '+' : ''}${groupDigits(e.amount)}</span>
              <span class="hint">balance after ${groupDigits(e.balanceAfter)}</span>
              <span dir="auto">${e.reference}</span>
            </li>`,
          )}
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-audit-heading">
        <h2 id="acc-audit-heading">Operator actions</h2>
        <ul class="activity" data-testid="account-audit">
          ${detail.audit.length === 0 ? html`<li class="hint">None yet.</li>` : detail.audit.map(
            (x) => html`<li>
              <time datetime="${x.createdAt?.toISOString() ?? ''}">${utc(x.createdAt)}</time>
              <strong>${AUDIT_LABELS[x.action] ?? x.action}</strong>
              <span dir="auto">${x.detail}</span>
            </li>`,
          )}
        </ul>
      </section>`,
  });
}
