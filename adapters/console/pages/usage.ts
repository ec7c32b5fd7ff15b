import type { ApiKey } from '../../../gen/svc/core/v1/keys';
import type { ConsoleUsageRecord, ListConsoleUsageResponse } from '../../../gen/svc/core/v1/console';
import type { Wallet } from '../../../gen/svc/core/v1/wallet';
import { spendChart } from '../chart';
import { groupDigits, toman, utc } from '../format';
import { html, type Html } from '../html';
import { page, type Notice, type Viewer } from '../layout';

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
export function csvRow(r: ConsoleUsageRecord): string {
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

function filterForm(
  f: UsageFilterForm,
  keys: readonly ApiKey[],
  models: readonly string[],
  tools: readonly string[],
): Html {
  // A GET form: it changes nothing, so it carries no CSRF token (tokens in URLs leak to logs).
  return html`<form class="inline" method="get" action="/console/usage" aria-label="Filter usage">
    <div class="field">
      <label for="f-key">Key</label>
      <select id="f-key" name="key">
        ${option('', 'All keys', f.key)}${keys.map((k) => option(k.id, `${k.name === '' ? '(no label)' : k.name} · ${k.prefix}…${k.lastFour}`, f.key))}
      </select>
    </div>
    <div class="field">
      <label for="f-what">Model or tool</label>
      <select id="f-what" name="what">
        ${option('', 'All models and tools', f.what)}
        ${models.length === 0 ? html`` : html`<optgroup label="Models">${models.map((m) => option(`model:${m}`, m, f.what))}</optgroup>`}
        ${tools.length === 0 ? html`` : html`<optgroup label="Tools">${tools.map((t) => option(`tool:${t}`, t, f.what))}</optgroup>`}
      </select>
    </div>
    <div class="field">
      <label for="f-status">Status</label>
      <select id="f-status" name="status">
        ${option('', 'Any status', f.status)}${USAGE_STATUSES.map((st) => option(st, st, f.status))}
      </select>
    </div>
    <div class="field">
      <label for="f-days">Period</label>
      <select id="f-days" name="days">
        ${USAGE_DAYS.map((d) => option(String(d), `Last ${d} days`, String(f.days)))}
      </select>
    </div>
    <div class="field">
      <label for="f-from">From <span class="hint">UTC day; with To, replaces the period</span></label>
      <input id="f-from" name="from" type="date" value="${f.from}" />
    </div>
    <div class="field">
      <label for="f-to">To</label>
      <input id="f-to" name="to" type="date" value="${f.to}" />
    </div>
    <button class="btn btn-quiet" type="submit">Apply</button>
  </form>`;
}

function recordRow(r: ConsoleUsageRecord): Html {
  return html`<tr>
    <td data-label="Time"><time datetime="${r.createdAt?.toISOString() ?? ''}">${utc(r.createdAt)}</time></td>
    <td data-label="Key">
      <span dir="auto">${r.keyName === '' ? r.keyId : r.keyName}</span><br /><span class="mono hint nowrap"
        >${r.keyDisplay}</span
      >
    </td>
    <td data-label="Model or tool" dir="auto">${r.resource}<br /><span class="hint">${r.kind}</span></td>
    <td data-label="Tokens in / out" class="num">${groupDigits(r.inputTokens)} / ${groupDigits(r.outputTokens)}</td>
    <td data-label="Cost" class="num">${toman(r.cost)}</td>
    <td data-label="Status">
      <span class="badge ${STATUS_BADGE[r.status] ?? 'badge-off'}">${r.status}</span
      >${r.errorCode === '' ? html`` : html`<br /><span class="hint">${r.errorCode}</span>`}
    </td>
    <td data-label="Request id" class="mono hide-narrow">${r.requestId}</td>
  </tr>`;
}

/** Balance at a glance, the daily spend chart, and every request, filterable. */
export function usagePage(input: {
  viewer: Viewer;
  wallet: Wallet;
  usage: ListConsoleUsageResponse;
  keys: readonly ApiKey[];
  filter: UsageFilterForm;
  /** The cursor of the page shown; '' for the newest. */
  cursor: string;
  notice?: Notice;
}): Html {
  const { wallet, usage, filter } = input;
  const spent = usage.totalCost;
  const requests = usage.totalRequests;
  const period = `${usage.fromDay} – ${usage.toDay}`;
  const periodDays = Math.round((Date.parse(usage.toDay) - Date.parse(usage.fromDay)) / 86_400_000) + 1;
  const keyRows = usage.keyTotals.map(
    (t) => html`<tr>
      <td><span dir="auto">${t.keyName === '' ? t.keyId : t.keyName}</span> <span class="mono hint">${t.keyDisplay}</span></td>
      <td class="num">${groupDigits(t.requests)}</td>
      <td class="num">${toman(t.cost)}</td>
    </tr>`,
  );
  return page({
    title: 'Usage',
    path: '/console/usage',
    viewer: input.viewer,
    lede: 'What every request cost, and where the credits went.',
    ...(input.notice === undefined ? {} : { notice: input.notice }),
    body: html`<div class="grid">
        <div class="stat">
          <div class="stat-label">Balance</div>
          <div class="stat-value" data-testid="balance">${groupDigits(wallet.balance)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Held for running requests</div>
          <div class="stat-value">${groupDigits(wallet.held)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Spent, ${period}</div>
          <div class="stat-value" data-testid="spent">${groupDigits(spent)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Requests, ${period}</div>
          <div class="stat-value" data-testid="requests">${groupDigits(requests)}</div>
        </div>
      </div>
      <section class="panel" aria-labelledby="chart-heading">
        <h2 id="chart-heading">Daily spend by model and tool</h2>
        ${spendChart(usage.daily, { today: usage.toDay, days: periodDays })}
      </section>
      <section class="panel" aria-labelledby="per-key-heading">
        <h2 id="per-key-heading">By key</h2>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Spend by key, scrollable">
          <table data-testid="key-totals">
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col" class="num">Requests</th>
                <th scope="col" class="num">Cost</th>
              </tr>
            </thead>
            <tbody>
              ${
                keyRows.length === 0
                  ? html`<tr>
                      <td colspan="3" class="empty">No requests match.</td>
                    </tr>`
                  : keyRows
              }
            </tbody>
          </table>
        </div>
      </section>
      <section class="panel" aria-labelledby="requests-heading">
        <h2 id="requests-heading">Requests <small>newest first, 100 a page</small></h2>
        ${filterForm(filter, input.keys, usage.models, usage.tools)}
        <p>
          <a class="btn btn-quiet btn-small" href="/console/usage.csv?${filterQuery(filter)}" data-testid="csv"
            >Download CSV <span class="hint">(every matching request)</span></a
          >
        </p>
        <div class="table-wrap" tabindex="0" role="region" aria-label="Requests, scrollable">
          <table class="cards" data-testid="usage-table">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Key</th>
                <th scope="col">Model or tool</th>
                <th scope="col" class="num">Tokens in / out</th>
                <th scope="col" class="num">Cost</th>
                <th scope="col">Status</th>
                <th scope="col" class="hide-narrow">Request id</th>
              </tr>
            </thead>
            <tbody>
              ${
                usage.records.length === 0
                  ? html`<tr>
                      <td colspan="7" class="empty">No requests match.</td>
                    </tr>`
                  : usage.records.map(recordRow)
              }
            </tbody>
          </table>
        </div>
        <nav class="pager" aria-label="Pages of requests">
          ${input.cursor === '' ? html`` : html`<a class="btn btn-quiet btn-small" href="/console/usage?${filterQuery(filter)}">Newest</a>`}
          ${
            usage.nextPageToken === ''
              ? html``
              : html`<a
                  class="btn btn-quiet btn-small"
                  rel="next"
                  href="/console/usage?${filterQuery(filter, { cursor: usage.nextPageToken })}"
                  >Older requests</a
                >`
          }
        </nav>
      </section>`,
  });
}
