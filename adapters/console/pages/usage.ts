import type { ApiKey } from '../../../gen/svc/core/v1/keys';
import type { Wallet } from '../../../gen/svc/core/v1/wallet';
import { spendChart } from '../chart';
import { calendarDay, num, toman, when } from '../format';
import { html, type Html } from '../html';
import { isMessageKey, t, type Locale } from '../i18n';
import { page, type Notice, type Viewer } from '../layout';

/** One request as the usage page and its CSV show it: UsageService's record with its key's label. */
export interface UsageRow {
  readonly requestId: string;
  readonly keyId: string;
  readonly keyName: string;
  /** `prefix…last4`; '' for a key not (or no longer) in the account's list. */
  readonly keyDisplay: string;
  readonly kind: string;
  /** The model or tool. */
  readonly resource: string;
  readonly inputTokens: bigint;
  readonly outputTokens: bigint;
  readonly cost: bigint;
  readonly status: string;
  readonly errorCode: string;
  readonly createdAt: Date | undefined;
}

/** One key and model's prompt caching: how much of its input was read from the cache, and what that saved. */
export interface CacheTotalRow {
  readonly keyId: string;
  readonly keyName: string;
  readonly keyDisplay: string;
  readonly model: string;
  readonly inputTokens: bigint;
  readonly cachedTokens: bigint;
  readonly cacheWriteTokens: bigint;
  readonly cacheWrite1hTokens: bigint;
  /** Credits the cache reads saved against the input price. */
  readonly saved: bigint;
}

const PERCENT_EN = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 });
const PERCENT_FA = new Intl.NumberFormat('fa-IR', { style: 'percent', maximumFractionDigits: 1 });

/** `part` of `whole` as a percentage with one decimal (a share shown, never money); "–" for no whole. */
export function share(locale: Locale, part: bigint, whole: bigint): string {
  if (whole <= 0n) return '–';
  const permille = Number((part * 1000n) / whole);
  return (locale === 'fa' ? PERCENT_FA : PERCENT_EN).format(permille / 1000);
}

/** What the usage page shows for one filter: the chart, the totals and the table agree. */
export interface UsageReport {
  readonly records: readonly UsageRow[];
  readonly daily: readonly { day: string; resource: string; cost: bigint; requests: bigint }[];
  /** The models and tools the account used in the last 90 days, for the filter. */
  readonly models: readonly string[];
  readonly tools: readonly string[];
  readonly nextPageToken: string;
  readonly totalCost: bigint;
  readonly totalRequests: bigint;
  readonly keyTotals: readonly { keyId: string; keyName: string; keyDisplay: string; requests: bigint; cost: bigint }[];
  /** Prompt caching per key and model (SPEC §13): UsageService's cache totals with each key's label. */
  readonly cacheTotals: readonly CacheTotalRow[];
  /** The period shown, inclusive UTC days. */
  readonly fromDay: string;
  readonly toDay: string;
}

export interface UsageFilterForm {
  readonly key: string;
  /** `model:ID`, `tool:NAME` or '' for everything. */
  readonly what: string;
  readonly days: number;
  /** An inclusive range of UTC days (YYYY-MM-DD), both or neither; replaces `days`. */
  readonly from: string;
  readonly to: string;
  /** '' for any. */
  readonly status: string;
}

export const USAGE_DAYS = [7, 14, 30, 90] as const;
export const USAGE_STATUSES: readonly string[] = ['ok', 'empty', 'error', 'refused', 'cancelled'];

/** The filters as a query string (the page, its next page and its CSV share them). */
export function filterQuery(f: UsageFilterForm, extra: Record<string, string> = {}): string {
  const q = new URLSearchParams();
  if (f.key !== '') q.set('key', f.key);
  if (f.what !== '') q.set('what', f.what);
  if (f.from !== '' && f.to !== '') {
    q.set('from', f.from);
    q.set('to', f.to);
  } else q.set('days', String(f.days));
  if (f.status !== '') q.set('status', f.status);
  for (const [name, value] of Object.entries(extra)) q.set(name, value);
  return q.toString();
}

