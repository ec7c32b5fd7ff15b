import type { Context } from 'koa';
import { SvcError, isSvcError } from '../../../core/edge';
import type { CallMeta } from '../../http/core-client';
import { callCore, langOf, meta, refusal, send, statusOf, tr, type Core } from '../context';
import { sessionToken } from '../session';
import { PaymentState, type Payment } from '../../../gen/svc/core/v1/payments';
import { num, when } from '../format';
import { html, type Html } from '../html';
import { t, type Locale, type MessageKey } from '../i18n';
import { bare, type Lang, type Viewer } from '../layout';
import { messagePage } from './sign-in';

/** What the top-up form offers (PaymentService.GetPaymentOptions); no gateways: no form. */
export interface TopUpOffer {
  readonly gateways: readonly string[];
  readonly minToman: bigint;
  readonly maxToman: bigint;
}

const STATE: Readonly<Record<PaymentState, MessageKey>> = {
  [PaymentState.PAYMENT_STATE_UNSPECIFIED]: 'pay.state.pending',
  [PaymentState.PAYMENT_STATE_PENDING]: 'pay.state.pending',
  [PaymentState.PAYMENT_STATE_PAID]: 'pay.state.paid',
  [PaymentState.PAYMENT_STATE_FAILED]: 'pay.state.failed',
  [PaymentState.PAYMENT_STATE_EXPIRED]: 'pay.state.expired',
  [PaymentState.UNRECOGNIZED]: 'pay.state.pending',
};

export function gatewayName(l: Locale, gateway: string): string {
  return gateway === 'zarinpal' ? t(l, 'pay.gw.zarinpal') : gateway === 'zibal' ? t(l, 'pay.gw.zibal') : gateway;
}

/** The wallet page's top-up form: the bounds said before the user submits; the gateway when there are several. */
export function topUpForm(viewer: Viewer, offer: TopUpOffer, typed: { amount: string; gateway: string }): Html {
  const l = viewer.locale;
  const bounds = { min: num(l, offer.minToman), max: num(l, offer.maxToman) };
  const chosen = offer.gateways.includes(typed.gateway) ? typed.gateway : (offer.gateways[0] ?? '');
  return html`<section class="panel" id="topup" aria-labelledby="topup-heading">
    <h2 id="topup-heading">${t(l, 'pay.title')}</h2>
    <p class="hint">${t(l, 'pay.hint', bounds)}</p>
    <form class="inline" method="post" action="/console/wallet/topup">
      <input type="hidden" name="csrf_token" value="${viewer.csrfToken}" />
      <div class="field">
        <label for="topup-amount"
          >${t(l, 'pay.amount')} <span class="hint">${t(l, 'pay.amountHint', bounds)}</span></label
        >
        <input id="topup-amount" name="amount" inputmode="numeric" size="14" required value="${typed.amount}" />
      </div>
      ${
        offer.gateways.length > 1
          ? html`<div class="field">
              <label for="topup-gateway">${t(l, 'pay.gateway')}</label>
              <select id="topup-gateway" name="gateway">
                ${offer.gateways.map(
                  (g) =>
                    html`<option value="${g}" ${g === chosen ? html`selected` : html``}>${gatewayName(l, g)}</option>`,
                )}
              </select>
            </div>`
          : html`<input type="hidden" name="gateway" value="${chosen}" />`
      }
      <button class="btn" type="submit" data-testid="topup-submit">${t(l, 'pay.submit')}</button>
    </form>
  </section>`;
}

/** Payments, newest first; `withAccount` adds the account and gateway reference columns (the operator's view). */
export function paymentsTable(l: Locale, payments: readonly Payment[], withAccount = false): Html {
  const columns = withAccount ? 7 : 5;
  return html`<section class="panel" aria-labelledby="payments-heading">
    <h2 id="payments-heading">${t(l, 'pay.list')} <small>${t(l, 'pay.listHint')}</small></h2>
    <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'pay.listRegion')}">
      <table class="cards" data-testid="payments">
        <thead>
          <tr>
            <th scope="col">${t(l, 'wallet.time')}</th>
            <th scope="col">${t(l, 'pay.gateway')}</th>
            <th scope="col" class="num">${t(l, 'wallet.amount')}</th>
            <th scope="col">${t(l, 'pay.state')}</th>
            <th scope="col">${t(l, 'pay.receipt')}</th>
            ${
              withAccount
                ? html`<th scope="col">${t(l, 'pay.reference')}</th>
                    <th scope="col">${t(l, 'receipt.payment')}</th>`
                : html``
            }
          </tr>
        </thead>
        <tbody>
          ${
            payments.length === 0
              ? html`<tr>
                  <td colspan="${columns}" class="empty">${t(l, 'pay.none')}</td>
                </tr>`
              : payments.map(
                  (p) =>
                    html`<tr>
                      <td data-label="${t(l, 'wallet.time')}">
                        <time datetime="${p.createdAt?.toISOString() ?? ''}">${when(l, p.createdAt)}</time>
                      </td>
                      <td data-label="${t(l, 'pay.gateway')}">${gatewayName(l, p.gateway)}</td>
                      <td data-label="${t(l, 'wallet.amount')}" class="num">${num(l, p.amount)}</td>
                      <td data-label="${t(l, 'pay.state')}" data-state="${String(p.state)}" title="${p.failure}">
                        ${t(l, STATE[p.state])}
                      </td>
                      <td data-label="${t(l, 'pay.receipt')}" class="mono">${p.receipt === '' ? '—' : p.receipt}</td>
                      ${
                        withAccount
                          ? html`<td data-label="${t(l, 'pay.reference')}" class="mono">${p.reference}</td>
                              <td data-label="${t(l, 'receipt.payment')}" class="mono">${p.id}</td>`
                          : html``
                      }
                    </tr>`,
                )
          }
        </tbody>
      </table>
    </div>
  </section>`;
}

