import type { Generated } from 'kysely';
import { SvcError } from '../errors';
import type { Store } from '../store/db';
import type { AuditTables } from '../accounts/audit';

/**
 * The account id under which the audit log keeps what concerns the whole deployment, not one
 * account (rate changes, the file's margins as loaded): shown on the console's pricing page.
 */
export const DEPLOYMENT_AUDIT = '*';

/** One stored exchange rate (migration 0045): toman per US dollar from `set_at` on. */
export interface PriceRatesTable {
  seq: Generated<bigint>;
  rate: bigint;
  /** Unix ms. */
  set_at: bigint;
  /** Who set it: `config` (the file's first rate), `cli:USER`, … */
  by: string;
}

export type PriceRatesTables = { price_rates: PriceRatesTable };

export interface RateView {
  readonly rate: bigint;
  readonly setAt: Date;
  readonly by: string;
}

/** A rate change farther than this from the current rate needs --force (SPEC §15: 50 %). */
const MAX_STEP_PERCENT = 50n;
/** The most a rate may be (as `pricing.rate` in the file). */
export const MAX_RATE = 10_000_000n;

/** Why a rate change is refused (the CLI prints the message and exits 2), or undefined. */
export function rateRefusal(rate: bigint, previous: bigint | undefined, force: boolean): string | undefined {
  if (rate <= 0n) return `the rate must be a whole number of toman per US dollar above 0 (got ${rate})`;
  if (rate > MAX_RATE) return `the rate must be at most ${MAX_RATE} toman per US dollar (got ${rate})`;
  if (force || previous === undefined) return undefined;
  // |rate - previous| / previous > 50 %, in integers.
  const step = rate > previous ? rate - previous : previous - rate;
  if (step * 100n > previous * MAX_STEP_PERCENT)
    return `${rate} is more than ${MAX_STEP_PERCENT} % ${rate > previous ? 'above' : 'below'} the current rate ${previous}; run again with --force if it is right`;
  return undefined;
}

/**
 * The exchange rate in the database (SPEC §15): its history, the rate in force, and a change. The
 * newest row is the rate in force; the file's `pricing.rate` is written as the first row only
 * when the table is empty (`seed`).
 */
export function createRateStore(deps: { store: Store; now: () => number }) {
  const db = deps.store.db.withTables<PriceRatesTables & AuditTables>();
  const view = (row: { rate: bigint; set_at: bigint; by: string }): RateView => ({
    rate: BigInt(row.rate),
    setAt: new Date(Number(row.set_at)),
    by: row.by,
  });
  return {
    /** The rate in force: the newest stored one; undefined when none is stored. */
    async current(): Promise<RateView | undefined> {
      const row = await db
        .selectFrom('price_rates')
        .select(['rate', 'set_at', 'by'])
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst();
      return row === undefined ? undefined : view(row);
    },

    /** Every stored rate, newest first. */
    async history(limit = 1000): Promise<RateView[]> {
      const rows = await db
        .selectFrom('price_rates')
        .select(['rate', 'set_at', 'by'])
        .orderBy('seq', 'desc')
        .limit(limit)
        .execute();
      return rows.map(view);
    },

    /**
     * Writes the file's rate as the first one when none is stored; returns the rate in force.
     * Two replicas starting at once may both write it: the same rate twice, harmless.
     */
    async seed(rate: bigint | undefined): Promise<RateView | undefined> {
      const stored = await this.current();
      if (stored !== undefined || rate === undefined) return stored;
      await db
        .insertInto('price_rates')
        .values({ rate, set_at: BigInt(deps.now()), by: 'config' })
        .execute();
      return this.current();
    },

    /**
     * Stores `rate` as the rate in force from now on, and the change in the audit log (one
     * transaction: both or neither). `previous` is the rate in force before (the stored one, else
     * the file's); refused (invalid_argument, nothing written) by `rateRefusal`.
     */
    async set(
      rate: bigint,
      by: string,
      options: { force: boolean; fileRate?: bigint | undefined },
    ): Promise<{ rate: bigint; previous: bigint | undefined; setAt: Date }> {
      const previous = (await this.current())?.rate ?? options.fileRate;
      const refusal = rateRefusal(rate, previous, options.force);
      if (refusal !== undefined) throw new SvcError('invalid_argument', refusal, { param: 'rate' });
      const setAt = deps.now();
      const who = by.slice(0, 200);
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('price_rates')
          .values({ rate, set_at: BigInt(setAt), by: who })
          .execute();
        await trx
          .insertInto('console_audit')
          .values({
            account_id: DEPLOYMENT_AUDIT,
            action: 'rate_set',
            detail: `rate ${rate} toman per US dollar (was ${previous ?? 'none'}) by ${who}${options.force ? ' (forced)' : ''}`,
            created_at: BigInt(setAt),
          })
          .execute();
      });
      return { rate, previous, setAt: new Date(setAt) };
    },
  };
}

export type RateStore = ReturnType<typeof createRateStore>;
