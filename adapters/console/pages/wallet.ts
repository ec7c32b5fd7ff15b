import { LedgerEntryKind, type LedgerEntry, type Wallet } from '../../../gen/svc/core/v1/wallet';
import { num, when } from '../format';
import { html, type Html } from '../html';
import { t, type Locale, type MessageKey } from '../i18n';
import type { Payment } from '../../../gen/svc/core/v1/payments';
import { page, type Notice, type Viewer } from '../layout';
import { paymentsTable, topUpForm, type TopUpOffer } from './payments';

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
            <label for="threshold">${t(l, 'wallet.warnBelow')} <span class="hint">${t(l, 'wallet.warnHint')}</span></label>
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
                          <td data-label="${t(l, 'wallet.time')}"><time datetime="${e.createdAt?.toISOString() ?? ''}">${when(l, e.createdAt)}</time></td>
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
