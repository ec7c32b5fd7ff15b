import { sql, type Kysely, type Transaction } from 'kysely';
import { invalidArgument, SvcError } from '../errors';
import type { Database } from '../store/schema';
import { capPeriods } from '../wallet/caps';
import { MAX_AMOUNT } from '../wallet/service';

/** A lineage's caps and what it spent in the current UTC day and month. */
export interface LineageSpend {
  /** Null: no daily cap. */
  readonly capDaily: bigint | null;
  /** Null: no monthly cap. */
  readonly capMonthly: bigint | null;
  /** Null: no total cap. */
  readonly capTotal: bigint | null;
  readonly spentToday: bigint;
  readonly spentThisMonth: bigint;
  /** What the lineage ever spent. */
  readonly spentTotal: bigint;
}

/** A change of caps: a number sets the cap, null removes it, absent leaves it as it is. */
export interface CapChange {
  readonly daily?: bigint | null;
  readonly monthly?: bigint | null;
  readonly total?: bigint | null;
}

/** A lineage with no caps and nothing spent (also a key view's default). */
export const UNCAPPED: LineageSpend = {
  capDaily: null,
  capMonthly: null,
  capTotal: null,
  spentToday: 0n,
  spentThisMonth: 0n,
  spentTotal: 0n,
};

/** A cap in credits: a whole number from 0 to 10^15 (0: the key may spend nothing). */
export function checkCap(value: bigint | null | undefined, param: string): void {
  if (value === null || value === undefined) return;
  if (value < 0n) throw invalidArgument(param, `${param} must be a whole number of credits, 0 or more`);
  if (value > MAX_AMOUNT) throw invalidArgument(param, `${param} must be at most ${MAX_AMOUNT.toString()}`);
}

/** A cap as typed by a person: plain decimal digits, or `none` (no cap); `-5`, `1.5`, `1e3` are refused. */
export function parseCap(text: string, param: string): bigint | null {
  const trimmed = text.trim();
  if (trimmed === 'none') return null;
  if (!/^\d+$/.test(trimmed)) {
    throw invalidArgument(
      param,
      `${param} must be a whole number of credits (0 or more) or none (got ${JSON.stringify(text)})`,
    );
  }
  const value = BigInt(trimmed);
  checkCap(value, param);
  return value;
}

const big = (value: bigint | number | string | null | undefined): bigint => BigInt(value ?? 0);

/**
 * What the lineages spent in the UTC day and month of `at`, and ever, according to the usage
 * records (the source for lineages without caps, whose spend no counter follows).
 */
async function usageSpend(
  db: Kysely<Database>,
  accountId: string,
  lineageIds: readonly string[],
  at: number,
): Promise<Map<string, { today: bigint; month: bigint; total: bigint }>> {
  const out = new Map<string, { today: bigint; month: bigint; total: bigint }>();
  if (lineageIds.length === 0) return out;
  const [day, month] = capPeriods(at);
  const dayStart = BigInt(day.resetsAt - 86_400_000);
  const monthStart = BigInt(Date.parse(`${month.key.slice(2)}-01T00:00:00Z`));
  const rows = await db
    .selectFrom('usage_records as u')
    .innerJoin('api_keys as k', 'k.id', 'u.key_id')
    .select([
      'k.lineage_id',
      sql<bigint | string | null>`sum(case when u.created_at >= ${dayStart} then u.cost else 0 end)`.as('today'),
      sql<bigint | string | null>`sum(case when u.created_at >= ${monthStart} then u.cost else 0 end)`.as('month'),
      sql<bigint | string | null>`sum(u.cost)`.as('total'),
    ])
    .where('u.account_id', '=', accountId)
    .where('k.lineage_id', 'in', [...lineageIds])
    .groupBy('k.lineage_id')
    .execute();
  for (const r of rows)
    if (r.lineage_id !== null) out.set(r.lineage_id, { today: big(r.today), month: big(r.month), total: big(r.total) });
  return out;
}

