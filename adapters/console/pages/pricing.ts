import type { Context } from 'koa';
import type { GetPricingResponse, MarginReportRow } from '../../../gen/svc/core/v1/models';
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
import { auditList } from '../audit';
import { calendarDay, num, toman, when } from '../format';
import { field } from '../forms';
import { html, type Html } from '../html';
import { t, type Locale } from '../i18n';
import { page, type Notice, type Viewer } from '../layout';
import { parseAmount } from '../numbers';
import { csvCell } from './usage';

const DAY_MS = 86_400_000;
/** The report's default period: the last 30 UTC days. */
const REPORT_DAYS = 30;

/** The report's period, inclusive UTC days (YYYY-MM-DD). */
export interface ReportPeriod {
  readonly from: string;
  readonly to: string;
}

function rateForm(l: Locale, csrf: string, typed: string | undefined, force: boolean): Html {
  return html`<form class="inline" method="post" action="/console/pricing/rate">
      <input type="hidden" name="csrf_token" value="${csrf}" />
      <div class="field">
        <label for="rate-new">${t(l, 'pricing.newRate')}</label
        ><input id="rate-new" name="rate" inputmode="numeric" required size="10" value="${typed ?? ''}" dir="ltr" />
      </div>
      <div class="field">
        <label for="rate-force"
          ><input id="rate-force" name="force" type="checkbox" value="1" ${force ? html`checked` : html``} />
          ${t(l, 'pricing.force')}</label
        >
      </div>
      <button class="btn" type="submit">${t(l, 'pricing.setRate')}</button>
    </form>
    <p class="hint">${t(l, 'pricing.rails')}</p>`;
}

function historyPanel(l: Locale, pricing: GetPricingResponse): Html {
  return html`<section class="panel" aria-labelledby="rate-history-heading">
    <h2 id="rate-history-heading">${t(l, 'pricing.history')}</h2>
    <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'pricing.historyRegion')}">
      <table class="cards" data-testid="rate-history">
        <thead>
          <tr>
            <th scope="col" class="num">${t(l, 'pricing.rate')}</th>
            <th scope="col">${t(l, 'pricing.setAt')}</th>
            <th scope="col">${t(l, 'pricing.by')}</th>
          </tr>
        </thead>
        <tbody>
          ${
            pricing.history.length === 0
              ? html`<tr>
                  <td colspan="3" class="empty">${t(l, 'pricing.noRate')}</td>
                </tr>`
              : pricing.history.map(
                  (r) =>
                    html`<tr>
                      <td data-label="${t(l, 'pricing.rate')}" class="num">${num(l, r.rate)}</td>
                      <td data-label="${t(l, 'pricing.setAt')}">
                        <time datetime="${r.setAt?.toISOString() ?? ''}">${when(l, r.setAt)}</time>
                      </td>
                      <td data-label="${t(l, 'pricing.by')}" class="mono">${r.by}</td>
                    </tr>`,
                )
          }
        </tbody>
      </table>
    </div>
    <h3>${t(l, 'pricing.audit')}</h3>
    ${auditList(l, pricing.audit, 'pricing-audit')}
  </section>`;
}

function reportPanel(l: Locale, period: ReportPeriod, rows: readonly MarginReportRow[]): Html {
  const csv = `/console/pricing/report.csv?from=${period.from}&to=${period.to}`;
  return html`<section class="panel" aria-labelledby="report-heading">
    <h2 id="report-heading">${t(l, 'pricing.report')} <small>${t(l, 'pricing.reportHint')}</small></h2>
    <form class="inline" method="get" action="/console/pricing">
      <div class="field">
        <label for="r-from">${t(l, 'pricing.from')}</label
        ><input id="r-from" name="from" type="date" value="${period.from}" required />
      </div>
      <div class="field">
        <label for="r-to">${t(l, 'pricing.to')}</label
        ><input id="r-to" name="to" type="date" value="${period.to}" required />
      </div>
      <button class="btn btn-quiet" type="submit">${t(l, 'pricing.show')}</button>
      <a class="btn btn-quiet" href="${csv}" download>${t(l, 'pricing.csv')}</a>
    </form>
    <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'pricing.reportRegion')}">
      <table class="cards" data-testid="margin-report">
        <thead>
          <tr>
            <th scope="col">${t(l, 'pricing.day')}</th>
            <th scope="col">${t(l, 'prices.model')}</th>
            <th scope="col" class="num">${t(l, 'pricing.calls')}</th>
            <th scope="col" class="num">${t(l, 'pricing.revenue')}</th>
            <th scope="col" class="num">${t(l, 'pricing.costUsd')}</th>
            <th scope="col" class="num">${t(l, 'pricing.cost')}</th>
            <th scope="col" class="num">${t(l, 'pricing.margin')}</th>
          </tr>
        </thead>
        <tbody>
          ${
            rows.length === 0
              ? html`<tr>
                  <td colspan="7" class="empty">${t(l, 'pricing.noReport')}</td>
                </tr>`
              : rows.map(
                  (r) =>
                    html`<tr>
                      <td data-label="${t(l, 'pricing.day')}">${calendarDay(l, r.day)}</td>
                      <td data-label="${t(l, 'prices.model')}" class="mono">${r.model}</td>
                      <td data-label="${t(l, 'pricing.calls')}" class="num">${num(l, r.calls)}</td>
                      <td data-label="${t(l, 'pricing.revenue')}" class="num">${toman(r.revenue, l)}</td>
                      <td data-label="${t(l, 'pricing.costUsd')}" class="num" dir="ltr">
                        $${r.costUsd}${
                          r.unpricedCalls > 0n
                            ? html` <span class="hint"
                                >${t(l, 'pricing.unpriced', { n: num(l, r.unpricedCalls) })}</span
                              >`
                            : html``
                        }
                      </td>
                      <td data-label="${t(l, 'pricing.cost')}" class="num">${toman(r.cost, l)}</td>
                      <td data-label="${t(l, 'pricing.margin')}" class="num">${toman(r.margin, l)}</td>
                    </tr>`,
                )
          }
        </tbody>
      </table>
    </div>
  </section>`;
}

