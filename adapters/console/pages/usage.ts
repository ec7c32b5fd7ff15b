import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { ApiKey } from '../../../gen/svc/core/v1/keys';
import { SvcError, isSvcError } from '../../../core/edge';
import type { CallMeta } from '../../http/core-client';
import { asSession, callCore, langOf, refusal, send, signedOf, tr, type Core } from '../context';
import { asciiDigits } from '../numbers';
import type { Wallet } from '../../../gen/svc/core/v1/wallet';
import { spendChart } from '../chart';
import { calendarDay, num, toman, when } from '../format';
import { html, type Html } from '../html';
import { isMessageKey, t, type Locale } from '../i18n';
import { page, type Notice, type Viewer } from '../layout';
import { messagePage } from './sign-in';

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
  /** Of `inputTokens`: cache reads, and cache writes (the one-hour ones among them). */
  readonly cachedTokens: bigint;
  readonly cacheWriteTokens: bigint;
  readonly cacheWrite1hTokens: bigint;
  /** What the cache reads saved against the input price, in millionths of a credit. */
  readonly cacheSavedMicro: bigint;
  readonly outputTokens: bigint;
  /** A media call's images, characters, seconds of audio or searches (SPEC §14); 0 otherwise. */
  readonly mediaUnits?: bigint;
  readonly cost: bigint;
  readonly status: string;
  readonly errorCode: string;
  readonly createdAt: Date | undefined;
}

