import { sql, type Selectable, type Transaction } from 'kysely';
import { SvcError } from '../errors';
import { isUniqueViolation, type Dialect } from '../store/db';
import type { Database, HoldsTable } from '../store/schema';

/**
 * Per-key spend caps, counted per key lineage (a key and the keys rolled from it) and UTC period.
 * Every change to the counters happens in the transaction that changes the wallet of the
 * lineage's account, after that transaction has taken the wallet row's lock: the wallet row
 * orders all writers of one lineage's counters, on any number of cores.
 */

export type CapLimit = 'daily' | 'monthly' | 'total';

/** The caps of a lineage; null: no limit for that period. */
export interface Caps {
  readonly daily: bigint | null;
  readonly monthly: bigint | null;
  readonly total: bigint | null;
}

/** The counters of one lineage in one period. */
export interface PeriodSpend {
  readonly spent: bigint;
  readonly held: bigint;
}

export interface CapPeriod {
  readonly limit: CapLimit;
  /** 'd:2026-11-22', 'm:2026-11' or 't:all'. */
  readonly key: string;
  /** Unix ms when the next period begins; null for the total, which never resets. */
  readonly resetsAt: number | null;
}

/** The lineage's whole life: the total cap's period, which never ends. */
export const TOTAL_PERIOD: CapPeriod = { limit: 'total', key: 't:all', resetsAt: null };

/** The UTC day and month `at` falls in, and the total. */
export function capPeriods(
  at: number,
): readonly [CapPeriod & { resetsAt: number }, CapPeriod & { resetsAt: number }, CapPeriod] {
  const d = new Date(at);
  const iso = d.toISOString();
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  return [
    { limit: 'daily', key: `d:${iso.slice(0, 10)}`, resetsAt: Date.UTC(y, m, d.getUTCDate() + 1) },
    { limit: 'monthly', key: `m:${iso.slice(0, 7)}`, resetsAt: Date.UTC(y, m + 1, 1) },
    TOTAL_PERIOD,
  ];
}

export function capOf(caps: Caps, limit: CapLimit): bigint | null {
  return limit === 'daily' ? caps.daily : limit === 'monthly' ? caps.monthly : caps.total;
}

/** The refusal of a hold that the key's cap cannot fit. Answers like an empty wallet, naming the limit. */
export function keyCapExceeded(period: CapPeriod, cap: bigint, spend: PeriodSpend, amount: bigint): SvcError {
  const resets = period.resetsAt === null ? null : new Date(period.resetsAt).toISOString();
  const inFlight = spend.held > 0n ? `, ${spend.held.toString()} held by calls in progress` : '';
  const after = resets === null ? 'it never resets; raise or remove the cap to go on' : `it resets at ${resets}`;
  return new SvcError(
    'key_cap_exceeded',
    `This API key's ${period.limit} spend cap of ${cap.toString()} credits is reached (spent ${spend.spent.toString()}${inFlight}; this call needs up to ${amount.toString()}); ${after}`,
    {
      details: {
        limit: period.limit,
        cap: Number(cap),
        spent: Number(spend.spent),
        held: Number(spend.held),
        required: Number(amount),
        resets_at: resets,
      },
    },
  );
}

/** Thrown when two writers created the same counter row at once; the caller retries. */
export class CapRowRaced extends Error {}

/** The caps of a lineage, read in the transaction; undefined when it was never capped. */
export async function readCaps(trx: Transaction<Database>, lineageId: string): Promise<Caps | undefined> {
  const row = await trx
    .selectFrom('key_lineages')
    .select(['cap_daily', 'cap_monthly', 'cap_total'])
    .where('lineage_id', '=', lineageId)
    .executeTakeFirst();
  return row === undefined ? undefined : { daily: row.cap_daily, monthly: row.cap_monthly, total: row.cap_total };
}

async function insertSpend(
  trx: Transaction<Database>,
  lineageId: string,
  period: string,
  spend: PeriodSpend,
): Promise<void> {
  try {
    await trx
      .insertInto('key_spend')
      .values({ lineage_id: lineageId, period, spent: spend.spent, held: spend.held })
      .execute();
  } catch (error) {
    if (isUniqueViolation(error)) throw new CapRowRaced();
    throw error;
  }
}

/**
 * Reserves `amount` in the lineage's day, month and total counters if every cap has room, else throws
 * `key_cap_exceeded` (the caller's transaction then rolls back its wallet change too). Returns
 * false, reserving nothing, when the lineage has no caps row. Call after the wallet row is locked.
 */
