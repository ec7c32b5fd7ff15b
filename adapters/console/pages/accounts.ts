import type { Payment } from '../../../gen/svc/core/v1/payments';
import { paymentsTable } from './payments';
import { randomBytes } from 'node:crypto';
import type { AuditEntry } from '../../../gen/svc/core/v1/accounts';
import type { ApiKey } from '../../../gen/svc/core/v1/keys';
import type { UsageRecord } from '../../../gen/svc/core/v1/usage';
import type { LedgerEntry } from '../../../gen/svc/core/v1/wallet';
import { inWords, num, toman, when } from '../format';
import { newPasswordInput } from '../forms';
import { html, type Html } from '../html';
import { isMessageKey, t, type Locale } from '../i18n';
import { page, type Notice, type Viewer } from '../layout';

export interface NewAccountForm {
  readonly name: string;
  readonly email: string;
}

/** An account as the operator's pages show it: AccountService's account with its wallet. */
export interface ConsoleAccount {
  readonly id: string;
  readonly name: string;
  readonly email: string;
  readonly balance: bigint;
  readonly held: bigint;
  readonly createdAt: Date | undefined;
}

/** What the account page shows besides the account: read from KeyService, WalletService, UsageService and AccountService. */
export interface AccountDetail {
  readonly keys: readonly ApiKey[];
  readonly ledger: readonly LedgerEntry[];
  readonly usage: readonly UsageRecord[];
  readonly audit: readonly AuditEntry[];
  /** Where the ledger's next (older) page starts; '' on its last page. */
  readonly ledgerNextBefore: string;
  /** This is an older page of the ledger, not its newest. */
  readonly ledgerPaged: boolean;
  /** The account's payments through the gateways (PaymentService), newest first. */
  readonly payments?: readonly Payment[];
}

