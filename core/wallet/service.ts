import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { QueryRunner } from '../store/compiled';
import type { Store } from '../store/db';
import { isUniqueViolation } from '../store/db';
import type { Database, HoldsTable, LedgerEntriesTable, LedgerKind } from '../store/schema';
import { SvcError, invalidArgument } from '../errors';
import { newTimeOrderedId, randomBase62 } from '../ids';
import { checkPlainText } from '../text/plain-text';
import { insertUsage, usageRow, type UsageEntry, type UsageRecord } from '../usage/rows';
import { CapRowRaced, capRoom, closeCap, reserveCap } from './caps';
import type { HoldView, LedgerEntryView, SettleResult, WalletService, WalletView } from './types';

/** Largest single amount accepted (10^15 credits): far above any real top-up, far below 2^63. */
export const MAX_AMOUNT = 1_000_000_000_000_000n;
const MAX_ATTEMPTS = 8;
// Re-reads after a lost race; each round means another writer made progress.
const MAX_ROUNDS = 100;

export interface WalletServiceOptions {
  readonly store: Store;
  readonly now: () => number;
  /** Default hold lifetime (default 600 s). */
  readonly holdTtlSeconds?: number;
  /**
   * Called after a usage record carried by a settle or a release is committed, never for an
   * ignored duplicate (as `UsageRecorderDeps.onRecorded`).
   */
  readonly onRecorded?: (record: UsageRecord) => void;
}

export function toLedgerView(row: Selectable<LedgerEntriesTable>): LedgerEntryView {
  return {
    id: `le_${row.seq.toString()}`,
    accountId: row.account_id,
    kind: row.kind,
    amount: row.amount,
    balanceAfter: row.balance_after,
    requestId: row.request_id,
    reference: row.reference,
    createdAt: new Date(Number(row.created_at)),
  };
}

export function toHoldView(row: Selectable<HoldsTable>): HoldView {
  return {
    id: row.id,
    accountId: row.account_id,
    requestId: row.request_id,
    amount: row.amount,
    status: row.status,
    expiresAt: new Date(Number(row.expires_at)),
  };
}

export function checkAmount(amount: bigint, param: string, allowZero: boolean): void {
  if (amount < 0n || (!allowZero && amount === 0n))
    throw invalidArgument(param, `${param} must be ${allowZero ? 'zero or more' : 'a positive integer'}`);
  if (amount > MAX_AMOUNT) throw invalidArgument(param, `${param} must be at most ${MAX_AMOUNT.toString()}`);
}

export function checkRequestId(requestId: string): void {
  if (requestId === '' || requestId.length > 100)
    throw invalidArgument('request_id', 'request_id must be 1-100 characters');
}

// Deadlocks and lock timeouts (MySQL) and a busy database (SQLite) are retried: the
// transaction did nothing.
export function isRetryable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ER_LOCK_DEADLOCK' || code === 'ER_LOCK_WAIT_TIMEOUT' || code === 'SQLITE_BUSY';
}

/**
 * A short transaction (read committed on MySQL), retried when the database says it did nothing
 * (a deadlock, a lock timeout, a busy SQLite): the wallet's, and every write that must commit
 * with it (payments).
 */
export async function retryingTransaction<T>(
  store: Store,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      const builder =
        store.dialect === 'mysql' ? store.db.transaction().setIsolationLevel('read committed') : store.db.transaction();
      return await builder.execute(work);
    } catch (error) {
      if (isRetryable(error) && attempt < MAX_ATTEMPTS) {
        await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
        continue;
      }
      throw error;
    }
  }
}

/** Thrown inside a transaction to roll it back; the caller re-reads and tries again. */
export class Raced extends Error {}

/** The hold lifetime in seconds: 0 or absent means the default; otherwise 1 to 86,400. */
export function holdTtl(ttlSeconds: number | undefined, ttlDefault: number): number {
  const ttl = ttlSeconds === undefined || ttlSeconds === 0 ? ttlDefault : ttlSeconds;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > 86_400)
    throw invalidArgument('ttl_seconds', 'ttl_seconds must be from 1 to 86400');
  return ttl;
}