export async function reserveCap(
  trx: Transaction<Database>,
  dialect: Dialect,
  lineageId: string,
  amount: bigint,
  at: number,
): Promise<boolean> {
  const caps = await readCaps(trx, lineageId);
  if (caps === undefined) return false;
  for (const period of capPeriods(at)) {
    const cap = capOf(caps, period.limit);
    let update = trx
      .updateTable('key_spend')
      .set({ held: sql<bigint>`held + ${amount}` })
      .where('lineage_id', '=', lineageId)
      .where('period', '=', period.key);
    if (cap !== null) update = update.where(sql<boolean>`spent + held + ${amount} <= ${cap}`);
    const reserved = await update.executeTakeFirst();
    if (reserved.numUpdatedRows === 1n) continue;
    let read = trx
      .selectFrom('key_spend')
      .select(['spent', 'held'])
      .where('lineage_id', '=', lineageId)
      .where('period', '=', period.key);
    if (dialect === 'mysql') read = read.forUpdate();
    const row = await read.executeTakeFirst();
    // A row that exists and was not updated can only have failed the cap condition.
    if (row !== undefined && cap !== null) throw keyCapExceeded(period, cap, row, amount);
    if (cap !== null && amount > cap) throw keyCapExceeded(period, cap, { spent: 0n, held: 0n }, amount);
    await insertSpend(trx, lineageId, period.key, { spent: 0n, held: amount });
  }
  return true;
}

/**
 * Closes a capped hold's reservation: `reserved` leaves held, `charged` joins spent, in the periods
 * the hold was placed in (so a hold settled after midnight frees what it reserved).
 */
export async function closeCap(
  trx: Transaction<Database>,
  hold: Pick<Selectable<HoldsTable>, 'lineage_id' | 'created_at'>,
  reserved: bigint,
  charged: bigint,
): Promise<void> {
  if (hold.lineage_id === null || (reserved === 0n && charged === 0n)) return;
  await trx
    .updateTable('key_spend')
    .set({ held: sql<bigint>`held - ${reserved}`, spent: sql<bigint>`spent + ${charged}` })
    .where('lineage_id', '=', hold.lineage_id)
    .where(
      'period',
      'in',
      capPeriods(Number(hold.created_at)).map((p) => p.key),
    )
    .execute();
}

/** The least room any cap of `caps` leaves in `rows` (counters by period key; a missing one is empty); null: no cap. */
function leastRoom(
  caps: Caps,
  periods: readonly CapPeriod[],
  spendOf: (period: string) => PeriodSpend | undefined,
): bigint | null {
  let room: bigint | null = null;
  for (const period of periods) {
    const cap = capOf(caps, period.limit);
    if (cap === null) continue;
    const spend = spendOf(period.key);
    const left = cap - (spend?.spent ?? 0n) - (spend?.held ?? 0n);
    if (room === null || left < room) room = left;
  }
  return room;
}

/**
 * What the caps of a hold's lineage have left in the periods the hold was placed in (the least
 * over its day, month and total; may be negative after a cap was lowered), or null when the hold
 * is not capped. For the settle of a hold no longer open, whose reservation was given back: the
 * charge may take no more than this. Call after the wallet row is locked (MySQL: locking read).
 */
export async function capRoom(
  trx: Transaction<Database>,
  dialect: Dialect,
  hold: Pick<Selectable<HoldsTable>, 'lineage_id' | 'created_at'>,
): Promise<bigint | null> {
  if (hold.lineage_id === null) return null;
  const caps = await readCaps(trx, hold.lineage_id);
  if (caps === undefined) return null;
  const periods = capPeriods(Number(hold.created_at));
  let read = trx
    .selectFrom('key_spend')
    .select(['period', 'spent', 'held'])
    .where('lineage_id', '=', hold.lineage_id)
    .where(
      'period',
      'in',
      periods.map((p) => p.key),
    );
  if (dialect === 'mysql') read = read.forUpdate();
  const rows = new Map((await read.execute()).map((r) => [r.period, r]));
  return leastRoom(caps, periods, (key) => rows.get(key));
}

interface BookRow {
  spent: bigint;
  held: bigint;
  readonly stored: boolean;
  dirty: boolean;
}

/**
 * A batch's view of the counters it touches, read under the wallet row lock, changed in memory
 * in arrival order like the wallet balance, and written back with `writeCapBook`.
 */
export interface CapBook {
  /**
   * Reserves `amount` for a hold placed at `at`: the lineage to record on the hold (null when the
   * lineage has no caps), or the `key_cap_exceeded` refusal (then nothing is reserved).
   */
  hold(lineageId: string, amount: bigint, at: number): string | null | SvcError;
  /** As `capRoom`, in memory (the hold's lineage must be among those loaded). */
  room(hold: Pick<Selectable<HoldsTable>, 'lineage_id' | 'created_at'>): bigint | null;
  /** As `closeCap`, in memory. */
  close(hold: Pick<Selectable<HoldsTable>, 'lineage_id' | 'created_at'>, reserved: bigint, charged: bigint): void;
  /** Writes the counters changed in memory (the wallet row lock is held, so absolute values are safe). */
  write(): Promise<void>;
}