/** What a media call was billed by, in the viewer's words ("3 images", "1.5 audio minutes"); undefined for other kinds. */
export function mediaUnitsText(l: Locale, kind: string, units: bigint): string | undefined {
  switch (kind) {
    case 'image':
      return t(l, units === 1n ? 'usage.image' : 'usage.images', { n: num(l, units) });
    case 'speech':
      return t(l, units === 1n ? 'usage.character' : 'usage.characters', { n: num(l, units) });
    case 'transcription': {
      // Seconds as minutes to a tenth, rounded up (never shown as less than was billed).
      const tenths = (units * 10n + 59n) / 60n;
      const minutes = `${tenths / 10n}.${tenths % 10n}`;
      return t(l, 'usage.audioMinutes', { n: l === 'fa' ? Number(minutes).toLocaleString('fa-IR') : minutes });
    }
    case 'rerank':
      return t(l, units === 1n ? 'usage.search' : 'usage.searches', { n: num(l, units) });
    default:
      return undefined;
  }
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

export const CSV_HEADER =
  'time_utc,request_id,key_id,key_label,kind,model_or_tool,input_tokens,output_tokens,cost_toman,status,error_code,' +
  'cache_read_tokens,cache_write_5m_tokens,cache_write_1h_tokens,cache_saved_toman';

/** Millionths of a credit as an exact decimal (`972`, `0.486`): no float on the way. */
function microText(micro: bigint): string {
  const sign = micro < 0n ? '-' : '';
  const abs = micro < 0n ? -micro : micro;
  const fraction = (abs % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return `${sign}${abs / 1_000_000n}${fraction === '' ? '' : `.${fraction}`}`;
}

// A spreadsheet runs a cell that starts with = + - @ (or a tab or return) as a formula: such
// text (a key label) is prefixed with ' so the file stays data.
export function csvCell(value: string): string {
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
    // Prompt caching (SPEC §13), after the columns of before so that readers of them keep working.
    r.cachedTokens.toString(),
    (r.cacheWriteTokens - r.cacheWrite1hTokens).toString(),
    r.cacheWrite1hTokens.toString(),
    microText(r.cacheSavedMicro),
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

/** A record's tokens, or what a media call was billed by (its tokens beside it, where it had any). */
function recordAmount(l: Locale, r: UsageRow): Html {
  const tokens = `${num(l, r.inputTokens)} / ${num(l, r.outputTokens)}`;
  const media = mediaUnitsText(l, r.kind, r.mediaUnits ?? 0n);
  if (media === undefined || (r.mediaUnits ?? 0n) === 0n) return html`${tokens}`;
  return r.inputTokens === 0n && r.outputTokens === 0n
    ? html`${media}`
    : html`${media}<br /><span class="hint">${tokens}</span>`;
}

function recordRow(l: Locale, r: UsageRow): Html {
  return html`<tr>
    <td data-label="${t(l, 'usage.time')}">
      <time datetime="${r.createdAt?.toISOString() ?? ''}">${when(l, r.createdAt)}</time>
    </td>
    <td data-label="${t(l, 'usage.key')}">
      <span dir="auto">${r.keyName === '' ? r.keyId : r.keyName}</span><br /><span class="mono hint nowrap"
        >${r.keyDisplay}</span
      >
    </td>
    <td data-label="${t(l, 'usage.what')}" dir="auto">${r.resource}<br /><span class="hint">${r.kind}</span></td>
    <td data-label="${t(l, 'usage.tokens')}" class="num">${recordAmount(l, r)}</td>
    <td data-label="${t(l, 'usage.cost')}" class="num">${toman(r.cost, l)}</td>
    <td data-label="${t(l, 'usage.status')}">
      <span class="badge ${STATUS_BADGE[r.status] ?? 'badge-off'}">${statusLabel(l, r.status)}</span
      >${r.errorCode === '' ? html`` : html`<br /><span class="hint" dir="ltr">${r.errorCode}</span>`}
    </td>
    <td data-label="${t(l, 'usage.requestId')}" class="mono hide-narrow">${r.requestId}</td>
  </tr>`;
}

/** Prompt caching per key and model (SPEC §13): the cache-read share of input and what it saved. */
function cachePanel(l: Locale, totals: readonly CacheTotalRow[]): Html {
  const cacheRows = totals.map(
    (c) =>
      html`<tr>
        <td data-label="${t(l, 'usage.key')}">
          <span dir="auto">${c.keyName === '' ? c.keyId : c.keyName}</span>
          <span class="mono hint">${c.keyDisplay}</span>
        </td>
        <td data-label="${t(l, 'usage.model')}"><span dir="auto">${c.model}</span></td>
        <td data-label="${t(l, 'usage.inputTokens')}" class="num">${num(l, c.inputTokens)}</td>
        <td data-label="${t(l, 'usage.cacheRead')}" class="num" data-testid="cache-share">
          ${share(l, c.cachedTokens, c.inputTokens)}
        </td>
        <td data-label="${t(l, 'usage.cacheWrites')}" class="num">
          ${num(l, c.cacheWriteTokens - c.cacheWrite1hTokens)} / ${num(l, c.cacheWrite1hTokens)}
        </td>
        <td data-label="${t(l, 'usage.cacheSaved')}" class="num" data-testid="cache-saved">${toman(c.saved, l)}</td>
      </tr>`,
  );
  return html`<section class="panel" aria-labelledby="cache-heading">
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
  </section>`;
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
    (k) =>
      html`<tr>
        <td data-label="${t(l, 'usage.key')}">
          <span dir="auto">${k.keyName === '' ? k.keyId : k.keyName}</span>
          <span class="mono hint">${k.keyDisplay}</span>
        </td>
        <td data-label="${t(l, 'usage.requestsCol')}" class="num">${num(l, k.requests)}</td>
        <td data-label="${t(l, 'usage.cost')}" class="num">${toman(k.cost, l)}</td>
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
      ${cachePanel(l, usage.cacheTotals)}
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

// ---- the page and its CSV (routed in ../app.ts) ----

type UsageCore = Pick<Core, 'usage' | 'keys' | 'wallet'>;

const DAY_MS = 86_400_000;
/** The longest date range the usage page reads at once. */
const MAX_USAGE_RANGE_DAYS = 366;

function usageFilter(ctx: Context): UsageFilterForm {
  const q = (name: string, max: number): string => String(ctx.query[name] ?? '').slice(0, max);
  const days = Number(q('days', 3));
  const what = q('what', 110);
  const day = (name: string): string => {
    const text = asciiDigits(q(name, 10));
    return /^\d{4}-\d{2}-\d{2}$/.test(text) ? text : '';
  };
  const from = day('from');
  const to = day('to');
  const status = q('status', 12);
  return {
    key: q('key', 40),
    what: /^(model|tool):./.test(what) ? what : '',
    days: (USAGE_DAYS as readonly number[]).includes(days) ? days : 14,
    // A range needs both ends; one alone is ignored rather than guessed.
    from: from !== '' && to !== '' ? from : '',
    to: from !== '' && to !== '' ? to : '',
    status: USAGE_STATUSES.includes(status) ? status : '',
  };
}

/** The filter's period as UTC day bounds [since, until): the last `days` days, or the range. */
function usagePeriod(filter: UsageFilterForm): { sinceMs: number; untilMs: number } {
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  if (filter.from === '' || filter.to === '')
    return { sinceMs: today - (filter.days - 1) * DAY_MS, untilMs: today + DAY_MS };
  const dayStart = (day: string, param: string): number => {
    const at = Date.parse(`${day}T00:00:00Z`);
    if (!Number.isFinite(at) || new Date(at).toISOString().slice(0, 10) !== day)
      throw new SvcError('invalid_argument', `${param} must be a date, YYYY-MM-DD`, { param });
    return at;
  };
  const sinceMs = dayStart(filter.from, 'from_day');
  const untilMs = dayStart(filter.to, 'to_day') + DAY_MS;
  if (untilMs <= sinceMs)
    throw new SvcError('invalid_argument', 'to_day must not be before from_day', { param: 'to_day' });
  if (untilMs - sinceMs > MAX_USAGE_RANGE_DAYS * DAY_MS)
    throw new SvcError('invalid_argument', `The period may be at most ${MAX_USAGE_RANGE_DAYS} days`, {
      param: 'to_day',
    });
  return { sinceMs, untilMs };
}

/**
 * One page of the usage report from UsageService: the records (`limit` a page, with each key's
 * label from `keys`), and on the first read also the chart, the totals and the per-key totals
 * for the same filter, so they always agree.
 */
async function usageReport(
  core: UsageCore,
  m: CallMeta,
  filter: UsageFilterForm,
  keys: readonly ApiKey[],
  limit: number,
  pageToken: string,
  withSummary = true,
): Promise<UsageReport> {
  const { sinceMs, untilMs } = usagePeriod(filter);
  const scoped = {
    keyId: filter.key,
    model: filter.what.startsWith('model:') ? filter.what.slice(6) : '',
    tool: filter.what.startsWith('tool:') ? filter.what.slice(5) : '',
    status: filter.status,
    since: new Date(sinceMs),
    until: new Date(untilMs),
  };
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  const [page, chart, quarter] = await Promise.all([
    callCore(m, (o) => core.usage.listUsage({ filter: scoped, pageSize: limit, pageToken }, o)),
    withSummary ? callCore(m, (o) => core.usage.getUsageSummary({ filter: scoped }, o)) : undefined,
    withSummary
      ? callCore(m, (o) => core.usage.getUsageSummary({ filter: { since: new Date(today - 89 * DAY_MS) } }, o))
      : undefined,
  ]);
  const byId = new Map(keys.map((k) => [k.id, k]));
  const display = (keyId: string) => {
    const key = byId.get(keyId);
    return { keyName: key?.name ?? '', keyDisplay: key === undefined ? '' : `${key.prefix}…${key.lastFour}` };
  };
  const resource = (t: { model: string; tool: string }): string => (t.model === '' ? t.tool : t.model);
  // The chart shows one bar segment per model or tool and day, whatever the request kind.
  const daily = new Map<string, { day: string; resource: string; cost: bigint; requests: bigint }>();
  for (const t of chart?.totals ?? []) {
    const key = `${t.day} ${resource(t)}`;
    const row = daily.get(key) ?? { day: t.day, resource: resource(t), cost: 0n, requests: 0n };
    daily.set(key, { ...row, cost: row.cost + t.cost, requests: row.requests + t.requests });
  }
  const names = (values: readonly string[]): string[] => [...new Set(values)].filter((v) => v !== '').sort();
  return {
    records: page.records.map((r) => ({
      requestId: r.requestId,
      keyId: r.keyId,
      ...display(r.keyId),
      kind: r.kind,
      resource: resource(r),
      inputTokens: r.inputTokens,
      cachedTokens: r.cachedTokens,
      cacheWriteTokens: r.cacheWriteTokens,
      cacheWrite1hTokens: r.cacheWrite1hTokens,
      cacheSavedMicro: r.cacheSavedMicro,
      outputTokens: r.outputTokens,
      mediaUnits: r.mediaUnits,
      cost: r.cost,
      status: r.status,
      errorCode: r.errorCode,
      createdAt: r.createdAt,
    })),
    nextPageToken: page.nextPageToken,
    daily: [...daily.values()],
    totalCost: chart?.totalCost ?? 0n,
    totalRequests: chart?.totalRequests ?? 0n,
    keyTotals: (chart?.keyTotals ?? []).map((k) => ({ ...k, ...display(k.keyId) })),
    cacheTotals: (chart?.cacheTotals ?? []).map((c) => ({ ...c, ...display(c.keyId) })),
    models: names((quarter?.totals ?? []).map((t) => t.model)),
    tools: names((quarter?.totals ?? []).map((t) => t.tool)),
    fromDay: new Date(sinceMs).toISOString().slice(0, 10),
    toDay: new Date(untilMs - DAY_MS).toISOString().slice(0, 10),
  };
}

/**
 * The filter with a key id that is not one of the account's own replaced by one that matches
 * nothing, so that no page or link repeats another account's key id.
 */
async function ownFilter(
  ctx: Context,
  core: UsageCore,
  m: CallMeta,
): Promise<{ filter: UsageFilterForm; keys: ApiKey[]; notice?: Notice }> {
  const filter = usageFilter(ctx);
  const { keys: list } = await callCore(m, (o) => core.keys.listKeys({ accountId: '' }, o));
  if (filter.key === '' || list.some((k) => k.id === filter.key)) return { filter, keys: list };
  return {
    filter: { ...filter, key: 'none' },
    keys: list,
    notice: { kind: 'warn', text: tr(ctx, 'usage.noSuchKey') },
  };
}

/** GET /console/usage: the filter, the cards, the chart, the per-key totals and a page of the table. */
export async function showUsage(ctx: Context, core: UsageCore): Promise<void> {
  const s = signedOf(ctx);
  const m = asSession(ctx);
  const { filter, keys: ownKeys, notice: keyNotice } = await ownFilter(ctx, core, m);
  const cursor = String(ctx.query['cursor'] ?? '').slice(0, 200);
  let result;
  try {
    result = await usageReport(core, m, filter, ownKeys, 100, cursor);
  } catch (error) {
    // A cursor or range the core refuses: say so on the page, with the filters as they were.
    if (!isSvcError(error) || error.code !== 'invalid_argument') throw error;
    return send(ctx, 400, messagePage(langOf(ctx), tr(ctx, 'message.usageRefused'), ...refusal(ctx, error)));
  }
  const wallet = await callCore(m, (o) => core.wallet.getWallet({ accountId: '' }, o));
  if (wallet.wallet === undefined) throw new SvcError('internal', 'core returned no wallet');
  send(
    ctx,
    200,
    usagePage({
      viewer: s.viewer,
      wallet: wallet.wallet,
      usage: result,
      keys: ownKeys,
      filter,
      cursor,
      ...(keyNotice === undefined ? {} : { notice: keyNotice }),
    }),
  );
}

/**
 * Every record the filters match, as CSV, read page by page from the core and written as it
 * comes: any number of rows in bounded memory, and exactly the rows the page counts.
 */
export async function usageCsv(ctx: Context, deps: { core: UsageCore; logger: Logger }): Promise<void> {
  const { core, logger } = deps;
  const m = asSession(ctx);
  const { filter, keys: ownKeys } = await ownFilter(ctx, core, m);
  // The first page is read before the answer starts, so a refused filter is still a clear error.
  const first = await usageReport(core, m, filter, ownKeys, 500, '', false);
  const out = new PassThrough();
  ctx.status = 200;
  ctx.type = 'text/csv; charset=utf-8';
  ctx.set('content-disposition', `attachment; filename="svc-usage-${first.fromDay}-to-${first.toDay}.csv"`);
  ctx.body = out;
  void (async () => {
    try {
      out.write(`${CSV_HEADER}\r\n`);
      let page = first;
      for (;;) {
        for (const r of page.records) out.write(`${csvRow(r)}\r\n`);
        if (page.nextPageToken === '') break;
        const token = page.nextPageToken;
        page = await usageReport(core, m, filter, ownKeys, 500, token, false);
      }
      out.end();
    } catch (error) {
      logger.error({ err: error, requestId: ctx.state['requestId'] }, 'console usage export failed');
      // Cut short: the client sees a broken download, never a file that looks complete.
      out.destroy(error instanceof Error ? error : new Error('export failed'));
    }
  })();
}
