import type { Context } from 'koa';
import { SvcError, isSvcError } from '../../../core/edge';
import {
  allowFormTargets,
  asSession,
  callCore,
  done,
  formOf,
  isFormRefusal,
  langOf,
  meta,
  noticeOf,
  refusal,
  seeOther,
  send,
  signedOf,
  statusOf,
  tr,
  type Core,
} from '../context';
import { field } from '../forms';
import { parseAmount } from '../numbers';
import { LedgerEntryKind, type LedgerEntry, type Wallet } from '../../../gen/svc/core/v1/wallet';
import { groupDigits, num, when } from '../format';
import { html, type Html } from '../html';
import { t, type Locale, type MessageKey } from '../i18n';
import type { Payment } from '../../../gen/svc/core/v1/payments';
import { page, type Notice, type Viewer } from '../layout';
import { paymentsTable, topUpForm, type TopUpOffer } from './payments';
import { messagePage } from './sign-in';

const KIND: Readonly<Partial<Record<LedgerEntryKind, MessageKey>>> = {
  [LedgerEntryKind.LEDGER_ENTRY_KIND_TOPUP]: 'kind.topup',
  [LedgerEntryKind.LEDGER_ENTRY_KIND_CHARGE]: 'kind.charge',
  [LedgerEntryKind.LEDGER_ENTRY_KIND_REFUND]: 'kind.refund',
  [LedgerEntryKind.LEDGER_ENTRY_KIND_ADJUSTMENT]: 'kind.adjustment',
};

function amount(l: Locale, value: bigint): Html {
  return value >= 0n
    ? html`<span class="plus">+${num(l, value)}</span>`
    : html`<span class="minus">−${num(l, -value)}</span>`;
}

