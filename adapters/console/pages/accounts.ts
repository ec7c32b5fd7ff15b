import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import { auditList } from '../audit';
import type { Payment } from '../../../gen/svc/core/v1/payments';
import { SvcError, isSvcError } from '../../../core/edge';
import type { CallMeta } from '../../http/core-client';
import {
  asSession,
  callCore,
  done,
  formOf,
  isFormRefusal,
  langOf,
  noticeOf,
  refusal,
  seeOther,
  send,
  signedOf,
  statusOf,
  tr,
  type Core,
} from '../context';
import { asciiDigits, parseAmount } from '../numbers';
import { paymentsTable } from './payments';
import { messagePage } from './sign-in';
import type { AuditEntry } from '../../../gen/svc/core/v1/accounts';
import type { ApiKey } from '../../../gen/svc/core/v1/keys';
import type { UsageRecord } from '../../../gen/svc/core/v1/usage';
import type { LedgerEntry } from '../../../gen/svc/core/v1/wallet';
import { inWords, num, toman, when } from '../format';
import { field, newPasswordInput } from '../forms';
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
  return html`<form
    class="inline"
    method="post"
    action="/console/accounts/topup"
    aria-label="${t(l, 'ops.topUpOf', { name: account.name })}"
  >
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
      <input
        id="ref-${id}"
        name="reference"
        maxlength="200"
        size="12"
        placeholder="${t(l, 'ops.referencePlaceholder')}"
        dir="auto"
      />
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
            <label for="acc-password"
              >${t(l, 'ops.password')} <span class="hint">${t(l, 'ops.passwordHint')}</span></label
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
                      <td colspan="6" class="empty">
                        ${input.query === '' ? t(l, 'ops.noAccounts') : t(l, 'ops.noMatch')}
                      </td>
                    </tr>`
                  : input.accounts.map(
                      (a) =>
                        html`<tr>
                          <td data-label="${t(l, 'ops.account')}">
                            <a href="/console/accounts/view?id=${encodeURIComponent(a.id)}" dir="auto">${a.name}</a
                            ><br /><span class="mono hint">${a.id}</span>
                          </td>
                          <td data-label="${t(l, 'ops.email')}" dir="auto">
                            ${a.email === '' ? html`<span class="hint">${t(l, 'ops.noSignIn')}</span>` : a.email}
                          </td>
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
              : html`<a class="btn btn-quiet btn-small" rel="next" href="${more(input.nextPageToken)}"
                  >${t(l, 'ops.more')}</a
                >`
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
        <dd dir="auto">
          ${input.reference === '' ? html`<span class="hint">${t(l, 'confirm.noReference')}</span>` : input.reference}
        </dd>
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
        <a class="btn btn-quiet" href="/console/accounts/view?id=${encodeURIComponent(a.id)}"
          >${t(l, 'confirm.cancel')}</a
        >
      </form>
    </section>`,
  });
}

/**
 * One of the account's keys on the operator's page, with the operator's form for its own limit of
 * calls in flight (SPEC §6, issue 48): a whole number, or empty for the service's limit.
 */
