import { SvcError } from '../errors';
import { validateAccountName } from '../accounts/service';
import { newId } from '../ids';
import { isUniqueViolation } from '../store/db';
import { hashPassword } from './passwords';
import type { ConsoleDb } from './tables';
import { checkNewPassword, cleanEmail, cleanText } from './validate';

export interface ConsoleAccountView {
  readonly id: string;
  readonly name: string;
  readonly email: string;
  readonly balance: bigint;
  readonly held: bigint;
  readonly createdAt: Date;
}

function emailTaken(): SvcError {
  return new SvcError('invalid_argument', 'An account with this email address already exists.', { param: 'email' });
}

/**
 * Creates an account, its empty wallet and its console sign-in in one transaction, so a taken
 * email or a bad password leaves nothing behind. Used by the console and by `svc account create`.
 */
export async function createAccountWithSignIn(
  db: ConsoleDb,
  input: { name: string; email: string; password: string; now: number },
): Promise<ConsoleAccountView> {
  const name = validateAccountName(cleanText('name', 'The account name', input.name, 200, { required: true }));
  const email = cleanEmail(input.email);
  const hash = await hashPassword(checkNewPassword('password', input.password));
  const taken = await db
    .selectFrom('console_credentials')
    .select('account_id')
    .where('email', '=', email)
    .executeTakeFirst();
  if (taken !== undefined) throw emailTaken();
  const id = newId('acc');
  const at = BigInt(input.now);
  try {
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('accounts').values({ id, name, created_at: at }).execute();
      await trx
        .insertInto('wallets')
        .values({ account_id: id, balance: 0n, held: 0n, currency: 'toman', updated_at: at })
        .execute();
      await trx
        .insertInto('console_credentials')
        .values({ account_id: id, email, password_hash: hash, created_at: at, updated_at: at })
        .execute();
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
  return { id, name, email, balance: 0n, held: 0n, createdAt: new Date(input.now) };
}

function accountsQuery(db: ConsoleDb) {
  return db
    .selectFrom('accounts as a')
    .leftJoin('console_credentials as c', 'c.account_id', 'a.id')
    .leftJoin('wallets as w', 'w.account_id', 'a.id')
    .select(['a.id', 'a.name', 'a.created_at', 'c.email', 'w.balance', 'w.held']);
}

/** Every account with its sign-in email and wallet, newest first (the operator's list). */
export async function listAccounts(db: ConsoleDb, limit: number): Promise<ConsoleAccountView[]> {
  const rows = await accountsQuery(db).orderBy('a.created_at', 'desc').orderBy('a.id').limit(limit).execute();
  return rows.map(toView);
}

/** Throws `not_found` for an unknown id. */
export async function getConsoleAccount(db: ConsoleDb, id: string): Promise<ConsoleAccountView> {
  const row = id === '' ? undefined : await accountsQuery(db).where('a.id', '=', id).executeTakeFirst();
  if (row === undefined) throw new SvcError('not_found', 'There is no such account.', { param: 'account_id' });
  return toView(row);
}

function toView(r: {
  id: string;
  name: string;
  created_at: bigint;
  email: string | null;
  balance: bigint | null;
  held: bigint | null;
}): ConsoleAccountView {
  return {
    id: r.id,
    name: r.name,
    email: r.email ?? '',
    balance: BigInt(String(r.balance ?? 0)),
    held: BigInt(String(r.held ?? 0)),
    createdAt: new Date(Number(r.created_at)),
  };
}
