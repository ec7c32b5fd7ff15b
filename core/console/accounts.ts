import { sql } from 'kysely';
import { SvcError } from '../errors';
import type { AccountListing } from '../accounts/grpc';
import { validateAccountName } from '../accounts/service';
import { newId } from '../ids';
import { isUniqueViolation } from '../store/db';
import { hashPassword } from './passwords';
import type { ConsoleDb } from './tables';
import { checkNewPassword, cleanEmail, cleanText } from './validate';

/** An account as the operator's list shows it (AccountService's listing). */
export type ConsoleAccountView = AccountListing;

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

/**
 * Gives an existing account a console sign-in (or replaces the one it has): the account that
 * already holds the keys and the credit, not a new one. A replaced sign-in's sessions end, so a
 * browser signed in with the old password is signed out. Used by the operator's account page and
 * by `svc account set-sign-in`.
 */
export async function setSignIn(
  db: ConsoleDb,
  input: { accountId: string; email: string; password: string; now: number },
): Promise<{ account: ConsoleAccountView; replaced: boolean }> {
  const email = cleanEmail(input.email);
  const password = checkNewPassword('password', input.password);
  const account = await getConsoleAccount(db, input.accountId);
  const taken = await db
    .selectFrom('console_credentials')
    .select('account_id')
    .where('email', '=', email)
    .executeTakeFirst();
  if (taken !== undefined && taken.account_id !== account.id) throw emailTaken();
  const hash = await hashPassword(password);
  const at = BigInt(input.now);
  const replaced = account.email !== '';
  try {
    await db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('console_credentials')
        .set({ email, password_hash: hash, updated_at: at })
        .where('account_id', '=', account.id)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) {
        await trx
          .insertInto('console_credentials')
          .values({ account_id: account.id, email, password_hash: hash, created_at: at, updated_at: at })
          .execute();
      }
      await trx.deleteFrom('console_sessions').where('account_id', '=', account.id).execute();
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
  return { account: { ...account, email }, replaced };
}

function accountsQuery(db: ConsoleDb) {
  return db
    .selectFrom('accounts as a')
    .leftJoin('console_credentials as c', 'c.account_id', 'a.id')
    .leftJoin('wallets as w', 'w.account_id', 'a.id')
    .select(['a.id', 'a.name', 'a.created_at', 'c.email', 'w.balance', 'w.held']);
}

/**
 * Accounts with their sign-in email and wallet, newest first (the operator's list): those whose
 * name, email or id contains `query` (any case), a page at a time. The cursor is the last row's
 * (created_at, id), so paging stays exact while accounts are added.
 */
export async function listAccounts(
  db: ConsoleDb,
  input: { limit: number; query?: string; pageToken?: string },
): Promise<{ accounts: ConsoleAccountView[]; nextPageToken: string }> {
  let q = accountsQuery(db);
  const text = (input.query ?? '').trim().toLowerCase().slice(0, 100);
  if (text !== '') {
    // LIKE's own wildcards in the query are matched as themselves. The escape character is "!",
    // not a backslash, which MySQL's string literals would swallow.
    const pattern = `%${text.replace(/[!%_]/g, (c) => `!${c}`)}%`;
    q = q.where((eb) =>
      eb.or([
        eb(eb.fn('lower', ['a.name']), 'like', sql<string>`${pattern} escape '!'`),
        eb('c.email', 'like', sql<string>`${pattern} escape '!'`),
        eb('a.id', '=', text),
      ]),
    );
  }
  const token = input.pageToken ?? '';
  if (token !== '') {
    const m = /^(\d{1,16})\|([A-Za-z0-9_-]{1,40})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
    if (m === null)
      throw new SvcError('invalid_argument', 'page_token is not one this service returned; start again without it', {
        param: 'page_token',
      });
    const at = BigInt(m[1] ?? '0');
    const id = m[2] ?? '';
    q = q.where((eb) =>
      eb.or([eb('a.created_at', '<', at), eb.and([eb('a.created_at', '=', at), eb('a.id', '>', id)])]),
    );
  }
  const rows = await q
    .orderBy('a.created_at', 'desc')
    .orderBy('a.id')
    .limit(input.limit + 1)
    .execute();
  const shown = rows.slice(0, input.limit);
  const last = shown.at(-1);
  return {
    accounts: shown.map(toView),
    nextPageToken:
      rows.length > input.limit && last !== undefined
        ? Buffer.from(`${String(last.created_at)}|${last.id}`, 'utf8').toString('base64url')
        : '',
  };
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