function keyItem(l: Locale, csrfToken: string, accountId: string, k: ApiKey): Html {
  const id = `concurrent-${k.id}`;
  return html`<li>
    <span dir="auto">${k.name === '' ? t(l, 'keys.noLabel') : k.name}</span>
    <span class="mono hint">${k.prefix}…${k.lastFour}</span>
    <span>${k.revokedAt === undefined ? t(l, 'acc.active') : t(l, 'acc.revoked')}</span>
    <span class="hint">${t(l, 'acc.spent', { today: k.spentToday, month: k.spentThisMonth })}</span>
    ${
      k.revokedAt !== undefined
        ? html``
        : html`<form class="inline" method="post" action="/console/accounts/keys/concurrent">
            <input type="hidden" name="csrf_token" value="${csrfToken}" />
            <input type="hidden" name="account_id" value="${accountId}" />
            <input type="hidden" name="key_id" value="${k.id}" />
            <div class="field">
              <label for="${id}"
                >${t(l, 'key.concurrent')} <span class="hint">${t(l, 'acc.concurrentHint')}</span></label
              ><input
                id="${id}"
                name="concurrent"
                dir="ltr"
                inputmode="numeric"
                maxlength="12"
                data-testid="${id}"
                value="${k.concurrentLimit === undefined ? '' : String(k.concurrentLimit)}"
              />
            </div>
            <button class="btn btn-quiet btn-small" type="submit">${t(l, 'acc.concurrentSubmit')}</button>
          </form>`
    }
  </li>`;
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
            ><input
              id="sign-in-email"
              name="email"
              dir="ltr"
              type="email"
              required
              maxlength="254"
              value="${a.email}"
            />
          </div>
          <div class="field">
            <label for="sign-in-password"
              >${t(l, 'ops.password')} <span class="hint">${t(l, 'ops.passwordHint')}</span></label
            >${newPasswordInput('sign-in-password', 'password')}
          </div>
          <button class="btn btn-quiet" type="submit">${t(l, 'acc.setSignInSubmit')}</button>
        </form>
      </section>
      <section class="panel" aria-labelledby="acc-keys-heading">
        <h2 id="acc-keys-heading">${t(l, 'acc.keys')}</h2>
        <ul class="activity">
          ${
            detail.keys.length === 0
              ? html`<li class="hint">${t(l, 'acc.noKeys')}</li>`
              : detail.keys.map((k) => keyItem(l, input.viewer.csrfToken, a.id, k))
          }
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-usage-heading">
        <h2 id="acc-usage-heading">${t(l, 'acc.recent')} <small>${t(l, 'acc.newest50')}</small></h2>
        <ul class="activity">
          ${
            detail.usage.length === 0
              ? html`<li class="hint">${t(l, 'acc.noRequests')}</li>`
              : detail.usage.map(
                  (r) =>
                    html`<li>
                      <time datetime="${r.createdAt?.toISOString() ?? ''}">${when(l, r.createdAt)}</time>
                      <span dir="auto">${r.model === '' ? r.tool : r.model}</span>
                      <span>${toman(r.cost, l)}</span>
                      <span class="hint"
                        >${isMessageKey(`status.${r.status}`) ? t(l, `status.${r.status}` as 'status.ok') : r.status}</span
                      >
                      <span class="mono hint">${r.requestId}</span>
                    </li>`,
                )
          }
        </ul>
      </section>
      <section class="panel" aria-labelledby="acc-ledger-heading">
        <h2 id="acc-ledger-heading">
          ${t(l, 'acc.ledger')} ${detail.ledgerPaged ? html`` : html`<small>${t(l, 'acc.newest50')}</small>`}
        </h2>
        <ul class="activity" data-testid="account-ledger">
          ${
            detail.ledger.length === 0
              ? html`<li class="hint">${t(l, 'acc.noEntries')}</li>`
              : detail.ledger.map(
                  (e) =>
                    html`<li>
                      <time datetime="${e.createdAt?.toISOString() ?? ''}">${when(l, e.createdAt)}</time>
                      <span>${e.amount > 0n ? '+' : ''}${num(l, e.amount)}</span>
                      <span class="hint">${t(l, 'acc.after', { n: e.balanceAfter })}</span>
                      <span dir="auto">${e.reference}</span>
                    </li>`,
                )
          }
        </ul>
        <nav class="pager" aria-label="${t(l, 'wallet.pages')}">
          ${
            detail.ledgerPaged
              ? html`<a
                  class="btn btn-quiet btn-small"
                  href="/console/accounts/view?id=${encodeURIComponent(a.id)}#acc-ledger-heading"
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
        ${auditList(l, detail.audit, 'account-audit')}
      </section>`,
  });
}

// ---- the operator's pages and forms (routed in ../app.ts) ----

type AccountsCore = Pick<Core, 'accounts' | 'wallet' | 'keys' | 'usage' | 'payments'>;

/** The most one console top-up credits. */
const MAX_CONSOLE_TOP_UP = 1_000_000_000_000n;

/** GET /console/accounts: the search, the list, the create form. */
export async function showAccounts(
  ctx: Context,
  core: AccountsCore,
  extra: { notice?: Notice; status?: number; form?: { name: string; email: string } } = {},
): Promise<void> {
  const s = signedOf(ctx);
  const query = String(ctx.query['q'] ?? '').slice(0, 100);
  const cursor = String(ctx.query['cursor'] ?? '').slice(0, 200);
  let list;
  try {
    list = await callCore(asSession(ctx), (o) => core.accounts.listAccounts({ query, pageToken: cursor }, o));
  } catch (error) {
    if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
    return send(ctx, 400, messagePage(langOf(ctx), tr(ctx, 'message.accountsRefused'), ...refusal(ctx, error)));
  }
  const n = extra.notice ?? done(ctx);
  send(
    ctx,
    extra.status ?? 200,
    accountsPage({
      viewer: s.viewer,
      accounts: list.accounts.map((a) => accountRow(a.account, a)),
      query,
      nextPageToken: list.nextPageToken,
      paged: cursor !== '',
      ...(n === undefined ? {} : { notice: n }),
      ...(extra.form === undefined ? {} : { form: extra.form }),
    }),
  );
}

/** An account and its wallet as the operator's pages show them. */
function accountRow(
  account: { id: string; name: string; email: string; createdAt?: Date | undefined } | undefined,
  wallet: { balance: bigint; held: bigint } | undefined,
): ConsoleAccount {
  if (account === undefined || wallet === undefined) throw new SvcError('internal', 'core returned no account');
  return { ...account, createdAt: account.createdAt, balance: wallet.balance, held: wallet.held };
}

