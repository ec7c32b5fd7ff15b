import { sql } from 'kysely';
import type { Dialect } from '../store/db';
import type { ConsoleDb } from './tables';

export interface UsageFilter {
  readonly keyId: string;
  readonly resource: string;
  readonly status: string;
  readonly limit: number;
  readonly days: number;
}

export interface UsageRow {
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

export interface DailySpendRow {
  readonly day: string;
  readonly resource: string;
  readonly cost: bigint;
  readonly requests: bigint;
}

const DAY_MS = 86_400_000;

const int = (value: unknown): bigint => BigInt(String(value ?? 0));

/** One account's usage records (newest first, filtered) and its daily spend per model or tool. */
export function createUsageQueries(deps: { db: ConsoleDb; dialect: Dialect; now: () => number }) {
  const { db } = deps;
  // Whole-day buckets by integer division, which the two dialects spell differently.
  const dayBucket =
    deps.dialect === 'mysql' ? sql<bigint>`u.created_at DIV ${DAY_MS}` : sql<bigint>`u.created_at / ${DAY_MS}`;

  return {
    async records(accountId: string, filter: UsageFilter): Promise<UsageRow[]> {
      let query = db
        .selectFrom('usage_records as u')
        .leftJoin('api_keys as k', (join) =>
          join.onRef('k.id', '=', 'u.key_id').onRef('k.account_id', '=', 'u.account_id'),
        )
        .select([
          'u.request_id',
          'u.key_id',
          'u.kind',
          'u.resource',
          'u.input_tokens',
          'u.output_tokens',
          'u.cost',
          'u.status',
          'u.error_code',
          'u.created_at',
          'k.name as key_name',
          'k.prefix',
          'k.last_four',
        ])
        .where('u.account_id', '=', accountId);
      if (filter.keyId !== '') query = query.where('u.key_id', '=', filter.keyId);
      if (filter.resource !== '') query = query.where('u.resource', '=', filter.resource);
      if (filter.status !== '') query = query.where('u.status', '=', filter.status);
      const rows = await query
        .orderBy('u.created_at', 'desc')
        .orderBy('u.request_id', 'desc')
        .limit(filter.limit)
        .execute();
      return rows.map((r) => ({
        requestId: r.request_id,
        keyId: r.key_id,
        keyName: r.key_name ?? '',
        keyDisplay: r.prefix === null || r.last_four === null ? '' : `${r.prefix}…${r.last_four}`,
        kind: r.kind,
        resource: r.resource,
        inputTokens: int(r.input_tokens),
        outputTokens: int(r.output_tokens),
        cost: int(r.cost),
        status: r.status,
        errorCode: r.error_code ?? '',
        createdAt: new Date(Number(r.created_at)),
      }));
    },

    async daily(accountId: string, days: number): Promise<DailySpendRow[]> {
      const today = Math.floor(deps.now() / DAY_MS);
      const since = BigInt((today - days + 1) * DAY_MS);
      const rows = await db
        .selectFrom('usage_records as u')
        .select([
          dayBucket.as('day'),
          'u.resource',
          sql<bigint>`sum(u.cost)`.as('cost'),
          sql<bigint>`count(*)`.as('requests'),
        ])
        .where('u.account_id', '=', accountId)
        .where('u.created_at', '>=', since)
        .groupBy([dayBucket, 'u.resource'])
        .orderBy('day')
        .orderBy('u.resource')
        .execute();
      return rows.map((r) => ({
        day: new Date(Number(r.day) * DAY_MS).toISOString().slice(0, 10),
        resource: r.resource,
        cost: int(r.cost),
        requests: int(r.requests),
      }));
    },

    async resources(accountId: string): Promise<string[]> {
      const rows = await db
        .selectFrom('usage_records')
        .select('resource')
        .distinct()
        .where('account_id', '=', accountId)
        .orderBy('resource')
        .execute();
      return rows.map((r) => r.resource);
    },
  };
}

export type UsageQueries = ReturnType<typeof createUsageQueries>;