function topUpForm(l: Locale, csrf: string, account: ConsoleAccount): Html {
  const id = account.id;
  return html`<form class="inline" method="post" action="/console/accounts/topup" aria-label="${t(l, 'ops.topUpOf', { name: account.name })}">
    <input type="hidden" name="csrf_token" value="${csrf}" />
    <input type="hidden" name="account_id" value="${id}" />
    <input type="hidden" name="form_id" value="${randomBytes(18).toString('base64url')}" />
    <div class="field">
      <label class="visually-hidden" for="amount-${id}">${t(l, 'ops.amountFor', { name: account.name })}</label>
      <input
        id="amount-${id}"
        name="amount"
        inputmode="numeric"
        required
        size="9"
        placeholder="${t(l, 'ops.amountPlaceholder')}"
      />
    </div>
    <div class="field">
      <label class="visually-hidden" for="ref-${id}">${t(l, 'ops.reference')}</label>
      <input id="ref-${id}" name="reference" maxlength="200" size="12" placeholder="${t(l, 'ops.referencePlaceholder')}" dir="auto" />
    </div>
    <button class="btn btn-quiet btn-small" type="submit">${t(l, 'ops.topUp')}</button>
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
  const l = input.viewer.locale;
  return page({
    title: t(l, 'ops.title'),
    path: '/console/accounts',
    viewer: input.viewer,
    lede: t(l, 'ops.lede'),
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel" aria-labelledby="new-account-heading">
        <h2 id="new-account-heading">${t(l, 'ops.create')}</h2>
        <form class="inline" method="post" action="/console/accounts">
          <input type="hidden" name="csrf_token" value="${csrf}" />
          <div class="field">
            <label for="acc-name">${t(l, 'ops.name')}</label
            ><input id="acc-name" name="name" required maxlength="200" value="${input.form?.name ?? ''}" dir="auto" />
          </div>
          <div class="field">
            <label for="acc-email">${t(l, 'ops.email')}</label
            ><input
              id="acc-email"
              name="email"
              dir="ltr"
              type="email"
              required
              maxlength="254"
              value="${input.form?.email ?? ''}"
            />
          </div>
          <div class="field">
            <label for="acc-password">${t(l, 'ops.password')} <span class="hint">${t(l, 'ops.passwordHint')}</span></label
            >${newPasswordInput('acc-password', 'password')}
          </div>
          <button class="btn" type="submit">${t(l, 'ops.createSubmit')}</button>
        </form>
      </section>
      <section class="panel" aria-labelledby="accounts-heading">
        <h2 id="accounts-heading">${t(l, 'ops.title')}</h2>
        <form class="inline" method="get" action="/console/accounts" role="search" aria-label="${t(l, 'ops.search')}">
          <div class="field">
            <label for="acc-q">${t(l, 'ops.find')}</label>
            <input
              id="acc-q"
              name="q"
              type="search"
              maxlength="100"
              value="${input.query}"
              dir="auto"
              aria-describedby="acc-q-hint"
            />
            <span class="hint" id="acc-q-hint">${t(l, 'ops.findHint')}</span>
          </div>
          <button class="btn btn-quiet" type="submit">${t(l, 'ops.searchSubmit')}</button>
        </form>
        <br />
        <div class="table-wrap">
          <table class="cards" data-testid="accounts">
            <thead>
              <tr>
                <th scope="col">${t(l, 'ops.account')}</th>
                <th scope="col">${t(l, 'ops.email')}</th>
                <th scope="col">${t(l, 'ops.created')}</th>
                <th scope="col" class="num">${t(l, 'ops.balance')}</th>
                <th scope="col" class="num">${t(l, 'ops.held')}</th>
                <th scope="col">${t(l, 'ops.topUp')}</th>
              </tr>
            </thead>
            <tbody>
              ${
                input.accounts.length === 0
                  ? html`<tr>
                      <td colspan="6" class="empty">${input.query === '' ? t(l, 'ops.noAccounts') : t(l, 'ops.noMatch')}</td>
                    </tr>`
                  : input.accounts.map(
                      (a) =>
                        html`<tr>
                          <td data-label="${t(l, 'ops.account')}">
                            <a href="/console/accounts/view?id=${encodeURIComponent(a.id)}" dir="auto">${a.name}</a><br /><span
                              class="mono hint"
                              >${a.id}</span
                            >
                          </td>
                          <td data-label="${t(l, 'ops.email')}" dir="auto">${a.email === '' ? html`<span class="hint">${t(l, 'ops.noSignIn')}</span>` : a.email}</td>
                          <td data-label="${t(l, 'ops.created')}">${when(l, a.createdAt)}</td>
                          <td data-label="${t(l, 'ops.balance')}" class="num">${num(l, a.balance)}</td>
                          <td data-label="${t(l, 'ops.held')}" class="num">${num(l, a.held)}</td>
                          <td data-label="${t(l, 'ops.topUp')}">${topUpForm(l, csrf, a)}</td>
                        </tr>`,
                    )
              }
            </tbody>
          </table>
        </div>
        <nav class="pager" aria-label="${t(l, 'ops.pages')}">
          ${input.paged ? html`<a class="btn btn-quiet btn-small" href="${more('')}">${t(l, 'ops.first')}</a>` : html``}
          ${
            input.nextPageToken === ''
              ? html``
              : html`<a class="btn btn-quiet btn-small" rel="next" href="${more(input.nextPageToken)}">${t(l, 'ops.more')}</a>`
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
  const l = input.viewer.locale;
  const [before, after] = t(l, 'confirm.ask').split('{name}');
  return page({
    title: t(l, 'confirm.title'),
    path: '/console/accounts',
    viewer: input.viewer,
    body: html`<section class="panel" aria-labelledby="confirm-heading">
      <h2 id="confirm-heading">${before}<bdi>${a.name}</bdi>${after}</h2>
      <dl class="facts">
        <dt>${t(l, 'ops.account')}</dt>
        <dd><span dir="auto">${a.name}</span> <span class="mono hint">${a.id}</span></dd>
        <dt>${t(l, 'confirm.amount')}</dt>
        <dd data-testid="topup-amount"><strong>${toman(input.amount, l)}</strong></dd>
        <dt>${t(l, 'confirm.words')}</dt>
        <dd data-testid="topup-words">${inWords(input.amount, l)} ${t(l, 'unit.toman')}</dd>
        <dt>${t(l, 'confirm.now')}</dt>
        <dd>${toman(a.balance, l)}</dd>
        <dt>${t(l, 'confirm.after')}</dt>
        <dd data-testid="topup-after"><strong>${toman(a.balance + input.amount, l)}</strong></dd>
        <dt>${t(l, 'ops.reference')}</dt>
        <dd dir="auto">${input.reference === '' ? html`<span class="hint">${t(l, 'confirm.noReference')}</span>` : input.reference}</dd>
      </dl>
      <br />
      <form class="inline" method="post" action="/console/accounts/topup">
        <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
        <input type="hidden" name="account_id" value="${a.id}" />
        <input type="hidden" name="form_id" value="${input.formId}" />
        <input type="hidden" name="amount" value="${input.amount.toString()}" />
        <input type="hidden" name="reference" value="${input.reference}" />
        <input type="hidden" name="confirm" value="yes" />
        <button class="btn" type="submit">${t(l, 'confirm.submit')}</button>
        <a class="btn btn-quiet" href="/console/accounts/view?id=${encodeURIComponent(a.id)}">${t(l, 'confirm.cancel')}</a>
      </form>
    </section>`,
  });
}

function auditLabel(l: Locale, action: string): string {
  const key = `audit.${action}`;
  return isMessageKey(key) ? t(l, key) : action;
}

/** One account as the operator sees it: wallet, keys, recent usage and ledger, operator actions, a top-up. */
export function accountPage(input: {
  viewer: Viewer;
  detail: AccountDetail;
  account: ConsoleAccount;
  notice?: Notice;
}): Html {
  const { detail, account: a } = input;
  const l = input.viewer.locale;
  const unit = t(l, 'unit.toman');
  return page({
    title: a.name,
    path: '/console/accounts',
    viewer: input.viewer,
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<div class="grid">
        <div class="stat">
          <div class="stat-label">${t(l, 'ops.balance')}</div>
          <div class="stat-value" data-testid="account-balance">${num(l, a.balance)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'ops.held')}</div>
          <div class="stat-value">${num(l, a.held)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'acc.signIn')}</div>
          <div dir="auto">${a.email === '' ? t(l, 'acc.none') : a.email}</div>
        </div>
      </div>
      <section class="panel" aria-labelledby="topup-heading">
        <h2 id="topup-heading">${t(l, 'ops.topUp')}</h2>
        ${topUpForm(l, input.viewer.csrfToken, a)}
      </section>
      <section class="panel" aria-labelledby="sign-in-heading">
        <h2 id="sign-in-heading">${t(l, 'acc.setSignIn')}</h2>
        <p class="hint">${t(l, 'acc.setSignInLede')}</p>
        <form class="inline" method="post" action="/console/accounts/sign-in">
          <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
          <input type="hidden" name="account_id" value="${a.id}" />
          <div class="field">
            <label for="sign-in-email">${t(l, 'ops.email')}</label
            ><input id="sign-in-email" name="email" dir="ltr" type="email" required maxlength="254" value="${a.email}" />
          </div>
          <div class="field">
            <label for="sign-in-password">${t(l, 'ops.password')} <span class="hint">${t(l, 'ops.passwordHint')}</span></label
            >${newPasswordInput('sign-in-password', 'password')}
          </div>
          <button class="btn btn-quiet" type="submit">${t(l, 'acc.setSignInSubmit')}</button>
        </form>
      </section>
      <section class="panel" aria-labelledby="acc-keys-heading">
        <h2 id="acc-keys-heading">${t(l, 'acc.keys')}</h2>
        <ul class="activity">
          ${detail.keys.length === 0 ? html`<li class="hint">${t(l, 'acc.noKeys')}</li>` : detail.keys.map(
            (k) => html`<li>
              <span dir="auto">${k.name === '' ? t(l, 'keys.noLabel') : k.name}</span>
              <span class="mono hint">${k.prefix}…${k.lastFour}</span>
              <span>${k.revokedAt === undefined ? t(l, 'acc.active') : t(l, 'acc.revoked')}</span>
              <span class="hint">${t(l, 'acc.spent', { today: k.spentToday, month: k.spentThisMonth })}</span>
            </li>`,
          )}
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-usage-heading">
        <h2 id="acc-usage-heading">${t(l, 'acc.recent')} <small>${t(l, 'acc.newest50')}</small></h2>
        <ul class="activity">
          ${detail.usage.length === 0 ? html`<li class="hint">${t(l, 'acc.noRequests')}</li>` : detail.usage.map(
            (r) => html`<li>
              <time datetime="${r.createdAt?.toISOString() ?? ''}">${when(l, r.createdAt)}</time>
              <span dir="auto">${r.model === '' ? r.tool : r.model}</span>
              <span>${toman(r.cost, l)}</span>
              <span class="hint">${isMessageKey(`status.${r.status}`) ? t(l, `status.${r.status}` as 'status.ok') : r.status}</span>
              <span class="mono hint">${r.requestId}</span>
            </li>`,
          )}
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-ledger-heading">
        <h2 id="acc-ledger-heading">${t(l, 'acc.ledger')} ${detail.ledgerPaged ? html`` : html`<small>${t(l, 'acc.newest50')}</small>`}</h2>
        <ul class="activity" data-testid="account-ledger">
          ${detail.ledger.length === 0 ? html`<li class="hint">${t(l, 'acc.noEntries')}</li>` : detail.ledger.map(
            (e) => html`<li>
              <time datetime="${e.createdAt?.toISOString() ?? ''}">${when(l, e.createdAt)}</time>
              <span>${e.amount > 0n ? '+' : ''}${num(l, e.amount)}</span>
              <span class="hint">${t(l, 'acc.after', { n: e.balanceAfter })}</span>
              <span dir="auto">${e.reference}</span>
            </li>`,
          )}
        </ul>
        <nav class="pager" aria-label="${t(l, 'wallet.pages')}">
          ${
            detail.ledgerPaged
              ? html`<a class="btn btn-quiet btn-small" href="/console/accounts/view?id=${encodeURIComponent(a.id)}#acc-ledger-heading"
                  >${t(l, 'wallet.newest')}</a
                >`
              : html``
          }
          ${
            detail.ledgerNextBefore === ''
              ? html``
              : html`<a
                  class="btn btn-quiet btn-small"
                  rel="next"
                  href="/console/accounts/view?id=${encodeURIComponent(a.id)}&before=${encodeURIComponent(detail.ledgerNextBefore)}#acc-ledger-heading"
                  >${t(l, 'wallet.older')}</a
                >`
          }
        </nav>
      </section>
      ${detail.payments === undefined ? html`` : paymentsTable(l, detail.payments, true)}
      <section class="panel" aria-labelledby="acc-audit-heading">
        <h2 id="acc-audit-heading">${t(l, 'acc.audit')}</h2>
        <ul class="activity" data-testid="account-audit">
          ${detail.audit.length === 0 ? html`<li class="hint">${t(l, 'acc.noAudit')}</li>` : detail.audit.map(
            (x) => html`<li>
              <time datetime="${x.createdAt?.toISOString() ?? ''}">${when(l, x.createdAt)}</time>
              <strong>${auditLabel(l, x.action)}</strong>
              <span dir="auto">${x.detail}</span>
            </li>`,
          )}
        </ul>
      </section>`,
  });
}