/** One account, read with the operator session (NOT_FOUND for an unknown id). */
async function readAccount(core: AccountsCore, m: CallMeta, accountId: string): Promise<ConsoleAccount> {
  if (accountId === '') throw new SvcError('not_found', 'There is no such account.', { param: 'account_id' });
  const [{ account }, { wallet: w }] = await Promise.all([
    callCore(m, (o) => core.accounts.getAccount({ accountId }, o)),
    callCore(m, (o) => core.wallet.getWallet({ accountId }, o)),
  ]);
  return accountRow(account, w);
}

/** GET /console/accounts/view?id=: one account, its wallet, keys, usage, ledger and audit. */
export async function showAccountView(
  ctx: Context,
  core: AccountsCore,
  extra: { notice?: Notice; status?: number; id?: string } = {},
): Promise<void> {
  const s = signedOf(ctx);
  const id = extra.id ?? String(ctx.query['id'] ?? '').slice(0, 60);
  const m = asSession(ctx);
  let account: ConsoleAccount;
  try {
    account = await readAccount(core, m, id);
  } catch (error) {
    if (!isSvcError(error) || error.code !== 'not_found') throw error;
    return showAccounts(ctx, core, { notice: noticeOf(ctx, error), status: 404 });
  }
  // The ledger pages back to its first entry, as the user's wallet page does.
  const before = extra.id === undefined ? String(ctx.query['before'] ?? '').slice(0, 40) : '';
  let ledgerPage;
  try {
    ledgerPage = await callCore(m, (o) => core.wallet.listLedger({ accountId: id, limit: 50, before }, o));
  } catch (error) {
    if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
    return send(ctx, 400, messagePage(langOf(ctx), tr(ctx, 'message.ledgerRefused'), ...refusal(ctx, error)));
  }
  const ledger = ledgerPage.entries;
  const [{ keys: accountKeys }, { records: usage }, { entries: audit }, { payments }] = await Promise.all([
    callCore(m, (o) => core.keys.listKeys({ accountId: id }, o)),
    callCore(m, (o) => core.usage.listUsage({ filter: { accountId: id }, pageSize: 50, pageToken: '' }, o)),
    callCore(m, (o) => core.accounts.listAuditEntries({ accountId: id, limit: 50 }, o)),
    callCore(m, (o) => core.payments.listPayments({ accountId: id, state: 0, limit: 50, pageToken: '' }, o)),
  ]);
  const detail = {
    keys: accountKeys,
    ledger,
    usage,
    audit,
    payments,
    ledgerNextBefore: ledgerPage.nextBefore,
    ledgerPaged: before !== '',
  };
  const n = extra.notice ?? done(ctx);
  send(
    ctx,
    extra.status ?? 200,
    accountPage({
      viewer: s.viewer,
      detail,
      account,
      ...(n === undefined ? {} : { notice: n }),
    }),
  );
}

/** POST /console/accounts: a new account with a console sign-in. */
export async function createAccount(ctx: Context, core: AccountsCore): Promise<void> {
  const form = formOf(ctx);
  const input = { name: field(form, 'name'), email: field(form, 'email') };
  try {
    await callCore(asSession(ctx), (o) =>
      core.accounts.createAccount({ ...input, password: field(form, 'password') }, o),
    );
    seeOther(ctx, '/console/accounts?done=account');
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    const keep = { name: input.name.slice(0, 200), email: input.email.slice(0, 254) };
    await showAccounts(ctx, core, { notice: noticeOf(ctx, error), status: statusOf(error), form: keep });
  }
}