/** Balance, held and available credits, and the append-only ledger. */
export function walletPage(input: {
  viewer: Viewer;
  wallet: Wallet;
  entries: readonly LedgerEntry[];
  /** The id to page on from (older entries), '' when this is the last page. */
  nextBefore: string;
  /** Whether this page is not the newest. */
  paged: boolean;
  /** The low-balance threshold as the form shows it ('' for none). */
  threshold: string;
  /** The top-up form's gateways and bounds; undefined (or no gateways): no form. */
  offer?: TopUpOffer;
  /** The account's payments through the gateways, newest first. */
  payments?: readonly Payment[];
  /** The top-up form as it was typed, when it comes back refused. */
  typed?: { amount: string; gateway: string };
  notice?: Notice;
}): Html {
  const { wallet } = input;
  const l = input.viewer.locale;
  const unit = t(l, 'unit.toman');
  return page({
    title: t(l, 'wallet.title'),
    path: '/console/wallet',
    viewer: input.viewer,
    lede: t(l, 'wallet.lede'),
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<div class="grid">
        <div class="stat">
          <div class="stat-label">${t(l, 'wallet.balance')}</div>
          <div class="stat-value" data-testid="wallet-balance">${num(l, wallet.balance)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'wallet.held')}</div>
          <div class="stat-value">${num(l, wallet.held)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'wallet.available')}</div>
          <div class="stat-value">${num(l, wallet.balance - wallet.held)} <small>${unit}</small></div>
        </div>
      </div>
      ${
        input.offer !== undefined && input.offer.gateways.length > 0
          ? topUpForm(input.viewer, input.offer, input.typed ?? { amount: '', gateway: '' })
          : html``
      }
      ${
        input.payments !== undefined && (input.payments.length > 0 || (input.offer?.gateways.length ?? 0) > 0)
          ? paymentsTable(l, input.payments)
          : html``
      }
      <section class="panel" aria-labelledby="low-heading">
        <h2 id="low-heading">${t(l, 'wallet.low')}</h2>
        <p class="hint">${t(l, 'wallet.lowHint')}</p>
        <form class="inline" method="post" action="/console/wallet/low-balance">
          <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
          <div class="field">
            <label for="threshold"
              >${t(l, 'wallet.warnBelow')} <span class="hint">${t(l, 'wallet.warnHint')}</span></label
            >
            <input id="threshold" name="threshold" inputmode="numeric" size="14" value="${input.threshold}" />
          </div>
          <button class="btn" type="submit">${t(l, 'wallet.save')}</button>
        </form>
      </section>
      <section class="panel" aria-labelledby="ledger-heading">
        <h2 id="ledger-heading">${t(l, 'wallet.ledger')} <small>${t(l, 'wallet.ledgerHint')}</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'wallet.ledgerRegion')}">
          <table class="cards">
            <thead>
              <tr>
                <th scope="col">${t(l, 'wallet.time')}</th>
                <th scope="col">${t(l, 'wallet.entry')}</th>
                <th scope="col" class="num">${t(l, 'wallet.amount')}</th>
                <th scope="col" class="num">${t(l, 'wallet.after')}</th>
                <th scope="col">${t(l, 'wallet.reference')}</th>
                <th scope="col" class="hide-narrow">${t(l, 'wallet.requestId')}</th>
              </tr>
            </thead>
            <tbody>
              ${
                input.entries.length === 0
                  ? html`<tr>
                      <td colspan="6" class="empty">${t(l, 'wallet.empty')}</td>
                    </tr>`
                  : input.entries.map(
                      (e) =>
                        html`<tr>
                          <td data-label="${t(l, 'wallet.time')}">
                            <time datetime="${e.createdAt?.toISOString() ?? ''}">${when(l, e.createdAt)}</time>
                          </td>
                          <td data-label="${t(l, 'wallet.entry')}">${t(l, KIND[e.kind] ?? 'kind.entry')}</td>
                          <td data-label="${t(l, 'wallet.amount')}" class="num">${amount(l, e.amount)}</td>
                          <td data-label="${t(l, 'wallet.after')}" class="num">${num(l, e.balanceAfter)}</td>
                          <td data-label="${t(l, 'wallet.reference')}" dir="auto">${e.reference}</td>
                          <td data-label="${t(l, 'wallet.requestId')}" class="mono hide-narrow">${e.requestId}</td>
                        </tr>`,
                    )
              }
            </tbody>
          </table>
        </div>
        <nav class="pager" aria-label="${t(l, 'wallet.pages')}">
          ${input.paged ? html`<a class="btn btn-quiet btn-small" href="/console/wallet">${t(l, 'wallet.newest')}</a>` : html``}
          ${
            input.nextBefore === ''
              ? html``
              : html`<a
                  class="btn btn-quiet btn-small"
                  rel="next"
                  href="/console/wallet?before=${encodeURIComponent(input.nextBefore)}"
                  >${t(l, 'wallet.older')}</a
                >`
          }
        </nav>
      </section>`,
  });
}

// ---- the page and its forms (routed in ../app.ts) ----

type WalletCore = Pick<Core, 'wallet' | 'payments' | 'console'>;

/** GET /console/wallet; a refused form shows it again with its notice and what was typed. */
export async function showWallet(
  ctx: Context,
  core: WalletCore,
  extra: { notice?: Notice; status?: number; threshold?: string; typed?: { amount: string; gateway: string } } = {},
): Promise<void> {
  const s = signedOf(ctx);
  const n = extra.notice ?? done(ctx);
  const before = String(ctx.query['before'] ?? '').slice(0, 40);
  const m = meta(ctx, s.token);
  let ledger;
  try {
    ledger = await callCore(m, (o) => core.wallet.listLedger({ accountId: '', limit: 50, before }, o));
  } catch (error) {
    if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
    return send(ctx, 400, messagePage(langOf(ctx), tr(ctx, 'message.ledgerRefused'), ...refusal(ctx, error)));
  }
  const [{ wallet: balance }, options, { payments }] = await Promise.all([
    callCore(m, (o) => core.wallet.getWallet({ accountId: '' }, o)),
    callCore(m, (o) => core.payments.getPaymentOptions({}, o)),
    callCore(m, (o) => core.payments.listPayments({ accountId: '', state: 0, limit: 20, pageToken: '' }, o)),
  ]);
  if (balance === undefined) throw new SvcError('internal', 'core returned no wallet');
  const result = { wallet: balance, entries: ledger.entries, nextBefore: ledger.nextBefore };
  const offer: TopUpOffer = options;
  // The top-up form's POST answers with a redirect to the gateway: the form may go there.
  if (options.redirectOrigins.length > 0) allowFormTargets(ctx, options.redirectOrigins);
  send(
    ctx,
    extra.status ?? 200,
    walletPage({
      viewer: s.viewer,
      wallet: result.wallet,
      entries: result.entries,
      nextBefore: result.nextBefore,
      paged: before !== '',
      threshold: extra.threshold ?? (s.lowBalanceThreshold === undefined ? '' : groupDigits(s.lowBalanceThreshold)),
      offer,
      payments,
      ...(extra.typed === undefined ? {} : { typed: extra.typed }),
      ...(n === undefined ? {} : { notice: n }),
    }),
  );
}

/** POST /console/wallet/topup: a payment at the gateway, and the payer sent there (303). */
export async function startTopUp(ctx: Context, core: WalletCore): Promise<void> {
  const form = formOf(ctx);
  const typed = { amount: field(form, 'amount').slice(0, 40), gateway: field(form, 'gateway').slice(0, 20) };
  try {
    const amount = parseAmount(typed.amount, 'amount', 'The amount');
    if (amount === undefined)
      throw new SvcError('invalid_argument', 'Enter the amount to pay, in toman.', { param: 'amount' });
    const started = await callCore(asSession(ctx), (o) =>
      core.payments.startPayment({ accountId: '', gateway: typed.gateway, amount }, o),
    );
    seeOther(ctx, started.redirectUrl);
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    // A gateway that refused the session (ZarinPal's -10, …) or could not be reached is the
    // gateway's failure, not ours; still the answer is the page with its words, never a 5xx: a
    // reverse proxy or CDN replaces a 5xx page with its own and the payer would not see them.
    const status = statusOf(error);
    await showWallet(ctx, core, { notice: noticeOf(ctx, error), status: status >= 500 ? 422 : status, typed });
  }
}

/** POST /console/wallet/low-balance. */
export async function setLowBalance(ctx: Context, core: WalletCore): Promise<void> {
  const form = formOf(ctx);
  const typed = field(form, 'threshold').slice(0, 40);
  try {
    const threshold = parseAmount(typed, 'threshold', 'The warning threshold');
    await callCore(asSession(ctx), (o) =>
      core.console.setConsoleLowBalance(threshold === undefined ? {} : { threshold }, o),
    );
    seeOther(ctx, '/console/wallet?done=low_balance');
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showWallet(ctx, core, { notice: noticeOf(ctx, error), status: statusOf(error), threshold: typed });
  }
}
