import type { Selectable, Transaction } from 'kysely';
import { isUniqueViolation } from '../store/db';
import type { Database, HoldsTable } from '../store/schema';
import { insertUsage, usageRow, type UsageRecord } from '../usage/rows';
import { planBatch, type BatchOp, type BatchPlan } from './batch-plan';
import { answerBatch, type AnswerSources } from './batch-answer';
import { createBatchHints } from './batch-hints';
import { createBatchQueue, type Waiter as BatchWaiter } from './batch-queue';
import { CapRowRaced, loadCapBook } from './caps';
import {
  claimWallet,
  ledgerKeys,
  lockWallet,
  setWallet,
  writeRows,
  type AccountPlan,
  type LedgerKeys,
} from './batch-write';
import {
  checkAmount,
  checkRequestId,
  createWalletService,
  holdTtl,
  isRetryable,
  Raced,
  toLedgerView,
  type WalletServiceOptions,
} from './service';
import type { LedgerEntryView, WalletService } from './types';

export interface BatchedWalletServiceOptions extends WalletServiceOptions {
  /** Most operations decided in one transaction (default 500). */
  readonly maxBatch?: number;
  /**
   * Transactions of one lane (an account on MySQL, the whole database on SQLite) this process
   * runs at once (default 2). The second has begun and sent its wallet UPDATE while the first
   * commits, and goes on as soon as the row lock is free.
   */
  readonly maxInFlight?: number;
}

const MAX_ATTEMPTS = 8;

// The connection, not a statement, failed (mysql2 marks those fatal; socket errors carry the
// system's code): nothing one operation at a time would fix.
function isConnectionError(error: unknown): boolean {
  const e = error as { fatal?: unknown; code?: unknown } | null;
  if (e?.fatal === true) return true;
  return typeof e?.code === 'string' && /^(E[A-Z]+|PROTOCOL_[A-Z_]+)$/.test(e.code);
}

/** A queued operation with the account it is for. */
type Item = BatchOp & { readonly accountId: string };
type Waiter = BatchWaiter<Item>;

interface Decided {
  readonly plan: BatchPlan;
  readonly seqs: bigint[];
}

/**
 * The wallet of `createWalletService`, with the same answers, errors and idempotency, which
 * coalesces the holds, settles and releases of one account that arrive while one of its
 * transactions is in flight into the next transaction (on SQLite, of all accounts, each decided
 * on its own wallet row as below): take the wallet row (an UPDATE
 * conditional on the balances this process last wrote, or a locking read when another writer
 * came in between), decide every operation in arrival order, write one INSERT of holds, one
 * INSERT of ledger entries and one guarded UPDATE of closed holds, commit, answer. Correctness
 * rests on the row lock, those guards and the unique indexes, never on this process's memory,
 * so any number of cores may share the database. A batch that hits a unique index (a retry
 * racing its original) is rolled back and replayed one operation at a time through the
 * per-operation service.
 */
