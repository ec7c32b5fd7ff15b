import type { Store } from '../store/db';
import { SvcError, invalidArgument } from '../errors';
import { newId } from '../ids';
import { checkPlainText } from '../text/plain-text';

export interface AccountView {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
}

export interface AccountService {
  /** Creates the account and its empty wallet in one transaction. */
  create(name: string): Promise<AccountView>;
  /** Throws `not_found` for an unknown id. */
  get(id: string): Promise<AccountView>;
}

export function validateAccountName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '') throw invalidArgument('name', 'name must not be empty');
  if (trimmed.length > 200) throw invalidArgument('name', 'name must be at most 200 characters');
  return checkPlainText('name', trimmed);
}

export function createAccountService(deps: { store: Store; now: () => number }): AccountService {
  const { db } = deps.store;
  return {
    async create(name) {
      const clean = validateAccountName(name);
      const id = newId('acc');
      const now = deps.now();
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('accounts')
          .values({ id, name: clean, created_at: BigInt(now) })
          .execute();
        await trx
          .insertInto('wallets')
          .values({ account_id: id, balance: 0n, held: 0n, currency: 'toman', updated_at: BigInt(now) })
          .execute();
      });
      return { id, name: clean, createdAt: new Date(now) };
    },
    async get(id) {
      const row = await db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
      if (row === undefined)
        throw new SvcError('not_found', `No account ${JSON.stringify(id)}`, { param: 'account_id' });
      return { id: row.id, name: row.name, createdAt: new Date(Number(row.created_at)) };
    },
  };
}
