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
}

export const USAGE_DAYS = [7, 14, 30, 90] as const;

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
      <label for="f-days">Chart period</label>
      <select id="f-days" name="days">
        ${USAGE_DAYS.map((d) => option(String(d), `${d} days`, String(f.days)))}
      </select>
    </div>
    <button class="btn btn-quiet" type="submit">Apply</button>
  </form>`;
}

function recordRow(r: ConsoleUsageRecord): Html {
  return html`<tr>
    <td><time datetime="${r.createdAt?.toISOString() ?? ''}">${utc(r.createdAt)}</time></td>
    <td>
      <span dir="auto">${r.keyName === '' ? r.keyId : r.keyName}</span><br /><span class="mono hint nowrap"
        >${r.keyDisplay}</span
      >
    </td>
    <td dir="auto">${r.resource}<br /><span class="hint">${r.kind}</span></td>
    <td class="num">${groupDigits(r.inputTokens)} / ${groupDigits(r.outputTokens)}</td>
    <td class="num">${toman(r.cost)}</td>
    <td>
      <span class="badge ${STATUS_BADGE[r.status] ?? 'badge-off'}">${r.status}</span
      >${r.errorCode === '' ? html`` : html`<br /><span class="hint">${r.errorCode}</span>`}
    </td>
    <td class="mono hide-narrow">${r.requestId}</td>
  </tr>`;
}

/** Balance at a glance, the daily spend chart, and every request, filterable. */
export function usagePage(input: {
  viewer: Viewer;
  wallet: Wallet;
  usage: ListConsoleUsageResponse;
  keys: readonly ApiKey[];
  filter: UsageFilterForm;
  today: string;
  notice?: Notice;
}): Html {
  const { wallet, usage, filter } = input;
  const spent = usage.daily.reduce((sum, d) => sum + d.cost, 0n);
  const requests = usage.daily.reduce((sum, d) => sum + d.requests, 0n);
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
          <div class="stat-label">Spent, last ${filter.days} days</div>
          <div class="stat-value" data-testid="spent">${groupDigits(spent)} <small>toman</small></div>
        </div>
        <div class="stat">
          <div class="stat-label">Requests, last ${filter.days} days</div>
          <div class="stat-value">${groupDigits(requests)}</div>
        </div>
      </div>
      <section class="panel" aria-labelledby="chart-heading">
        <h2 id="chart-heading">Daily spend by model and tool</h2>
        ${spendChart(usage.daily, { today: input.today, days: filter.days })}
      </section>
      <section class="panel" aria-labelledby="requests-heading">
        <h2 id="requests-heading">Requests <small>newest first, up to 100</small></h2>
        ${filterForm(filter, input.keys, usage.models, usage.tools)}
        <br />
        <div class="table-wrap">
          <table data-testid="usage-table">
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
      </section>`,
  });
}