/** Caps and current spend of the lineages of one account (capped: the counters; uncapped: the usage records). */
export async function lineageSpend(
  db: Kysely<Database>,
  accountId: string,
  lineageIds: readonly string[],
  at: number,
): Promise<Map<string, LineageSpend>> {
  const out = new Map<string, LineageSpend>();
  const ids = [...new Set(lineageIds)];
  if (ids.length === 0) return out;
  const capped = await db
    .selectFrom('key_lineages')
    .select(['lineage_id', 'cap_daily', 'cap_monthly', 'cap_total'])
    .where('lineage_id', 'in', ids)
    .execute();
  const [day, month, total] = capPeriods(at);
  const counters = new Map<string, bigint>();
  if (capped.length > 0) {
    const rows = await db
      .selectFrom('key_spend')
      .select(['lineage_id', 'period', 'spent'])
      .where(
        'lineage_id',
        'in',
        capped.map((c) => c.lineage_id),
      )
      .where('period', 'in', [day.key, month.key, total.key])
      .execute();
    for (const r of rows) counters.set(`${r.lineage_id} ${r.period}`, r.spent);
  }
  for (const c of capped) {
    out.set(c.lineage_id, {
      capDaily: c.cap_daily,
      capMonthly: c.cap_monthly,
      capTotal: c.cap_total,
      spentToday: counters.get(`${c.lineage_id} ${day.key}`) ?? 0n,
      spentThisMonth: counters.get(`${c.lineage_id} ${month.key}`) ?? 0n,
      spentTotal: counters.get(`${c.lineage_id} ${total.key}`) ?? 0n,
    });
  }
  const uncapped = ids.filter((id) => !out.has(id));
  const usage = await usageSpend(db, accountId, uncapped, at);
  for (const id of uncapped) {
    const u = usage.get(id);
    out.set(
      id,
      u === undefined ? UNCAPPED : { ...UNCAPPED, spentToday: u.today, spentThisMonth: u.month, spentTotal: u.total },
    );
  }
  return out;
}

/**
 * Sets a lineage's caps in one transaction that first takes the account's wallet row lock (the
 * lock every hold, settle and release of the lineage takes first), so a lowered cap applies to
 * the very next hold and nothing in flight is miscounted. The first cap of a lineage starts its
 * counters at what the usage records say it spent this day and month, so capping a key that
 * already spent stops it at once (the total counts everything it ever spent). Never touches the ledger.
 */
export async function setLineageCaps(
  db: Kysely<Database>,
  input: { accountId: string; lineageId: string; change: CapChange; at: number },
): Promise<void> {
  const { accountId, lineageId, change, at } = input;
  checkCap(change.daily, 'cap_daily');
  checkCap(change.monthly, 'cap_monthly');
  checkCap(change.total, 'cap_total');
  await db.transaction().execute(async (trx: Transaction<Database>) => {
    const locked = await trx
      .updateTable('wallets')
      .set({ updated_at: BigInt(at) })
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (locked.numUpdatedRows !== 1n)
      throw new SvcError('not_found', `No wallet for account ${JSON.stringify(accountId)}`, { param: 'account_id' });
    const existing = await trx
      .selectFrom('key_lineages')
      .select(['cap_daily', 'cap_monthly', 'cap_total'])
      .where('lineage_id', '=', lineageId)
      .executeTakeFirst();
    const next = {
      cap_daily: change.daily === undefined ? (existing?.cap_daily ?? null) : change.daily,
      cap_monthly: change.monthly === undefined ? (existing?.cap_monthly ?? null) : change.monthly,
      cap_total: change.total === undefined ? (existing?.cap_total ?? null) : change.total,
      updated_at: BigInt(at),
    };
    if (existing !== undefined) {
      await trx.updateTable('key_lineages').set(next).where('lineage_id', '=', lineageId).execute();
      return;
    }
    if (next.cap_daily === null && next.cap_monthly === null && next.cap_total === null) return;
    await trx
      .insertInto('key_lineages')
      .values({ lineage_id: lineageId, account_id: accountId, ...next })
      .execute();
    const spent = (await usageSpend(trx, accountId, [lineageId], at)).get(lineageId);
    const [day, month, total] = capPeriods(at);
    await trx
      .insertInto('key_spend')
      .values([
        { lineage_id: lineageId, period: day.key, spent: spent?.today ?? 0n, held: 0n },
        { lineage_id: lineageId, period: month.key, spent: spent?.month ?? 0n, held: 0n },
        { lineage_id: lineageId, period: total.key, spent: spent?.total ?? 0n, held: 0n },
      ])
      .execute();
  });
}