/** The operator's pricing page (SPEC §15): the rate and a form to change it, its history and audit, the margin report. */
export function pricingPage(input: {
  viewer: Viewer;
  pricing: GetPricingResponse;
  period: ReportPeriod;
  report: readonly MarginReportRow[];
  notice?: Notice;
  typed?: string;
  force?: boolean;
}): Html {
  const l = input.viewer.locale;
  const p = input.pricing;
  return page({
    title: t(l, 'pricing.title'),
    path: '/console/pricing',
    viewer: input.viewer,
    lede: t(l, 'pricing.lede'),
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<section class="panel" aria-labelledby="rate-heading">
        <h2 id="rate-heading">${t(l, 'pricing.current')}</h2>
        <p class="big" data-testid="current-rate">
          ${p.rate === 0n ? t(l, 'pricing.noRate') : t(l, 'pricing.rateIs', { rate: num(l, p.rate) })}
        </p>
        <p class="hint">${t(l, 'pricing.defaultMargin', { margin: p.margin === '' ? '0' : p.margin })}</p>
        ${rateForm(l, input.viewer.csrfToken, input.typed, input.force ?? false)}
      </section>
      ${historyPanel(l, p)} ${reportPanel(l, input.period, input.report)}`,
  });
}

/** The report's period from the query: `from` and `to` (YYYY-MM-DD), else the last 30 UTC days. */
function periodOf(ctx: Context): ReportPeriod {
  const q = (name: string): string => String(ctx.query[name] ?? '').slice(0, 10);
  const today = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS);
  const from = q('from');
  const to = q('to');
  if (from !== '' || to !== '') return { from, to };
  return {
    from: new Date(today.getTime() - (REPORT_DAYS - 1) * DAY_MS).toISOString().slice(0, 10),
    to: today.toISOString().slice(0, 10),
  };
}

// ---- the page (routed in ../app.ts) ----

type PricingCore = Pick<Core, 'models'>;

/** GET /console/pricing: the rate, its history, the audit and the margin report (operator). */
export async function showPricing(
  ctx: Context,
  core: PricingCore,
  extra: { notice?: Notice; status?: number; typed?: string; force?: boolean } = {},
): Promise<void> {
  const s = signedOf(ctx);
  const m = asSession(ctx);
  const period = periodOf(ctx);
  const pricing = await callCore(m, (o) => core.models.getPricing({}, o));
  let report: readonly MarginReportRow[] = [];
  let notice = extra.notice ?? done(ctx);
  let status = extra.status ?? 200;
  try {
    report = (await callCore(m, (o) => core.models.getMarginReport({ fromDay: period.from, toDay: period.to }, o)))
      .rows;
  } catch (error) {
    // A period refused (a bad day, more than 366 days) is said on the page, the rest still shown.
    if (!isFormRefusal(error)) throw error;
    notice ??= noticeOf(ctx, error);
    status = statusOf(error);
  }
  send(
    ctx,
    status,
    pricingPage({
      viewer: s.viewer,
      pricing,
      period,
      report,
      ...(notice === undefined ? {} : { notice }),
      ...(extra.typed === undefined ? {} : { typed: extra.typed }),
      ...(extra.force === undefined ? {} : { force: extra.force }),
    }),
  );
}

/** POST /console/pricing/rate: a new rate, with the guard rails (the CSRF token checked by the middleware). */
export async function setRate(ctx: Context, core: PricingCore): Promise<void> {
  const form = formOf(ctx);
  const typed = field(form, 'rate');
  const force = field(form, 'force') === '1';
  try {
    const rate = parseAmount(typed, 'rate', 'The rate') ?? 0n;
    await callCore(asSession(ctx), (o) => core.models.setRate({ rate, force }, o));
    seeOther(ctx, '/console/pricing?done=rate');
  } catch (error) {
    if (!isFormRefusal(error)) throw error;
    await showPricing(ctx, core, { notice: noticeOf(ctx, error), status: statusOf(error), typed, force });
  }
}

const CSV_HEADER =
  'day,model,calls,revenue_credits,upstream_cost_usd,upstream_cost_credits,margin_credits,unpriced_calls';

/** GET /console/pricing/report.csv?from=&to=: the margin report as CSV (operator). */
export async function marginCsv(ctx: Context, core: PricingCore): Promise<void> {
  const period = periodOf(ctx);
  const { rows } = await callCore(asSession(ctx), (o) =>
    core.models.getMarginReport({ fromDay: period.from, toDay: period.to }, o),
  );
  // The model id is the operator's text (a formula-looking one is defused); the rest are numbers.
  const lines = rows.map((r) =>
    [r.day, csvCell(r.model), r.calls, r.revenue, r.costUsd, r.cost, r.margin, r.unpricedCalls].join(','),
  );
  ctx.status = 200;
  ctx.type = 'text/csv; charset=utf-8';
  ctx.set('content-disposition', `attachment; filename="svc-margin-${period.from}-to-${period.to}.csv"`);
  ctx.body = `${[CSV_HEADER, ...lines].join('\r\n')}\r\n`;
}
