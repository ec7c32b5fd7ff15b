import { invalidArgument } from '../errors';
import type { ApiKeyView } from '../keys/service';
import type { UsageQuery, UsageTotalView } from '../usage/query';

export interface ConsoleUsageFilter {
  readonly keyId: string;
  readonly model: string;
  readonly tool: string;
  /** 0 means 100. */
  readonly limit: number;
  /** 0 means 14. */
  readonly days: number;
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
  readonly daily: { day: string; resource: string; cost: bigint; requests: bigint }[];
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
  const today = Math.floor(deps.now / DAY_MS) * DAY_MS;
  const scoped = { accountId, keyId: filter.keyId, model: filter.model, tool: filter.tool };
  const [page, chart, quarter] = await Promise.all([
    deps.usage.list(scoped, { pageSize: limit, pageToken: '' }),
    deps.usage.summary({ accountId, sinceMs: today - (days - 1) * DAY_MS }),
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
  return {
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