/** The refusal of a hold that `balance - held` cannot cover. */
export function insufficientCredit(wallet: { balance: bigint; held: bigint }, amount: bigint): SvcError {
  const available = wallet.balance - wallet.held;
  return new SvcError(
    'insufficient_credit',
    `Insufficient credit: this call needs up to ${amount.toString()} credits but the wallet has ${available.toString()} available (balance ${wallet.balance.toString()}, held ${wallet.held.toString()})`,
    {
      details: {
        balance: Number(wallet.balance),
        held: Number(wallet.held),
        available: Number(available),
        required: Number(amount),
      },
    },
  );
}

/**
 * The most a settle may charge: `amount`, cut to `limit` (a hold's amount, or what a key's caps
 * have left; null: no limit), never below 0. SPEC §6: the hold is the most a call can cost.
 */
export function chargeBound(amount: bigint, limit: bigint | null): bigint {
  if (limit === null || amount <= limit) return amount;
  return limit < 0n ? 0n : limit;
}

/** A hold refused for credit or for its key's cap (a retry of a stored hold answers with it instead). */
export function isRefusal(error: unknown): boolean {
  return error instanceof SvcError && (error.code === 'insufficient_credit' || error.code === 'key_cap_exceeded');
}

/**
 * The wallet over SQL. Every write is a short transaction that first changes the wallet row with
 * a conditional UPDATE (so the row lock orders concurrent writers and the condition, not a
 * prior read, decides), then writes the hold and ledger rows. Nothing slow happens while a
 * transaction is open.
 */