/** Gives the account on the page a console sign-in (or replaces its own). */
/** POST /console/accounts/sign-in. */
export async function setSignIn(ctx: Context, core: AccountsCore): Promise<void> {
  const form = formOf(ctx);
  const accountId = field(form, 'account_id');
  try {
    await callCore(asSession(ctx), (o) =>
      core.accounts.setSignIn({ accountId, email: field(form, 'email'), password: field(form, 'password') }, o),
    );
    seeOther(ctx, `/console/accounts/view?id=${encodeURIComponent(accountId)}&done=sign_in`);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    if (error.code === 'not_found') return showAccounts(ctx, core, { notice: noticeOf(ctx, error), status: 404 });
    await showAccountView(ctx, core, { id: accountId, notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}

/** The most calls in flight the console sets for one key (the core takes up to 100,000). */
const MAX_CONSOLE_CONCURRENT = 100_000;

/**
 * A key's own limit of calls in flight, the operator's alone (the core refuses it from a user's
 * session): a whole number from 1, or empty for the service's `limits.concurrent_per_key`. The
 * change is on the key's activity list, as the core notes every key edit.
 */
/** POST /console/accounts/keys/concurrent. */
export async function setKeyConcurrent(ctx: Context, core: AccountsCore): Promise<void> {
  const form = formOf(ctx);
  const accountId = field(form, 'account_id');
  const keyId = field(form, 'key_id');
  try {
    const text = asciiDigits(field(form, 'concurrent')).replace(/[,\s\u066c]/g, '');
    const limit = text === '' ? undefined : /^[0-9]{1,7}$/.test(text) ? Number(text) : NaN;
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= MAX_CONSOLE_CONCURRENT))
      throw new SvcError(
        'invalid_argument',
        `Calls at once must be a whole number from 1 to ${MAX_CONSOLE_CONCURRENT}, or empty for the service's limit.`,
        { param: 'concurrent' },
      );
    // Only a key of the account on the page (another account's key looks like no key at all).
    const { key } = await callCore(asSession(ctx), (o) => core.keys.getKey({ keyId }, o));
    if (key === undefined || key.accountId !== accountId)
      throw new SvcError('not_found', 'There is no such key in this account.', { param: 'key_id' });
    await callCore(asSession(ctx), (o) =>
      core.keys.updateKey(
        limit === undefined ? { keyId, removeConcurrentLimit: true } : { keyId, concurrentLimit: limit },
        o,
      ),
    );
    seeOther(ctx, `/console/accounts/view?id=${encodeURIComponent(accountId)}&done=concurrent`);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showAccountView(ctx, core, { id: accountId, notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}

/**
 * A top-up in two steps: the first POST only reads the form back (amount in figures and words,
 * the balance after, the reference) and changes nothing; the confirmation applies it, once per
 * form id however often it is sent.
 */
/** POST /console/accounts/topup. */
export async function topUp(ctx: Context, core: AccountsCore): Promise<void> {
  const s = signedOf(ctx);
  const form = formOf(ctx);
  const accountId = field(form, 'account_id');
  try {
    const amount = parseAmount(field(form, 'amount'), 'amount', 'The amount');
    if (amount === undefined || amount === 0n)
      throw new SvcError('invalid_argument', 'Enter the amount in toman, e.g. 50,000.', { param: 'amount' });
    // The console's own bound (the API takes more): a slip of extra zeros is refused, not confirmed.
    if (amount > MAX_CONSOLE_TOP_UP)
      throw new SvcError(
        'invalid_argument',
        `The amount must be a whole number of toman from 1 to ${MAX_CONSOLE_TOP_UP.toString()}.`,
        { param: 'amount' },
      );
    if (field(form, 'confirm') !== 'yes') {
      const account = await readAccount(core, asSession(ctx), accountId);
      const formId = field(form, 'form_id');
      return send(
        ctx,
        200,
        topUpConfirmPage({
          viewer: s.viewer,
          account,
          amount,
          reference: field(form, 'reference').slice(0, 200),
          formId: /^[A-Za-z0-9_-]{16,64}$/.test(formId) ? formId : randomBytes(18).toString('base64url'),
        }),
      );
    }
    const formId = field(form, 'form_id');
    if (!/^[A-Za-z0-9_-]{16,64}$/.test(formId))
      throw new SvcError('invalid_argument', 'This top-up form is incomplete. Reload the page and try again.', {
        param: 'form_id',
      });
    const reference = field(form, 'reference').trim();
    // As on every console form: no markup in what pages show back (the core refuses the rest).
    if (/[<>]/.test(reference))
      throw new SvcError('invalid_argument', 'The reference may not contain "<" or ">": markup is not allowed.', {
        param: 'reference',
      });
    // The form's id is the ledger's request id: submitting one form twice credits (and is audited) once.
    const applied = await callCore(asSession(ctx), (o) =>
      core.wallet.topUp(
        {
          accountId,
          amount,
          reference: reference === '' ? 'console top-up' : reference,
          requestId: `console_topup_${formId}`,
        },
        o,
      ),
    );
    if (applied.alreadyApplied) {
      // Confirmed before (a second click, a resent form, another amount typed into the same
      // form): nothing was credited now; the operator is told what was, and when.
      const { locale } = langOf(ctx);
      const entry = applied.entry;
      return showAccountView(ctx, core, {
        id: accountId,
        status: 409,
        notice: {
          kind: 'warn',
          text: tr(ctx, 'done.topupAlready', {
            amount: toman(entry?.amount ?? 0n, locale),
            at: when(locale, entry?.createdAt),
          }),
        },
      });
    }
    seeOther(ctx, `/console/accounts/view?id=${encodeURIComponent(accountId)}&done=topup`);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    if (error.code === 'not_found') return showAccounts(ctx, core, { notice: noticeOf(ctx, error), status: 404 });
    await showAccountView(ctx, core, { id: accountId, notice: noticeOf(ctx, error), status: statusOf(error) });
  }
}
