import { LedgerEntryKind, type LedgerEntry, type Wallet } from '../../../gen/svc/core/v1/wallet';
import { groupDigits, utc } from '../format';
import { html, type Html } from '../html';
import { page, type Notice, type Viewer } from '../layout';

const KIND: Readonly<Partial<Record<LedgerEntryKind, string>>> = {
  [LedgerEntryKind.LEDGER_ENTRY_KIND_TOPUP]: 'Top-up',
  [LedgerEntryKind.LEDGER_ENTRY_KIND_CHARGE]: 'Charge',
  [LedgerEntryKind.LEDGER_ENTRY_KIND_REFUND]: 'Refund',
  [LedgerEntryKind.LEDGER_ENTRY_KIND_ADJUSTMENT]: 'Adjustment',
};

function amount(value: bigint): Html {
  return value >= 0n
    ? html`<span class="plus">+${groupDigits(value)}</span>`
    : html`<span class="minus">−${groupDigits(-value)}</span>`;
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
  notice?: Notice;
}): Html {
  const { wallet } = input;
  return page({
    title: 'Wallet',
    path: '/console/wallet',
    viewer: input.viewer,
    lede: 'Prepaid credits: 1 credit = 1 toman. Requests are refused, not billed, when the wallet cannot cover them.',
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<div class="grid">
        <div class="stat">
          <div class="stat-label">Balance</div>
          <div class="stat-value" data-testid="wallet-balance">${groupDigits(wallet.balance)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Held for running requests</div>
          <div class="stat-value">${groupDigits(wallet.held)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Available</div>
          <div class="stat-value">${groupDigits(wallet.balance - wallet.held)} <small>toman</small></div>
        </div>
      </div>
      <section class="panel" aria-labelledby="low-heading">
        <h2 id="low-heading">Low-balance warning</h2>
        <p class="hint">Every console page warns while the available balance is below this amount.</p>
        <form class="inline" method="post" action="/console/wallet/low-balance">
          <input type="hidden" name="csrf_token" value="${input.viewer.csrfToken}" />
          <div class="field">
            <label for="threshold">Warn below <span class="hint">toman; empty: never</span></label>
            <input id="threshold" name="threshold" inputmode="numeric" size="14" value="${input.threshold}" />
          </div>
          <button class="btn" type="submit">Save</button>
        </form>
      </section>
      <section class="panel" aria-labelledby="ledger-heading">
        <h2 id="ledger-heading">Ledger <small>newest first, 50 a page</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Ledger entries, scrollable">
          <table class="cards">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Entry</th>
                <th scope="col" class="num">Amount</th>
                <th scope="col" class="num">Balance after</th>
                <th scope="col">Reference</th>
                <th scope="col" class="hide-narrow">Request id</th>
              </tr>
            </thead>
            <tbody>
              ${
                input.entries.length === 0
                  ? html`<tr>
                      <td colspan="6" class="empty">No entries yet. Your operator tops up the wallet.</td>
                    </tr>`
                  : input.entries.map(
                      (e) =>
                        html`<tr>
                          <td data-label="Time"><time datetime="${e.createdAt?.toISOString() ?? ''}">${utc(e.createdAt)}</time></td>
                          <td data-label="Entry">${KIND[e.kind] ?? 'Entry'}</td>
                          <td data-label="Amount" class="num">${amount(e.amount)}</td>
                          <td data-label="Balance after" class="num">${groupDigits(e.balanceAfter)}</td>
                          <td data-label="Reference" dir="auto">${e.reference}</td>
                          <td data-label="Request id" class="mono hide-narrow">${e.requestId}</td>
                        </tr>`,
                    )
              }
            </tbody>
          </table>
        </div>
        <nav class="pager" aria-label="Pages of the ledger">
          ${input.paged ? html`<a class="btn btn-quiet btn-small" href="/console/wallet">Newest</a>` : html``}
          ${
            input.nextBefore === ''
              ? html``
              : html`<a
                  class="btn btn-quiet btn-small"
                  rel="next"
                  href="/console/wallet?before=${encodeURIComponent(input.nextBefore)}"
                  >Older entries</a
                >`
          }
        </nav>
      </section>`,
  });
}