export function createWalletService(options: WalletServiceOptions): WalletService {
  const { store, now } = options;
  const db = store.db;
  const ttlDefault = options.holdTtlSeconds ?? 600;

  const inTransaction = <T>(work: (trx: Transaction<Database>) => Promise<T>): Promise<T> =>
    retryingTransaction(store, work);

  // The usage record a settle or release carries, written through `q` (its transaction) at
  // `cost`: the record when it was written (to announce once committed), undefined for none or
  // a duplicate.
  async function writeUsage(
    q: QueryRunner,
    usage: UsageEntry | undefined,
    cost: bigint,
  ): Promise<UsageRecord | undefined> {
    if (usage === undefined) return undefined;
    const record: UsageRecord = Object.assign({}, usage, { cost });
    const [written] = await insertUsage(q, [usageRow(record, now())]);
    return written === true ? record : undefined;
  }

  const announce = (record: UsageRecord | undefined): void => {
    if (record !== undefined) options.onRecorded?.(record);
  };

  async function readWallet(q: Kysely<Database>, accountId: string): Promise<WalletView> {
    const row = await q
      .selectFrom('wallets')
      .select(['balance', 'held'])
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (row === undefined)
      throw new SvcError('not_found', `No wallet for account ${JSON.stringify(accountId)}`, { param: 'account_id' });
    return { accountId, balance: row.balance, held: row.held, currency: 'toman' };
  }

  async function appendLedger(
    trx: Transaction<Database>,
    entry: { accountId: string; kind: LedgerKind; amount: bigint; requestId: string; reference: string },
  ): Promise<{ entry: LedgerEntryView; wallet: WalletView }> {
    const wallet = await readWallet(trx, entry.accountId);
    const created = now();
    const result = await trx
      .insertInto('ledger_entries')
      .values({
        account_id: entry.accountId,
        kind: entry.kind,
        amount: entry.amount,
        balance_after: wallet.balance,
        request_id: entry.requestId,
        reference: entry.reference,
        created_at: BigInt(created),
      })
      .executeTakeFirstOrThrow();
    const view: LedgerEntryView = {
      id: `le_${(result.insertId ?? 0n).toString()}`,
      accountId: entry.accountId,
      kind: entry.kind,
      amount: entry.amount,
      balanceAfter: wallet.balance,
      requestId: entry.requestId,
      reference: entry.reference,
      createdAt: new Date(created),
    };
    return { entry: view, wallet };
  }

  async function findEntry(
    accountId: string,
    requestId: string,
    kind: LedgerKind,
  ): Promise<LedgerEntryView | undefined> {
    const row = await db
      .selectFrom('ledger_entries')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('request_id', '=', requestId)
      .where('kind', '=', kind)
      .executeTakeFirst();
    return row === undefined ? undefined : toLedgerView(row);
  }

  async function findHold(accountId: string, requestId: string): Promise<Selectable<HoldsTable> | undefined> {
    return db
      .selectFrom('holds')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('request_id', '=', requestId)
      .executeTakeFirst();
  }

  /** Frees a hold; with `expiredBefore` (the reaper) only while it is still past that expiry. */
  async function release(
    input: { accountId: string; requestId: string; usage?: UsageEntry | undefined },
    expiredBefore?: number,
  ): Promise<{ wallet: WalletView; closed: boolean }> {
    checkRequestId(input.requestId);
    const to = expiredBefore === undefined ? 'released' : 'expired';
    for (let round = 0; ; round++) {
      if (round === MAX_ROUNDS) throw new Error(`release of ${input.requestId} kept racing`);
      const hold = await findHold(input.accountId, input.requestId);
      // A hold whose call extended it since the reaper listed it is alive again: left alone.
      if (
        hold === undefined ||
        hold.status !== 'held' ||
        (expiredBefore !== undefined && hold.expires_at >= BigInt(expiredBefore))
      ) {
        announce(await writeUsage(db, input.usage, 0n));
        return { wallet: await readWallet(db, input.accountId), closed: false };
      }
      try {
        const { wallet, recorded } = await inTransaction(async (trx) => {
          const freed = await trx
            .updateTable('wallets')
            .set({ held: sql<bigint>`held - ${hold.amount}`, updated_at: BigInt(now()) })
            .where('account_id', '=', hold.account_id)
            .where('held', '>=', hold.amount)
            .executeTakeFirst();
          // Fewer credits held than this hold: another process released or settled it since
          // we read it. Roll back and look again.
          if (freed.numUpdatedRows !== 1n) throw new Raced();
          let close = trx
            .updateTable('holds')
            .set({ status: to })
            .where('id', '=', hold.id)
            .where('status', '=', 'held');
          if (expiredBefore !== undefined) close = close.where('expires_at', '<', BigInt(expiredBefore));
          const closed = await close.executeTakeFirst();
          if (closed.numUpdatedRows !== 1n) throw new Raced();
          await closeCap(trx, hold, hold.amount, 0n);
          const recorded = await writeUsage(trx, input.usage, 0n);
          return { wallet: await readWallet(trx, hold.account_id), recorded };
        });
        announce(recorded);
        return { wallet, closed: true };
      } catch (error) {
        if (error instanceof Raced) continue;
        throw error;
      }
    }
  }

  return {
    get: (accountId) => readWallet(db, accountId),

    async ledger(accountId, limit, beforeSeq) {
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
        throw invalidArgument('limit', 'limit must be an integer from 1 to 1000');
      await readWallet(db, accountId);
      let query = db.selectFrom('ledger_entries').selectAll().where('account_id', '=', accountId);
      if (beforeSeq !== undefined) query = query.where('seq', '<', beforeSeq);
      const rows = await query.orderBy('seq', 'desc').limit(limit).execute();
      return rows.map(toLedgerView);
    },

    async topUp({ accountId, amount, reference = '', requestId }) {
      checkAmount(amount, 'amount', false);
      if (reference.length > 200) throw invalidArgument('reference', 'reference must be at most 200 characters');
      checkPlainText('reference', reference);
      const id = requestId ?? `topup_${randomBase62(20)}`;
      checkRequestId(id);
      try {
        return await inTransaction(async (trx) => {
          const updated = await trx
            .updateTable('wallets')
            .set({ balance: sql<bigint>`balance + ${amount}`, updated_at: BigInt(now()) })
            .where('account_id', '=', accountId)
            .executeTakeFirst();
          if (updated.numUpdatedRows !== 1n)
            throw new SvcError('not_found', `No account ${JSON.stringify(accountId)}`, { param: 'account_id' });
          return appendLedger(trx, { accountId, kind: 'topup', amount, requestId: id, reference });
        });
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        // A retried top-up with the same request id: the first one stands.
        const entry = await findEntry(accountId, id, 'topup');
        if (entry === undefined) throw error;
        return { entry, wallet: await readWallet(db, accountId), alreadyApplied: true };
      }
    },

    async hold({ accountId, requestId, amount, ttlSeconds, lineageId, clientRequestId }) {
      checkAmount(amount, 'amount', false);
      checkRequestId(requestId);
      const ttl = holdTtl(ttlSeconds, ttlDefault);
      for (let round = 0; ; round++) {
        if (round === MAX_ROUNDS) throw new Error(`hold of ${requestId} kept racing`);
        const created = now();
        const row = {
          id: newTimeOrderedId('hold', created),
          account_id: accountId,
          request_id: requestId,
          amount,
          status: 'held' as const,
          settled_amount: null,
          expires_at: BigInt(created + ttl * 1000),
          created_at: BigInt(created),
          lineage_id: null as string | null,
          client_request_id: clientRequestId ?? null,
        };
        try {
          return await inTransaction(async (trx) => {
            const reserved = await trx
              .updateTable('wallets')
              .set({ held: sql<bigint>`held + ${amount}`, updated_at: BigInt(created) })
              .where('account_id', '=', accountId)
              .where(sql<boolean>`balance - held >= ${amount}`)
              .executeTakeFirst();
            if (reserved.numUpdatedRows !== 1n) {
              throw insufficientCredit(await readWallet(trx, accountId), amount);
            }
            // The key's caps are read here, under the wallet row lock, not from any cache: a
            // lowered cap stops the next hold on every core.
            if (lineageId !== undefined && (await reserveCap(trx, store.dialect, lineageId, amount, created)))
              row.lineage_id = lineageId;
            await trx.insertInto('holds').values(row).execute();
            return { hold: toHoldView(row), wallet: await readWallet(trx, accountId) };
          });
        } catch (error) {
          if (error instanceof CapRowRaced) continue;
          // A retried hold (same request id) returns the first one and reserves nothing more;
          // this is checked only on the failure paths, so a fresh hold costs no extra read.
          if (!isUniqueViolation(error) && !isRefusal(error)) throw error;
          const first = await findHold(accountId, requestId);
          if (first === undefined) throw error;
          return { hold: toHoldView(first), wallet: await readWallet(db, accountId) };
        }
      }
    },

    async settle({ accountId, requestId, amount, usage }): Promise<SettleResult> {
      checkAmount(amount, 'amount', true);
      checkRequestId(requestId);
      for (let round = 0; ; round++) {
        if (round === MAX_ROUNDS) throw new Error(`settle of ${requestId} kept racing`);
        const hold = await findHold(accountId, requestId);
        if (hold?.status === 'settled') {
          const entry = (await findEntry(accountId, requestId, 'charge')) ?? null;
          return { entry, wallet: await readWallet(db, accountId), charged: entry === null ? 0n : -entry.amount };
        }
        if (amount === 0n) {
          if (hold === undefined) {
            announce(await writeUsage(db, usage, 0n));
            return { entry: null, wallet: await readWallet(db, accountId), charged: 0n };
          }
          const { wallet } = await release({ accountId, requestId, usage });
          return { entry: null, wallet, charged: 0n };
        }
        const reserved = hold?.status === 'held' ? hold.amount : 0n;
        try {
          const { settled, recorded } = await inTransaction(async (trx) => {
            const stamp = BigInt(now());
            // The hold is the most a call can cost (SPEC §6): usage an upstream reports beyond it
            // is charged at the hold, to the wallet and to every cap of the key.
            let bound = hold === undefined ? amount : chargeBound(amount, hold.amount);
            if (hold !== undefined && reserved === 0n && hold.lineage_id !== null) {
              // A hold that expired or was released reserves nothing in its key's caps any more
              // (another call may have taken that room): the charge also fits what they have left,
              // read under the wallet row's lock, taken first as by every writer of the counters.
              await trx.updateTable('wallets').set({ updated_at: stamp }).where('account_id', '=', accountId).execute();
              bound = chargeBound(bound, await capRoom(trx, store.dialect, hold));
            }
            let charged = bound;
            const full = await trx
              .updateTable('wallets')
              .set({
                balance: sql<bigint>`balance - ${bound}`,
                held: sql<bigint>`held - ${reserved}`,
                updated_at: stamp,
              })
              .where('account_id', '=', accountId)
              .where(sql<boolean>`balance - held + ${reserved} >= ${bound}`)
              .executeTakeFirst();
            if (full.numUpdatedRows !== 1n) {
              // Only a settle without an open hold gets here (an open hold covers its bound): the
              // charge is cut to the free credit, never into other holds, never below 0.
              let q = trx.selectFrom('wallets').select(['balance', 'held']).where('account_id', '=', accountId);
              if (store.dialect === 'mysql') q = q.forUpdate();
              const w = await q.executeTakeFirst();
              if (w === undefined)
                throw new SvcError('not_found', `No account ${JSON.stringify(accountId)}`, { param: 'account_id' });
              const room = w.balance - w.held + reserved;
              charged = room < 0n ? 0n : room < bound ? room : bound;
              await trx
                .updateTable('wallets')
                .set({
                  balance: sql<bigint>`balance - ${charged}`,
                  held: sql<bigint>`held - ${reserved}`,
                  updated_at: stamp,
                })
                .where('account_id', '=', accountId)
                .execute();
            }
            if (hold !== undefined) {
              const closed = await trx
                .updateTable('holds')
                .set({ status: 'settled', settled_amount: charged })
                .where('id', '=', hold.id)
                .where('status', '=', hold.status)
                .executeTakeFirst();
              if (closed.numUpdatedRows !== 1n) throw new Raced();
              await closeCap(trx, hold, reserved, charged);
            }
            // The call's usage record commits with its charge, or neither does.
            const recorded = await writeUsage(trx, usage, charged);
            if (charged === 0n)
              return { settled: { entry: null, wallet: await readWallet(trx, accountId), charged }, recorded };
            const written = await appendLedger(trx, {
              accountId,
              kind: 'charge',
              amount: -charged,
              requestId,
              reference: '',
            });
            return { settled: { ...written, charged }, recorded };
          });
          announce(recorded);
          return settled;
        } catch (error) {
          if (error instanceof Raced) continue;
          if (!isUniqueViolation(error)) throw error;
          // Charged already by a concurrent settle of the same request id: loop to report it.
          const entry = await findEntry(accountId, requestId, 'charge');
          if (entry === undefined) throw error;
          return { entry, wallet: await readWallet(db, accountId), charged: -entry.amount };
        }
      }
    },

    release: async ({ accountId, requestId, usage }) => ({
      wallet: (await release({ accountId, requestId, usage })).wallet,
    }),

    async extend({ accountId, requestId, ttlSeconds }) {
      checkRequestId(requestId);
      const ttl = holdTtl(ttlSeconds, ttlDefault);
      for (let attempt = 1; ; attempt++) {
        try {
          const result = await db
            .updateTable('holds')
            .set({ expires_at: BigInt(now() + ttl * 1000) })
            .where('account_id', '=', accountId)
            .where('request_id', '=', requestId)
            .where('status', '=', 'held')
            .executeTakeFirst();
          return result.numUpdatedRows === 1n;
        } catch (error) {
          if (!isRetryable(error) || attempt >= MAX_ATTEMPTS) throw error;
          await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
        }
      }
    },

    async reapExpired(at = now()) {
      const expired = await db
        .selectFrom('holds')
        .select(['account_id', 'request_id'])
        .where('status', '=', 'held')
        .where('expires_at', '<', BigInt(at))
        .limit(1000)
        .execute();
      let reaped = 0;
      for (const hold of expired)
        if ((await release({ accountId: hold.account_id, requestId: hold.request_id }, at)).closed) reaped++;
      return reaped;
    },
  };
}