const rowKey = (lineageId: string, period: string): string => `${lineageId}\u0000${period}`;

/**
 * Reads the caps of `lineages` (those of the batch's holds) and the counters of their periods at
 * `at` and of the periods of `closing` (stored capped holds the batch may close). MySQL: locking reads.
 */
export async function loadCapBook(
  trx: Transaction<Database>,
  dialect: Dialect,
  lineages: ReadonlySet<string>,
  closing: readonly Pick<Selectable<HoldsTable>, 'lineage_id' | 'created_at'>[],
  at: number,
): Promise<CapBook> {
  const capsOf = new Map<string, Caps>();
  // The caps of the closing holds' lineages too: a settle of a hold no longer open is bounded by them.
  const capped = new Set(lineages);
  for (const hold of closing) if (hold.lineage_id !== null) capped.add(hold.lineage_id);
  if (capped.size > 0) {
    const rows = await trx
      .selectFrom('key_lineages')
      .select(['lineage_id', 'cap_daily', 'cap_monthly', 'cap_total'])
      .where('lineage_id', 'in', [...capped])
      .execute();
    for (const r of rows) capsOf.set(r.lineage_id, { daily: r.cap_daily, monthly: r.cap_monthly, total: r.cap_total });
  }
  const wanted = new Set<string>();
  const ids = new Set<string>();
  const periods = new Set<string>();
  const want = (lineageId: string, when: number): void => {
    for (const p of capPeriods(when)) {
      wanted.add(rowKey(lineageId, p.key));
      ids.add(lineageId);
      periods.add(p.key);
    }
  };
  for (const lineageId of capsOf.keys()) want(lineageId, at);
  for (const hold of closing) if (hold.lineage_id !== null) want(hold.lineage_id, Number(hold.created_at));
  const rows = new Map<string, BookRow>();
  if (ids.size > 0) {
    let read = trx
      .selectFrom('key_spend')
      .select(['lineage_id', 'period', 'spent', 'held'])
      .where('lineage_id', 'in', [...ids])
      .where('period', 'in', [...periods]);
    if (dialect === 'mysql') read = read.forUpdate();
    for (const r of await read.execute()) {
      const key = rowKey(r.lineage_id, r.period);
      if (wanted.has(key)) rows.set(key, { spent: r.spent, held: r.held, stored: true, dirty: false });
    }
  }
  const row = (key: string): BookRow => {
    let found = rows.get(key);
    if (found === undefined) {
      found = { spent: 0n, held: 0n, stored: false, dirty: false };
      rows.set(key, found);
    }
    return found;
  };
  return {
    hold(lineageId, amount, when) {
      const caps = capsOf.get(lineageId);
      if (caps === undefined) return null;
      const ps = capPeriods(when);
      for (const p of ps) {
        const cap = capOf(caps, p.limit);
        const r = row(rowKey(lineageId, p.key));
        if (cap !== null && r.spent + r.held + amount > cap) return keyCapExceeded(p, cap, r, amount);
      }
      for (const p of ps) {
        const r = row(rowKey(lineageId, p.key));
        r.held += amount;
        r.dirty = true;
      }
      return lineageId;
    },
    room(hold) {
      const caps = hold.lineage_id === null ? undefined : capsOf.get(hold.lineage_id);
      if (hold.lineage_id === null || caps === undefined) return null;
      const lineageId = hold.lineage_id;
      return leastRoom(caps, capPeriods(Number(hold.created_at)), (key) => rows.get(rowKey(lineageId, key)));
    },
    close(hold, reserved, charged) {
      if (hold.lineage_id === null || (reserved === 0n && charged === 0n)) return;
      for (const p of capPeriods(Number(hold.created_at))) {
        const r = rows.get(rowKey(hold.lineage_id, p.key));
        // Like the per-operation UPDATE: a counter row that does not exist is left alone.
        if (r === undefined || (!r.stored && !r.dirty)) continue;
        r.held -= reserved;
        r.spent += charged;
        r.dirty = true;
      }
    },
    async write() {
      for (const [key, r] of rows) {
        if (!r.dirty) continue;
        const [lineageId = '', period = ''] = key.split('\u0000');
        if (!r.stored) {
          await insertSpend(trx, lineageId, period, r);
          continue;
        }
        await trx
          .updateTable('key_spend')
          .set({ spent: r.spent, held: r.held })
          .where('lineage_id', '=', lineageId)
          .where('period', '=', period)
          .execute();
      }
    },
  };
}