export const CSV_HEADER = 'time_utc,request_id,key_id,key_label,kind,model_or_tool,input_tokens,output_tokens,cost_toman,status,error_code';

// A spreadsheet runs a cell that starts with = + - @ (or a tab or return) as a formula: such
// text (a key label) is prefixed with ' so the file stays data.
function csvCell(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/** One usage record as a CSV line (no line end). */
export function csvRow(r: UsageRow): string {
  return [
    r.createdAt?.toISOString() ?? '',
    r.requestId,
    r.keyId,
    r.keyName,
    r.kind,
    r.resource,
    r.inputTokens.toString(),
    r.outputTokens.toString(),
    r.cost.toString(),
    r.status,
    r.errorCode,
  ]
    .map(csvCell)
    .join(',');
}

const STATUS_BADGE: Readonly<Record<string, string>> = {
  ok: 'badge-ok',
  empty: 'badge-off',
  error: 'badge-bad',
  refused: 'badge-warn',
  cancelled: 'badge-warn',
};

function option(value: string, label: string, selected: string): Html {
  return html`<option value="${value}" ${value === selected ? html` selected` : html``}>${label}</option>`;
}

function statusLabel(l: Locale, status: string): string {
  const key = `status.${status}`;
  return isMessageKey(key) ? t(l, key) : status;
}

function filterForm(
  l: Locale,
  f: UsageFilterForm,
  keys: readonly ApiKey[],
  models: readonly string[],
  tools: readonly string[],
): Html {
  // A GET form: it changes nothing, so it carries no CSRF token (tokens in URLs leak to logs).
  return html`<form class="inline" method="get" action="/console/usage" aria-label="${t(l, 'usage.filter')}">
    <div class="field">
      <label for="f-key">${t(l, 'usage.key')}</label>
      <select id="f-key" name="key">
        ${option('', t(l, 'usage.allKeys'), f.key)}${keys.map((k) => option(k.id, `${k.name === '' ? t(l, 'usage.noLabel') : k.name} · ${k.prefix}…${k.lastFour}`, f.key))}
      </select>
    </div>
    <div class="field">
      <label for="f-what">${t(l, 'usage.what')}</label>
      <select id="f-what" name="what">
        ${option('', t(l, 'usage.allWhat'), f.what)}
        ${models.length === 0 ? html`` : html`<optgroup label="${t(l, 'usage.models')}">${models.map((m) => option(`model:${m}`, m, f.what))}</optgroup>`}
        ${tools.length === 0 ? html`` : html`<optgroup label="${t(l, 'usage.tools')}">${tools.map((tool) => option(`tool:${tool}`, tool, f.what))}</optgroup>`}
      </select>
    </div>
    <div class="field">
      <label for="f-status">${t(l, 'usage.status')}</label>
      <select id="f-status" name="status">
        ${option('', t(l, 'usage.anyStatus'), f.status)}${USAGE_STATUSES.map((st) => option(st, statusLabel(l, st), f.status))}
      </select>
    </div>
    <div class="field">
      <label for="f-days">${t(l, 'usage.period')}</label>
      <select id="f-days" name="days">
        ${USAGE_DAYS.map((d) => option(String(d), t(l, 'usage.lastDays', { n: d }), String(f.days)))}
      </select>
    </div>
    <div class="field">
      <label for="f-from">${t(l, 'usage.from')} <span class="hint">${t(l, 'usage.fromHint')}</span></label>
      <input id="f-from" name="from" type="date" value="${f.from}" />
    </div>
    <div class="field">
      <label for="f-to">${t(l, 'usage.to')}</label>
      <input id="f-to" name="to" type="date" value="${f.to}" />
    </div>
    <button class="btn btn-quiet" type="submit">${t(l, 'usage.apply')}</button>
  </form>`;
}

function recordRow(l: Locale, r: UsageRow): Html {
  return html`<tr>
    <td data-label="${t(l, 'usage.time')}"><time datetime="${r.createdAt?.toISOString() ?? ''}">${when(l, r.createdAt)}</time></td>
    <td data-label="${t(l, 'usage.key')}">
      <span dir="auto">${r.keyName === '' ? r.keyId : r.keyName}</span><br /><span class="mono hint nowrap"
        >${r.keyDisplay}</span
      >
    </td>
    <td data-label="${t(l, 'usage.what')}" dir="auto">${r.resource}<br /><span class="hint">${r.kind}</span></td>
    <td data-label="${t(l, 'usage.tokens')}" class="num">${num(l, r.inputTokens)} / ${num(l, r.outputTokens)}</td>
    <td data-label="${t(l, 'usage.cost')}" class="num">${toman(r.cost, l)}</td>
    <td data-label="${t(l, 'usage.status')}">
      <span class="badge ${STATUS_BADGE[r.status] ?? 'badge-off'}">${statusLabel(l, r.status)}</span
      >${r.errorCode === '' ? html`` : html`<br /><span class="hint" dir="ltr">${r.errorCode}</span>`}
    </td>
    <td data-label="${t(l, 'usage.requestId')}" class="mono hide-narrow">${r.requestId}</td>
  </tr>`;
}

/** Balance at a glance, the daily spend chart, and every request, filterable. */
export function usagePage(input: {
  viewer: Viewer;
  wallet: Wallet;
  usage: UsageReport;
  keys: readonly ApiKey[];
  filter: UsageFilterForm;
  /** The cursor of the page shown; '' for the newest. */
  cursor: string;
  notice?: Notice;
}): Html {
  const { wallet, usage, filter } = input;
  const l = input.viewer.locale;
  const unit = t(l, 'unit.toman');
  const spent = usage.totalCost;
  const requests = usage.totalRequests;
  const period = `${calendarDay(l, usage.fromDay)} – ${calendarDay(l, usage.toDay)}`;
  const periodDays = Math.round((Date.parse(usage.toDay) - Date.parse(usage.fromDay)) / 86_400_000) + 1;
  const keyRows = usage.keyTotals.map(
    (k) => html`<tr>
      <td data-label="${t(l, 'usage.key')}"><span dir="auto">${k.keyName === '' ? k.keyId : k.keyName}</span> <span class="mono hint">${k.keyDisplay}</span></td>
      <td data-label="${t(l, 'usage.requestsCol')}" class="num">${num(l, k.requests)}</td>
      <td data-label="${t(l, 'usage.cost')}" class="num">${toman(k.cost, l)}</td>
    </tr>`,
  );
  const cacheRows = usage.cacheTotals.map(
    (c) => html`<tr>
      <td data-label="${t(l, 'usage.key')}"><span dir="auto">${c.keyName === '' ? c.keyId : c.keyName}</span> <span class="mono hint">${c.keyDisplay}</span></td>
      <td data-label="${t(l, 'usage.model')}"><span dir="auto">${c.model}</span></td>
      <td data-label="${t(l, 'usage.inputTokens')}" class="num">${num(l, c.inputTokens)}</td>
      <td data-label="${t(l, 'usage.cacheRead')}" class="num" data-testid="cache-share">${share(l, c.cachedTokens, c.inputTokens)}</td>
      <td data-label="${t(l, 'usage.cacheWrites')}" class="num">${num(l, c.cacheWriteTokens - c.cacheWrite1hTokens)} / ${num(l, c.cacheWrite1hTokens)}</td>
      <td data-label="${t(l, 'usage.cacheSaved')}" class="num" data-testid="cache-saved">${toman(c.saved, l)}</td>
    </tr>`,
  );
  return page({
    title: t(l, 'usage.title'),
    path: '/console/usage',
    viewer: input.viewer,
    lede: t(l, 'usage.lede'),
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<div class="grid">
        <div class="stat">
          <div class="stat-label">${t(l, 'usage.balance')}</div>
          <div class="stat-value" data-testid="balance">${num(l, wallet.balance)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'usage.held')}</div>
          <div class="stat-value">${num(l, wallet.held)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'usage.spent', { period })}</div>
          <div class="stat-value" data-testid="spent">${num(l, spent)} <small>${unit}</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">${t(l, 'usage.requests', { period })}</div>
          <div class="stat-value" data-testid="requests">${num(l, requests)}</div>
        </div>
      </div>
      <section class="panel" aria-labelledby="chart-heading">
        <h2 id="chart-heading">${t(l, 'usage.chart')}</h2>
        ${spendChart(usage.daily, { today: usage.toDay, days: periodDays, locale: l })}
      </section>
      <section class="panel" aria-labelledby="per-key-heading">
        <h2 id="per-key-heading">${t(l, 'usage.byKey')}</h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'usage.byKeyRegion')}">
          <table class="cards" data-testid="key-totals">
            <thead>
              <tr>
                <th scope="col">${t(l, 'usage.key')}</th>
                <th scope="col" class="num">${t(l, 'usage.requestsCol')}</th>
                <th scope="col" class="num">${t(l, 'usage.cost')}</th>
              </tr>
            </thead>
            <tbody>
              ${
                keyRows.length === 0
                  ? html`<tr>
                      <td colspan="3" class="empty">${t(l, 'usage.noMatch')}</td>
                    </tr>`
                  : keyRows
              }
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="cache-heading">
        <h2 id="cache-heading">${t(l, 'usage.cache')} <small>${t(l, 'usage.cacheHint')}</small></h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'usage.cacheRegion')}">
          <table class="cards" data-testid="cache-totals">
            <thead>
              <tr>
                <th scope="col">${t(l, 'usage.key')}</th>
                <th scope="col">${t(l, 'usage.model')}</th>
                <th scope="col" class="num">${t(l, 'usage.inputTokens')}</th>
                <th scope="col" class="num">${t(l, 'usage.cacheRead')}</th>
                <th scope="col" class="num">${t(l, 'usage.cacheWrites')}</th>
                <th scope="col" class="num">${t(l, 'usage.cacheSaved')}</th>
              </tr>
            </thead>
            <tbody>
              ${
                cacheRows.length === 0
                  ? html`<tr>
                      <td colspan="6" class="empty">${t(l, 'usage.noMatch')}</td>
                    </tr>`
                  : cacheRows
              }
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="requests-heading">
        <h2 id="requests-heading">${t(l, 'usage.list')} <small>${t(l, 'usage.listHint')}</small></h2>
        ${filterForm(l, filter, input.keys, usage.models, usage.tools)}
        <p>
          <a class="btn btn-quiet btn-small" href="/console/usage.csv?${filterQuery(filter)}" data-testid="csv"
            >${t(l, 'usage.csv')} <span class="hint">${t(l, 'usage.csvHint')}</span></a
          >
        </p>
        <div class="table-wrap" tabindex="0" role="region" aria-label="${t(l, 'usage.listRegion')}">
          <table class="cards" data-testid="usage-table">
            <thead>
              <tr>
                <th scope="col">${t(l, 'usage.time')}</th>
                <th scope="col">${t(l, 'usage.key')}</th>
                <th scope="col">${t(l, 'usage.what')}</th>
                <th scope="col" class="num">${t(l, 'usage.tokens')}</th>
                <th scope="col" class="num">${t(l, 'usage.cost')}</th>
                <th scope="col">${t(l, 'usage.status')}</th>
                <th scope="col" class="hide-narrow">${t(l, 'usage.requestId')}</th>
              </tr>
            </thead>
            <tbody>
              ${
                usage.records.length === 0
                  ? html`<tr>
                      <td colspan="7" class="empty">${t(l, 'usage.noMatch')}</td>
                    </tr>`
                  : usage.records.map((r) => recordRow(l, r))
              }
            </tbody>
          </table>
        </div>
        <nav class="pager" aria-label="${t(l, 'usage.pages')}">
          ${input.cursor === '' ? html`` : html`<a class="btn btn-quiet btn-small" href="/console/usage?${filterQuery(filter)}">${t(l, 'usage.newest')}</a>`}
          ${
            usage.nextPageToken === ''
              ? html``
              : html`<a
                  class="btn btn-quiet btn-small"
                  rel="next"
                  href="/console/usage?${filterQuery(filter, { cursor: usage.nextPageToken })}"
                  >${t(l, 'usage.older')}</a
                >`
          }
        </nav>
      </section>`,
  });
}
