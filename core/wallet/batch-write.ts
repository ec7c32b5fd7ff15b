import { sql, type Insertable, type Transaction } from 'kysely';
import { affectedRows, insertInto, shaped, statement } from '../store/compiled';
import type { Dialect, Store } from '../store/db';
import type { Database, HoldsTable, LedgerEntriesTable } from '../store/schema';
import type { Balances, BatchPlan } from './batch-plan';
import { Raced } from './service';

/**
 * Takes the wallet row's lock and reads it; undefined when the account has no wallet.
 * MySQL: a locking read. SQLite: a write first, so that the transaction takes the database's
 * write lock (waiting up to busy_timeout) before it reads, instead of failing to upgrade later.
 */
export async function lockWallet(
  trx: Transaction<Database>,
  dialect: Dialect,
  accountId: string,
  stamp: bigint,
): Promise<Balances | undefined> {
  if (dialect === 'sqlite') {
    const touched = await trx
      .updateTable('wallets')
      .set({ updated_at: stamp })
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (touched.numUpdatedRows !== 1n) return undefined;
  }
  let q = trx.selectFrom('wallets').select(['balance', 'held']).where('account_id', '=', accountId);
  if (dialect === 'mysql') q = q.forUpdate();
  return q.executeTakeFirst();
}

/**
 * Moves the wallet from `expected` to `next` only if it still holds `expected`: the optimistic
 * first statement of a batch planned on the balances this process last wrote. It takes the row
 * lock like a locking read would, and the database, not the guess, decides: false when another
 * writer got there first (then the caller locks, reads and plans again).
 */
export async function claimWallet(
  trx: Transaction<Database>,
  accountId: string,
  expected: Balances,
  next: Balances,
  stamp: bigint,
): Promise<boolean> {
  const result = await trx.executeQuery(
    CLAIM_WALLET(next.balance, next.held, stamp, accountId, expected.balance, expected.held),
  );
  return affectedRows(result) === 1n;
}

// The batch's per-request statements, precompiled (core/store/compiled.ts).
const CLAIM_WALLET = statement(
  'update `wallets` set `balance` = ?, `held` = ?, `updated_at` = ? where `account_id` = ? and `balance` = ? and `held` = ?',
);
const SET_WALLET = statement('update `wallets` set `balance` = ?, `held` = ?, `updated_at` = ? where `account_id` = ?');
const INSERT_HOLDS = insertInto<HoldsTable>('holds', [
  'id',
  'account_id',
  'request_id',
  'amount',
  'status',
  'settled_amount',
  'expires_at',
  'created_at',
  'lineage_id',
  'client_request_id',
]);
const INSERT_LEDGER = insertInto<Insertable<LedgerEntriesTable>>('ledger_entries', [
  'account_id',
  'kind',
  'amount',
  'balance_after',
  'request_id',
  'reference',
  'created_at',
]);
// Closes n holds in one statement, each only from the status it was planned from.
const CLOSE_HOLDS = shaped((n) => {
  const cases = new Array<string>(n).fill('when ? then ?').join(' ');
  const ids = new Array<string>(n).fill('?').join(', ');
  return (
    `update \`holds\` set \`status\` = case \`id\` ${cases} end, \`settled_amount\` = case \`id\` ${cases} end ` +
    `where \`id\` in (${ids}) and \`status\` = case \`id\` ${cases} end`
  );
});

/** Writes the balances of a plan decided on a row this transaction has locked and read. */
export async function setWallet(
  trx: Transaction<Database>,
  accountId: string,
  next: Balances,
  stamp: bigint,
): Promise<void> {
  await trx.executeQuery(SET_WALLET(next.balance, next.held, stamp, accountId));
}

/** How the database numbers the ledger rows of one multi-row INSERT. */
export interface LedgerKeys {
  /** The key the driver reports: MySQL the first row's, SQLite the last row's. */
  readonly reports: 'first' | 'last';
  /** MySQL's auto_increment_increment (above 1 in some replicated setups); 1 on SQLite. */
  readonly step: bigint;
}

/** Reads how `store` numbers ledger rows (one query on MySQL, none on SQLite). */
export async function ledgerKeys(store: Store): Promise<LedgerKeys> {
  if (store.dialect === 'sqlite') return { reports: 'last', step: 1n };
  const { rows } = await sql<{ step: bigint | number | string }>`select @@auto_increment_increment as step`.execute(
    store.db,
  );
  return { reports: 'first', step: BigInt(rows[0]?.step ?? 1) };
}

/** The plan of one account in a batch: its rows go in the batch's shared statements. */
export interface AccountPlan {
  readonly accountId: string;
  readonly plan: BatchPlan;
}

/**
 * Writes the rows of a batch's plans (each account's wallet row already written) with at most
 * three statements for all of them, however many accounts the batch spans (new holds, ledger
 * entries, closed holds), and returns, per plan, the ledger sequence number of each planned
 * entry. Throws `Raced` when a stored hold is no longer in the status it was planned from.
 */
export async function writeRows(
  trx: Transaction<Database>,
  keys: LedgerKeys,
  plans: readonly AccountPlan[],
  now: number,
): Promise<bigint[][]> {
  const stamp = BigInt(now);
  const newHolds = plans.flatMap(({ plan }) => plan.newHolds);
  if (newHolds.length > 0) await trx.executeQuery(INSERT_HOLDS(newHolds));
  const entries = plans.flatMap(({ accountId, plan }) =>
    plan.entries.map((e) => ({
      account_id: accountId,
      kind: 'charge' as const,
      amount: e.amount,
      balance_after: e.balanceAfter,
      request_id: e.requestId,
      reference: '',
      created_at: stamp,
    })),
  );
  const seqs: bigint[][] = [];
  if (entries.length > 0) {
    const inserted = await trx.executeQuery(INSERT_LEDGER(entries));
    // One multi-row INSERT takes consecutive keys (SQLite: under its write lock; InnoDB: a
    // "simple insert" reserves its block at once), in the order of its rows. MySQL reports the
    // first, SQLite the last.
    const reported = inserted.insertId ?? 0n;
    const last = BigInt(entries.length - 1);
    let next = keys.reports === 'first' ? reported : reported - last * keys.step;
    for (const { plan } of plans) {
      seqs.push(
        plan.entries.map(() => {
          const seq = next;
          next += keys.step;
          return seq;
        }),
      );
    }
  } else for (let i = 0; i < plans.length; i++) seqs.push([]);
  const changed = plans.flatMap(({ plan }) => plan.changedHolds);
  if (changed.length > 0) {
    const parameters: unknown[] = [];
    for (const c of changed) parameters.push(c.id, c.to);
    for (const c of changed) parameters.push(c.id, c.settledAmount);
    for (const c of changed) parameters.push(c.id);
    for (const c of changed) parameters.push(c.id, c.from);
    const closed = await trx.executeQuery(CLOSE_HOLDS(changed.length, parameters));
    if (affectedRows(closed) !== BigInt(changed.length)) throw new Raced();
  }
  return seqs;
}