export function createBatchedWalletService(options: BatchedWalletServiceOptions): WalletService {
  const { store, now } = options;
  const db = store.db;
  const single = createWalletService(options);
  const ttlDefault = options.holdTtlSeconds ?? 600;
  const maxBatch = options.maxBatch ?? 500;
  const maxInFlight = options.maxInFlight ?? 2;
  const hints = createBatchHints();
  let keys: Promise<LedgerKeys> | undefined;
  const keysOnce = (): Promise<LedgerKeys> => {
    keys ??= ledgerKeys(store).catch((error: unknown) => {
      keys = undefined;
      throw error;
    });
    return keys;
  };
  const queue = createBatchQueue<Item>((_lane, batch) => runBatch(batch), {
    maxBatch,
    maxInFlight,
    gather: store.dialect === 'sqlite' ? 'immediate' : 'microtask',
  });
  // MySQL: one lane per account, whose batches then lock one wallet row each, so concurrent
  // batches never wait on each other in two orders. SQLite runs one transaction at a time
  // anyway: one lane for all, so that one commit serves the operations of many accounts.
  const submit = <T>(accountId: string, op: BatchOp): Promise<T> =>
    // Object.assign, not `{ ...op, accountId }`: a map of its own per object otherwise (prepare.ts).
    queue.submit(store.dialect === 'sqlite' ? '' : accountId, Object.assign({}, op, { accountId })) as Promise<T>;

  async function storedHolds(accountId: string, requestIds: string[]): Promise<Selectable<HoldsTable>[]> {
    return db
      .selectFrom('holds')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('request_id', 'in', requestIds)
      .execute();
  }

  async function storedCharges(accountId: string, requestIds: string[]): Promise<LedgerEntryView[]> {
    const rows = await db
      .selectFrom('ledger_entries')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('kind', '=', 'charge')
      .where('request_id', 'in', requestIds)
      .execute();
    return rows.map(toLedgerView);
  }

  const sources: AnswerSources = { storedHolds, storedCharges, wallet: (accountId) => single.get(accountId) };

  // The stored holds a batch's settles and releases close: the ones this process placed from
  // memory (the guarded UPDATE checks they are still open), the others read before the lock to
  // keep the lock short (the same guard catches what changes in between). A hold retried on a
  // remembered request id is read too, so that it answers with the hold as it is now. Fresh
  // holds read nothing: a request id stored already is caught by the unique index (and the
  // batch replayed one by one), or by the recheck of refusals.
  async function holdsFor(
    accountId: string,
    ops: readonly BatchOp[],
    useHints: boolean,
  ): Promise<Selectable<HoldsTable>[]> {
    const known = new Map<string, Selectable<HoldsTable>>();
    const unknown = new Set<string>();
    for (const op of ops) {
      const hint = useHints ? hints.hold(accountId, op.requestId) : undefined;
      if (op.kind === 'hold') {
        if (hint !== undefined) unknown.add(op.requestId);
      } else if (hint === undefined) unknown.add(op.requestId);
      else known.set(op.requestId, hint);
    }
    for (const id of unknown) known.delete(id);
    const read = unknown.size === 0 ? [] : await storedHolds(accountId, [...unknown]);
    return [...known.values(), ...read];
  }

  // One account's part of a batch, inside its transaction: its wallet row (and its caps'
  // counters) written, its other rows planned; the batch writes those of all its accounts
  // together (writeRows).
  async function decide(
    trx: Transaction<Database>,
    accountId: string,
    ops: readonly BatchOp[],
    stored: Selectable<HoldsTable>[],
    at: number,
  ): Promise<BatchPlan | undefined> {
    const stamp = BigInt(at);
    // Holds of capped keys and closes of capped holds need their lineages' counters, read under
    // the wallet row lock: such a batch always locks and reads first.
    const lineages = new Set<string>();
    for (const op of ops) if (op.kind === 'hold' && op.lineageId !== undefined) lineages.add(op.lineageId);
    const closing = stored.filter((row) => row.lineage_id !== null);
    if (lineages.size > 0 || closing.length > 0) {
      const locked = await lockWallet(trx, store.dialect, accountId, stamp);
      if (locked === undefined) return undefined;
      const book = await loadCapBook(trx, store.dialect, lineages, closing, at);
      const plan = planBatch(accountId, locked, stored, ops, at, book);
      hints.setBalances(accountId, plan.balances);
      await setWallet(trx, accountId, plan.balances, stamp);
      await book.write();
      return plan;
    }
    // Planned on the balances this process last planned (possibly still committing in the
    // batch ahead, whose lock this UPDATE then waits for): one statement instead of a locking
    // read and an UPDATE, whenever no other writer came in between.
    const guess = hints.balances(accountId);
    if (guess !== undefined) {
      const plan = planBatch(accountId, guess, stored, ops, at);
      const next = plan.balances;
      if (next.balance !== guess.balance || next.held !== guess.held) {
        hints.setBalances(accountId, next);
        if (await claimWallet(trx, accountId, guess, next, stamp)) return plan;
      }
    }
    const locked = await lockWallet(trx, store.dialect, accountId, stamp);
    if (locked === undefined) return undefined;
    const plan = planBatch(accountId, locked, stored, ops, at);
    hints.setBalances(accountId, plan.balances);
    if (plan.balances.balance !== locked.balance || plan.balances.held !== locked.held) {
      await setWallet(trx, accountId, plan.balances, stamp);
    }
    return plan;
  }

  // Answers never escape as unhandled rejections: every waiter is settled exactly once here.
  async function runBatch(batch: Waiter[]): Promise<void> {
    const groups = new Map<string, Waiter[]>();
    for (const w of batch) {
      const group = groups.get(w.op.accountId);
      if (group === undefined) groups.set(w.op.accountId, [w]);
      else group.push(w);
    }
    let decided: Map<string, Decided | undefined> | undefined;
    let written: UsageRecord[] = [];
    let at = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        const stored = new Map<string, Selectable<HoldsTable>[]>();
        for (const [accountId, group] of groups) {
          stored.set(
            accountId,
            await holdsFor(
              accountId,
              group.map((w) => w.op),
              attempt === 1,
            ),
          );
        }
        const numbering = await keysOnce();
        at = now();
        const stamp = at;
        ({ decided, written } = await db.transaction().execute(async (trx) => {
          const plans: AccountPlan[] = [];
          for (const [accountId, group] of groups) {
            const ops = group.map((w) => w.op);
            const plan = await decide(trx, accountId, ops, stored.get(accountId) ?? [], stamp);
            if (plan !== undefined) plans.push({ accountId, plan });
          }
          // The rows of every account's plan in one statement per table, whatever the number
          // of accounts (SQLite's single lane gathers many).
          const seqs = await writeRows(trx, numbering, plans, stamp);
          const out = new Map<string, Decided | undefined>();
          for (const accountId of groups.keys()) out.set(accountId, undefined);
          plans.forEach(({ accountId, plan }, i) => out.set(accountId, { plan, seqs: seqs[i] ?? [] }));
          // The usage records of every settle and release decided here, in one INSERT in the
          // same transaction as their charges: both commit or neither does.
          const usage = plans.flatMap(({ plan }) => plan.usage);
          const inserted = await insertUsage(
            trx,
            usage.map((r) => usageRow(r, stamp)),
          );
          return { decided: out, written: usage.filter((_r, i) => inserted[i] === true) };
        }));
        break;
      } catch (error) {
        for (const w of batch) {
          hints.forgetBalances(w.op.accountId);
          hints.forgetHold(w.op.accountId, w.op.requestId);
        }
        if ((error instanceof Raced || error instanceof CapRowRaced || isRetryable(error)) && attempt < MAX_ATTEMPTS) {
          if (!(error instanceof Raced)) await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
          continue;
        }
        if (error instanceof Raced || error instanceof CapRowRaced || isUniqueViolation(error)) return oneByOne(batch);
        // A usage record the database will not store fails the transaction of the whole batch:
        // one operation at a time, only the call it belongs to fails. Not when the connection
        // failed, where each operation would only fail again, one after another.
        const carriesUsage = batch.some((w) => w.op.kind !== 'hold' && w.op.usage !== undefined);
        if (batch.length > 1 && carriesUsage && !isConnectionError(error)) return oneByOne(batch);
        for (const w of batch) w.reject(error);
        return;
      }
    }
    // Committed: each record written is announced once, before its caller is answered.
    for (const record of written) options.onRecorded?.(record);
    for (const [accountId, group] of groups) {
      const done = decided.get(accountId);
      if (done === undefined) {
        hints.forgetBalances(accountId);
        await oneByOne(group);
        continue;
      }
      for (const row of done.plan.newHolds) if (row.status === 'held') hints.rememberHold(row);
      for (const w of group) if (w.op.kind !== 'hold') hints.forgetHold(accountId, w.op.requestId);
      await answerBatch(sources, accountId, group, done.plan, done.seqs, at);
    }
  }

  // The per-operation path, in arrival order: for a missing wallet (its exact errors) and for
  // batches that met a concurrent duplicate.
  async function oneByOne(batch: Waiter[]): Promise<void> {
    for (const w of batch) {
      try {
        w.resolve(await runSingle(w.op));
      } catch (error) {
        w.reject(error);
      }
    }
  }

  function runSingle(op: Item): Promise<unknown> {
    const { accountId } = op;
    switch (op.kind) {
      case 'hold':
        return single.hold({
          accountId,
          requestId: op.requestId,
          amount: op.amount,
          ttlSeconds: op.ttlSeconds,
          ...(op.lineageId === undefined ? {} : { lineageId: op.lineageId }),
          clientRequestId: op.clientRequestId,
        });
      case 'settle':
        return single.settle({
          accountId,
          requestId: op.requestId,
          amount: op.amount,
          ...(op.usage === undefined ? {} : { usage: op.usage }),
        });
      case 'release':
        return single.release({
          accountId,
          requestId: op.requestId,
          ...(op.usage === undefined ? {} : { usage: op.usage }),
        });
    }
  }

  return {
    get: (accountId) => single.get(accountId),
    ledger: (accountId, limit, beforeSeq) => single.ledger(accountId, limit, beforeSeq),
    topUp: (input) => single.topUp(input),
    reapExpired: (at) => single.reapExpired(at),
    // Touches only the hold row, never the wallet's: nothing to coalesce.
    extend: (input) => single.extend(input),

    async hold({ accountId, requestId, amount, ttlSeconds, lineageId, clientRequestId }) {
      checkAmount(amount, 'amount', false);
      checkRequestId(requestId);
      const ttl = holdTtl(ttlSeconds, ttlDefault);
      return submit(accountId, {
        kind: 'hold',
        requestId,
        amount,
        ttlSeconds: ttl,
        ...(lineageId === undefined ? {} : { lineageId }),
        clientRequestId,
      });
    },

    async settle({ accountId, requestId, amount, usage }) {
      checkAmount(amount, 'amount', true);
      checkRequestId(requestId);
      return submit(accountId, { kind: 'settle', requestId, amount, ...(usage === undefined ? {} : { usage }) });
    },

    async release({ accountId, requestId, usage }) {
      checkRequestId(requestId);
      return submit(accountId, { kind: 'release', requestId, ...(usage === undefined ? {} : { usage }) });
    },
  };
}
