import { invalidArgument } from '../errors';
import type { ApiKeyView } from '../keys/service';
import type { UsageQuery, UsageTotalView } from '../usage/query';

export interface ConsoleUsageFilter {
  readonly keyId: string;
  readonly model: string;
  readonly tool: string;
  /** 0 means 100. */
  readonly limit: number;
  /** 0 means 14: the period ends today (UTC). Ignored when `fromDay` and `toDay` are given. */
  readonly days: number;
  /** An inclusive range of UTC days, YYYY-MM-DD; both or neither. */
  readonly fromDay?: string;
  readonly toDay?: string;
  /** ok, empty, error, refused, cancelled; '' for any. */
  readonly status?: string;
  /** The previous page's `nextPageToken`; '' for the newest records. */
  readonly pageToken?: string;
}

const STATUSES = new Set(['', 'ok', 'empty', 'error', 'refused', 'cancelled']);
const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;
const MAX_RANGE_DAYS = 366;

function dayStart(day: string, param: string): number {
  const at = Date.parse(`${day}T00:00:00Z`);
  if (!DAY_RE.test(day) || !Number.isFinite(at) || new Date(at).toISOString().slice(0, 10) !== day)
    throw invalidArgument(param, `${param} must be a date, YYYY-MM-DD`);
  return at;
}

export interface ConsoleUsageRow {
  readonly requestId: string;
  readonly keyId: string;
  readonly keyName: string;
  readonly keyDisplay: string;
  readonly kind: string;
  readonly resource: string;
  readonly inputTokens: bigint;
  readonly outputTokens: bigint;
  readonly cost: bigint;
  readonly status: string;
  readonly errorCode: string;
  readonly createdAt: Date;
}

export interface ConsoleUsage {
  readonly records: ConsoleUsageRow[];
  readonly nextPageToken: string;
  readonly daily: { day: string; resource: string; cost: bigint; requests: bigint }[];
  /** Every record the filter matches in the period, whatever page is shown. */
  readonly totalCost: bigint;
  readonly totalRequests: bigint;
  readonly keyTotals: { keyId: string; keyName: string; keyDisplay: string; requests: bigint; cost: bigint }[];
  /** The period, as inclusive UTC days. */
  readonly fromDay: string;
  readonly toDay: string;
  readonly models: string[];
  readonly tools: string[];
}

const DAY_MS = 86_400_000;

function sorted(values: Iterable<string>): string[] {
  return [...new Set(values)].filter((v) => v !== '').sort();
}

/**
 * One account's usage for the console, read through the shared usage history: the newest
 * records (with each key's label), daily spend per model or tool, and what can be filtered on.
 */
export async function usageFor(
  deps: { usage: UsageQuery; now: number },
  accountId: string,
  keys: readonly ApiKeyView[],
  filter: ConsoleUsageFilter,
): Promise<ConsoleUsage> {
  const limit = filter.limit === 0 ? 100 : filter.limit;
  const days = filter.days === 0 ? 14 : filter.days;
  if (limit < 1 || limit > 500) throw invalidArgument('limit', 'limit must be 1-500');
  if (days < 1 || days > 90) throw invalidArgument('days', 'days must be 1-90');
  const status = filter.status ?? '';
  if (!STATUSES.has(status))
    throw invalidArgument('status', 'status must be one of ok, empty, error, refused, cancelled');
  const today = Math.floor(deps.now / DAY_MS) * DAY_MS;
  const from = filter.fromDay ?? '';
  const to = filter.toDay ?? '';
  let sinceMs = today - (days - 1) * DAY_MS;
  let untilMs = today + DAY_MS;
  if (from !== '' || to !== '') {
    sinceMs = dayStart(from, 'from_day');
    untilMs = dayStart(to, 'to_day') + DAY_MS;
    if (untilMs <= sinceMs) throw invalidArgument('to_day', 'to_day must not be before from_day');
    if (untilMs - sinceMs > MAX_RANGE_DAYS * DAY_MS)
      throw invalidArgument('to_day', `The period may be at most ${MAX_RANGE_DAYS} days`);
  }
  // One filter for the table, the chart, the totals and the per-key totals, so they always agree.
  const scoped = { accountId, keyId: filter.keyId, model: filter.model, tool: filter.tool, status, sinceMs, untilMs };
  const [page, chart, perKey, quarter] = await Promise.all([
    deps.usage.list(scoped, { pageSize: limit, pageToken: filter.pageToken ?? '' }),
    deps.usage.summary(scoped),
    deps.usage.byKey(scoped),
    deps.usage.summary({ accountId, sinceMs: today - 89 * DAY_MS }),
  ]);
  const byId = new Map(keys.map((k) => [k.id, k]));
  const resource = (t: Pick<UsageTotalView, 'model' | 'tool'>): string => (t.model === '' ? t.tool : t.model);
  // The chart shows one bar segment per model or tool and day, whatever the request kind.
  const daily = new Map<string, { day: string; resource: string; cost: bigint; requests: bigint }>();
  for (const t of chart.totals) {
    const key = `${t.day} ${resource(t)}`;
    const row = daily.get(key) ?? { day: t.day, resource: resource(t), cost: 0n, requests: 0n };
    daily.set(key, { ...row, cost: row.cost + t.cost, requests: row.requests + t.requests });
  }
  const display = (keyId: string) => {
    const key = byId.get(keyId);
    return { keyName: key?.name ?? '', keyDisplay: key === undefined ? '' : `${key.prefix}…${key.lastFour}` };
  };
  return {
    nextPageToken: page.nextPageToken,
    totalCost: chart.totalCost,
    totalRequests: chart.totalRequests,
    keyTotals: perKey.map((t) => ({ ...t, ...display(t.keyId) })),
    fromDay: new Date(sinceMs).toISOString().slice(0, 10),
    toDay: new Date(untilMs - DAY_MS).toISOString().slice(0, 10),
    records: page.records.map((r) => {
      const key = byId.get(r.keyId);
      return {
        requestId: r.requestId,
        keyId: r.keyId,
        keyName: key?.name ?? '',
        keyDisplay: key === undefined ? '' : `${key.prefix}…${key.lastFour}`,
        kind: r.kind,
        resource: r.model === '' ? r.tool : r.model,
        inputTokens: r.inputTokens,
        outputTokens: r.outputTokens,
        cost: r.cost,
        status: r.status,
        errorCode: r.errorCode,
        createdAt: r.createdAt,
      };
    }),
    daily: [...daily.values()],
    models: sorted(quarter.totals.map((t) => t.model)),
    tools: sorted(quarter.totals.map((t) => t.tool)),
  };
}
