import { Decimal } from '../config/decimal';
import { SvcError } from '../errors';
import type { Store } from '../store/db';
import type { AuditTables } from '../accounts/audit';

/** The most a margin may be (as `margin` in the file): 100 = 10,000 %. */
const MAX_MARGIN = Decimal.of(100n);
/** The least, with --force: -1 would sell for nothing. */
const MIN_MARGIN = Decimal.parse('-0.99') as Decimal;

/**
 * An account's own margin (SPEC §15: `svc account update --account ID --margin 0.10`): it replaces
 * the model's and the default for that account's calls of models priced from the dollar. Stored as
 * exact decimal text on the account (migration 0045).
 */
export function createAccountMargins(deps: { store: Store; now?: () => number }) {
  const db = deps.store.db.withTables<AuditTables>();
  const now = deps.now ?? (() => Date.now());
  return {
    /** The account's margin; undefined when it has none (or no such account). */
    async get(accountId: string): Promise<Decimal | undefined> {
      const row = await db.selectFrom('accounts').select('margin').where('id', '=', accountId).executeTakeFirst();
      const text = row?.margin;
      return text === null || text === undefined ? undefined : Decimal.parse(text);
    },

    /**
     * Sets (or with null removes) the account's margin, and records the change on the account's
     * audit list (`margin_set`, by `by`) in the same transaction. A negative one (selling below
     * cost) is refused unless `force`; above 100 or at -1 and below, always.
     */
    async set(accountId: string, margin: Decimal | null, force: boolean, by = 'operator'): Promise<void> {
      if (margin !== null) {
        if (margin.compare(MAX_MARGIN) > 0)
          throw new SvcError('invalid_argument', `the margin must be at most 100 (got ${margin.toString()})`, {
            param: 'margin',
          });
        if (margin.compare(MIN_MARGIN) < 0)
          throw new SvcError('invalid_argument', `the margin must be above -1 (got ${margin.toString()})`, {
            param: 'margin',
          });
        if (margin.negative && !force)
          throw new SvcError(
            'invalid_argument',
            `a negative margin (${margin.toString()}) sells below the upstream's cost; run again with --force if it is right`,
            { param: 'margin' },
          );
      }
      // Looked up first: MySQL counts an update that changes nothing as no row.
      const found = await db.selectFrom('accounts').select('id').where('id', '=', accountId).executeTakeFirst();
      if (found === undefined)
        throw new SvcError('not_found', `No account ${JSON.stringify(accountId)}`, { param: 'account_id' });
      const detail = `margin ${margin === null ? 'none' : margin.toString()} by ${by}${force ? ' (forced)' : ''}`;
      await db.transaction().execute(async (trx) => {
        await trx
          .updateTable('accounts')
          .set({ margin: margin === null ? null : margin.toString() })
          .where('id', '=', accountId)
          .execute();
        await trx
          .insertInto('console_audit')
          .values({
            account_id: accountId,
            action: 'margin_set',
            detail: detail.slice(0, 400),
            created_at: BigInt(now()),
          })
          .execute();
      });
    },
  };
}

export type AccountMargins = ReturnType<typeof createAccountMargins>;