const TITLE: Readonly<Record<PaymentState, MessageKey>> = {
  [PaymentState.PAYMENT_STATE_UNSPECIFIED]: 'receipt.pending',
  [PaymentState.PAYMENT_STATE_PENDING]: 'receipt.pending',
  [PaymentState.PAYMENT_STATE_PAID]: 'receipt.paid',
  [PaymentState.PAYMENT_STATE_FAILED]: 'receipt.failed',
  [PaymentState.PAYMENT_STATE_EXPIRED]: 'receipt.expired',
  [PaymentState.UNRECOGNIZED]: 'receipt.pending',
};

/**
 * The page the payer's browser lands on back from the gateway: the receipt (amount, receipt
 * number, masked card, the date in the Jalali and the Gregorian calendar). No account data
 * unless the browser is the account's own session (then a link to its wallet).
 */
export function receiptPage(lang: Lang, payment: Payment, owner: boolean): Html {
  const l = lang.locale;
  const title = t(l, TITLE[payment.state]);
  const paid = payment.state === PaymentState.PAYMENT_STATE_PAID;
  const pending = payment.state === PaymentState.PAYMENT_STATE_PENDING;
  const text = paid
    ? t(l, 'receipt.paidText', { amount: num(l, payment.amount) })
    : pending
      ? t(l, 'receipt.pendingText')
      : t(l, 'receipt.failedText');
  const at = payment.paidAt ?? payment.createdAt;
  const row = (key: MessageKey, value: Html | string, testid: string) =>
    html`<tr>
      <th scope="row">${t(l, key)}</th>
      <td data-testid="${testid}">${value}</td>
    </tr>`;
  return bare(
    lang,
    title,
    html`<div class="panel" data-testid="receipt" data-state="${String(payment.state)}">
      <h1>${title}</h1>
      <p>${text}${payment.failure === '' || paid ? '' : ` ${payment.failure}`}</p>
      <table class="receipt">
        <tbody>
          ${row('receipt.amount', html`${num(l, payment.amount)} ${t(l, 'unit.toman')}`, 'receipt-amount')}
          ${row('receipt.gateway', gatewayName(l, payment.gateway), 'receipt-gateway')}
          ${row('receipt.number', payment.receipt === '' ? '—' : payment.receipt, 'receipt-number')}
          ${row('receipt.card', payment.cardPan === '' ? '—' : html`<span dir="ltr">${payment.cardPan}</span>`, 'receipt-card')}
          ${row(
            'receipt.date',
            html`<span data-testid="receipt-jalali">${when('fa', at)}</span> ·
              <span dir="ltr" data-testid="receipt-gregorian">${when('en', at)}</span>`,
            'receipt-date',
          )}
          ${row('receipt.payment', html`<span class="mono">${payment.id}</span>`, 'receipt-payment')}
        </tbody>
      </table>
      <p>
        ${
          owner
            ? html`<a class="btn" href="/console/wallet">${t(l, 'receipt.toWallet')}</a>`
            : html`<a class="btn" href="/console/wallet">${t(l, 'receipt.signIn')}</a>`
        }
      </p>
    </div>`,
  );
}

// ---- the gateway's return (routed in ../app.ts) ----

/**
 * `GET /console/payments/{gateway}/return?…`: the payer back from the gateway. The core verifies
 * the payment server to server; the page is the receipt. A session is used when the browser
 * has a valid one (then the receipt links to the wallet); without one the page still works and
 * shows no account data.
 */
export async function paymentReturn(ctx: Context, core: Pick<Core, 'payments'>, gateway: string): Promise<void> {
  const query: Record<string, string> = {};
  let count = 0;
  for (const [name, value] of new URLSearchParams(ctx.querystring)) {
    if (++count > 20) break;
    if (!(name in query)) query[name.slice(0, 40)] = value.slice(0, 200);
  }
  const token = sessionToken(ctx);
  const call = (m: CallMeta) => callCore(m, (o) => core.payments.completePaymentReturn({ gateway, query }, o));
  let answer;
  try {
    try {
      answer = await call(meta(ctx, token));
    } catch (error) {
      // An ended session is no reason to refuse the payer a receipt.
      if (token === undefined || !isSvcError(error) || error.code !== 'session_expired') throw error;
      answer = await call(meta(ctx));
    }
  } catch (error) {
    if (!isSvcError(error) || error.code === 'internal') throw error;
    return send(ctx, statusOf(error), messagePage(langOf(ctx), tr(ctx, 'receipt.refused'), ...refusal(ctx, error)));
  }
  if (answer.payment === undefined) throw new SvcError('internal', 'core returned no payment');
  send(ctx, 200, receiptPage(langOf(ctx), answer.payment, answer.owner));
}
