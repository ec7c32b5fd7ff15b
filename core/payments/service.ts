import { sql, type Selectable, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { GatewayName, PaymentsConfig } from '../config/types';
import { SvcError, invalidArgument } from '../errors';
import { newId } from '../ids';
import { deadline } from '../net/deadline';
import { isUniqueViolation, type Store } from '../store/db';
import type { Database, PaymentState, PaymentsTable } from '../store/schema';
import { retryingTransaction } from '../wallet/service';
import type { PaymentGateway, PaymentView, VerifyOutcome } from './types';

/*
 * Wallet top-ups through a payment gateway (SPEC §12, ../shared/ref/payments/gateways.md).
 *
 * A payment is `pending` from the moment it is created until a server-to-server verify decides
 * it: `paid` (credited), `failed` (cancelled, refused, the wrong amount) or `expired` (unpaid
 * after `expire_minutes`). Nothing the payer's browser brings back decides anything: the return
 * only names the gateway's reference, which finds the payment; its amount, account and status
 * come from the database and the gateway.
 *
 * Exactly once: the credit is one ledger entry (kind `topup`, the payment id as request id, the
 * receipt as reference) written in the same transaction as the UPDATE that moves the payment to
 * `paid`, conditional on it not being paid already; the ledger's unique (account, request id,
 * kind) backs that up, and unique (gateway, reference) and (gateway, receipt) make one gateway
 * session or receipt credit at most one payment. One verify at a time: whoever verifies (the
 * return, the reconciler, on any replica) first takes the payment's lease with a conditional
 * UPDATE; a second caller waits for the first to finish rather than calling the gateway too.
 * A lease outlives every timeout of one verify, and even two verifies at once credit once.
 */

/** Payments pending longer than this are verified again by the reconciler (SPEC §12). */
export const RECONCILE_AFTER_MS = 2 * 60_000;
/** Failed or expired payments are re-verified this often during their first day (a late payer, an early forged return). */
const RECHECK_EVERY_MS = 10 * 60_000;
const RECHECK_FOR_MS = 24 * 3_600_000;
const LIST_MAX = 200;

export interface PaymentServiceDeps {
  readonly store: Store;
  readonly logger: Logger;
  readonly now: () => number;
  /** `payments:`; absent: top-ups are off (every call says so). */
  readonly config: PaymentsConfig | undefined;
  readonly gateways: ReadonlyMap<GatewayName, PaymentGateway>;
  /** Called once for each payment this process moves into `state` (metrics). */
  readonly onState?: (gateway: GatewayName, state: PaymentState) => void;
  /** How long a waiting return polls for another verifier to finish (default 15 s). */
  readonly waitMs?: number;
}

export interface ReconcileReport {
  readonly verified: number;
  readonly paid: number;
  readonly expired: number;
}

function toView(row: Selectable<PaymentsTable>): PaymentView {
  return {
    id: row.id,
    accountId: row.account_id,
    gateway: row.gateway as GatewayName,
    amount: BigInt(row.amount),
    state: row.state,
    reference: row.reference ?? '',
    receipt: row.receipt ?? '',
    cardPan: row.card_pan ?? '',
    failure: row.failure ?? '',
    createdAt: new Date(Number(row.created_at)),
    paidAt: row.paid_at === null ? undefined : new Date(Number(row.paid_at)),
  };
}

/** Parses a top-up amount in toman: digits only (the console turns Persian digits and separators into these). */
export function parseToman(text: string, param = 'amount'): bigint {
  const t = text.trim();
  if (!/^\d{1,15}$/.test(t)) throw invalidArgument(param, 'The amount must be a whole number of toman, like 50000.');
  return BigInt(t);
}

export function createPaymentService(deps: PaymentServiceDeps) {
  const { store, logger, now } = deps;
  const db = store.db;
  const config = deps.config;
  const leaseMs = Math.max(30_000, ...[...(config?.gateways.values() ?? [])].map((g) => 3 * g.timeoutMs + 5_000));
  const waitMs = deps.waitMs ?? 15_000;
  const announce = (gateway: GatewayName, state: PaymentState): void => deps.onState?.(gateway, state);

  const inTransaction = <T>(work: (trx: Transaction<Database>) => Promise<T>): Promise<T> =>
    retryingTransaction(store, work);

  function enabled(): PaymentsConfig {
    if (config === undefined || deps.gateways.size === 0)
      throw new SvcError('unavailable', 'Top-ups through a payment gateway are not configured on this server.');
    return config;
  }

  function gatewayOf(name: string): PaymentGateway {
    const gateway = deps.gateways.get(name as GatewayName);
    if (gateway === undefined) {
      const known = [...deps.gateways.keys()].join(', ') || 'none';
      throw invalidArgument(
        'gateway',
        `Unknown payment gateway ${JSON.stringify(name.slice(0, 40))} (configured: ${known}).`,
      );
    }
    return gateway;
  }

  async function read(id: string): Promise<Selectable<PaymentsTable> | undefined> {
    return db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Moves a pending payment into `state` (failed or expired); false when it was no longer pending. */
  async function close(row: Selectable<PaymentsTable>, state: 'failed' | 'expired', failure: string): Promise<boolean> {
    const updated = await db
      .updateTable('payments')
      .set({ state, failure: failure.slice(0, 300), lease_until: null, updated_at: BigInt(now()) })
      .where('id', '=', row.id)
      .where('state', '=', 'pending')
      .executeTakeFirst();
    const moved = updated.numUpdatedRows === 1n;
    if (moved) announce(row.gateway as GatewayName, state);
    return moved;
  }

  /**
   * The credit: the payment becomes `paid` and the wallet gains its amount, in one transaction,
   * or nothing happens (it was paid already, by whoever got there first).
   */
  async function credit(
    row: Selectable<PaymentsTable>,
    outcome: Extract<VerifyOutcome, { kind: 'paid' }>,
  ): Promise<void> {
    const at = BigInt(now());
    try {
      const moved = await inTransaction(async (trx) => {
        const updated = await trx
          .updateTable('payments')
          .set({
            state: 'paid',
            receipt: outcome.receipt === '' ? null : outcome.receipt,
            card_pan: outcome.cardPan === '' ? null : outcome.cardPan,
            failure: null,
            paid_at: at,
            lease_until: null,
            updated_at: at,
          })
          .where('id', '=', row.id)
          .where('state', '!=', 'paid')
          .executeTakeFirst();
        if (updated.numUpdatedRows !== 1n) return false;
        const amount = BigInt(row.amount);
        const wallet = await trx
          .updateTable('wallets')
          .set({ balance: sql<bigint>`balance + ${amount}`, updated_at: at })
          .where('account_id', '=', row.account_id)
          .executeTakeFirst();
        if (wallet.numUpdatedRows !== 1n) throw new Error(`payment ${row.id}: no wallet for account ${row.account_id}`);
        const balance = await trx
          .selectFrom('wallets')
          .select('balance')
          .where('account_id', '=', row.account_id)
          .executeTakeFirstOrThrow();
        await trx
          .insertInto('ledger_entries')
          .values({
            account_id: row.account_id,
            kind: 'topup',
            amount,
            balance_after: BigInt(balance.balance),
            request_id: row.id,
            reference: `${row.gateway} ${outcome.receipt || row.reference || ''}`.trim().slice(0, 200),
            created_at: at,
          })
          .execute();
        return true;
      });
      if (moved) {
        announce(row.gateway as GatewayName, 'paid');
        logger.info(
          {
            payment: row.id,
            account: row.account_id,
            gateway: row.gateway,
            amount: row.amount.toString(),
            receipt: outcome.receipt,
          },
          'payment credited',
        );
      }
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      const again = await read(row.id);
      if (again?.state === 'paid') return;
      // The gateway gave a receipt some other payment was credited under: never a second credit.
      logger.error(
        { payment: row.id, gateway: row.gateway, receipt: outcome.receipt, err: error },
        'payment verified with a receipt already credited to another payment; not credited',
      );
      await db
        .updateTable('payments')
        .set({
          state: 'failed',
          failure:
            'The gateway reported a receipt already used by another payment; nothing was credited. The operator has been told.',
          lease_until: null,
          updated_at: BigInt(now()),
        })
        .where('id', '=', row.id)
        .where('state', '!=', 'paid')
        .execute();
      announce(row.gateway as GatewayName, 'failed');
    }
  }

  /** Takes the payment's verify lease; false when another verifier holds it or it is paid. */
  async function claim(id: string): Promise<boolean> {
    const t = now();
    const updated = await db
      .updateTable('payments')
      .set({
        lease_until: BigInt(t + leaseMs),
        verify_attempts: sql<number>`verify_attempts + 1`,
        updated_at: BigInt(t),
      })
      .where('id', '=', id)
      .where('state', '!=', 'paid')
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', BigInt(t))]))
      .executeTakeFirst();
    return updated.numUpdatedRows === 1n;
  }

  async function release(id: string): Promise<void> {
    await db
      .updateTable('payments')
      .set({ lease_until: null })
      .where('id', '=', id)
      .where('state', '!=', 'paid')
      .execute();
  }

  /**
   * Verifies a payment with its gateway and applies the answer. `returned`: the payer came back
   * from the gateway, so an unpaid answer is final (the session is over); for the reconciler it
   * is final only once the payment is older than `expire_minutes`.
   */
  async function settle(row: Selectable<PaymentsTable>, returned: boolean): Promise<'busy' | 'done'> {
    if (row.state === 'paid') return 'done';
    const cfg = enabled();
    const gateway = deps.gateways.get(row.gateway as GatewayName);
    const expired = now() - Number(row.created_at) > cfg.expireMinutes * 60_000;
    if (gateway === undefined || row.reference === null) {
      // A gateway no longer configured, or a session the gateway never opened.
      if (expired && row.state === 'pending') await close(row, 'expired', 'The payment was not completed in time.');
      return 'done';
    }
    if (!(await claim(row.id))) return 'busy';
    let outcome: VerifyOutcome;
    const lease = deadline(leaseMs - 1_000);
    try {
      outcome = await gateway.verify({ reference: row.reference, amountRial: BigInt(row.amount) * 10n }, lease.signal);
    } catch (error) {
      outcome = { kind: 'unknown', detail: String(error) };
    } finally {
      lease.clear();
    }
    try {
      switch (outcome.kind) {
        case 'paid':
          await credit(row, outcome);
          break;
        case 'mismatch':
          logger.error(
            { payment: row.id, gateway: row.gateway, detail: outcome.detail },
            'payment verified for another amount; not credited',
          );
          if (row.state === 'pending')
            await close(row, 'failed', `The gateway reports that ${outcome.message}; nothing was credited.`);
          break;
        case 'unpaid':
          logger.info({ payment: row.id, gateway: row.gateway, detail: outcome.detail }, 'payment not paid');
          if (row.state === 'pending' && returned)
            await close(row, 'failed', `The gateway reports that ${outcome.message}; nothing was charged.`);
          else if (row.state === 'pending' && expired)
            await close(row, 'expired', 'The payment was not completed in time; nothing was charged.');
          break;
        case 'unknown':
          // Stays pending: the reconciler asks again (a 100 lost on the way comes back as 101 / 201).
          logger.warn(
            { payment: row.id, gateway: row.gateway, detail: outcome.detail },
            'payment verify got no usable answer',
          );
          if (row.state === 'pending' && expired && !returned)
            await close(row, 'expired', 'The gateway did not confirm the payment in time; nothing was credited.');
          break;
      }
    } finally {
      await release(row.id);
    }
    return 'done';
  }

  /** Settles, or (another replica verifying it now) waits for that verifier, then answers the payment as it is. */
  async function settleOrWait(id: string, returned: boolean): Promise<PaymentView> {
    const deadline = now() + waitMs;
    for (;;) {
      const row = await read(id);
      if (row === undefined) throw new SvcError('not_found', 'There is no such payment.', { param: 'payment_id' });
      if ((await settle(row, returned)) === 'done' || now() >= deadline) {
        const after = await read(id);
        return toView(after ?? row);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  return {
    /** What the top-up form offers: the gateways and the bounds; undefined when top-ups are off. */
    offer(): { gateways: GatewayName[]; minToman: bigint; maxToman: bigint; origins: string[] } | undefined {
      if (config === undefined || deps.gateways.size === 0) return undefined;
      const origins = [...config.gateways.values()]
        .filter((g) => deps.gateways.has(g.name))
        .map((g) => new URL(g.baseUrl).origin);
      return {
        gateways: [...deps.gateways.keys()],
        minToman: config.minToman,
        maxToman: config.maxToman,
        origins: [...new Set(origins)],
      };
    },

    /**
     * Creates a payment and opens its session at the gateway: the payer goes to `redirectUrl`.
     * A refusal (or no answer) leaves the payment `failed` and throws with plain words.
     */
    async start(input: {
      accountId: string;
      gateway: string;
      amount: bigint;
    }): Promise<{ payment: PaymentView; redirectUrl: string }> {
      const cfg = enabled();
      const gateway = gatewayOf(input.gateway);
      if (input.amount < cfg.minToman || input.amount > cfg.maxToman)
        throw invalidArgument(
          'amount',
          `The amount must be from ${cfg.minToman.toLocaleString('en-US')} to ${cfg.maxToman.toLocaleString('en-US')} toman.`,
        );
      const wallet = await db
        .selectFrom('wallets')
        .select('account_id')
        .where('account_id', '=', input.accountId)
        .executeTakeFirst();
      if (wallet === undefined) throw new SvcError('not_found', 'There is no such account.', { param: 'account_id' });
      const at = BigInt(now());
      const row: Selectable<PaymentsTable> = {
        id: newId('pay'),
        account_id: input.accountId,
        gateway: gateway.name,
        amount: input.amount,
        state: 'pending',
        reference: null,
        receipt: null,
        card_pan: null,
        failure: null,
        lease_until: null,
        verify_attempts: 0,
        created_at: at,
        updated_at: at,
        paid_at: null,
      };
      await db.insertInto('payments').values(row).execute();
      announce(gateway.name, 'pending');
      const callbackUrl = `${cfg.publicUrl}/console/payments/${gateway.name}/return`;
      let outcome;
      const lease = deadline(leaseMs);
      try {
        outcome = await gateway.request(
          { paymentId: row.id, amountRial: input.amount * 10n, callbackUrl, description: `svc top-up ${row.id}` },
          lease.signal,
        );
      } catch (error) {
        outcome = { kind: 'unknown' as const, detail: String(error) };
      } finally {
        lease.clear();
      }
      if (outcome.kind !== 'opened') {
        const message =
          outcome.kind === 'refused'
            ? outcome.message
            : `The ${gateway.name === 'zarinpal' ? 'ZarinPal' : 'Zibal'} gateway could not be reached; nothing was charged. Try again in a moment.`;
        logger.warn({ payment: row.id, gateway: gateway.name, detail: outcome.detail }, 'payment request refused');
        await close(row, 'failed', message);
        throw new SvcError(outcome.kind === 'refused' ? 'upstream_error' : 'upstream_unavailable', message, {
          details: { payment_id: row.id },
        });
      }
      try {
        await db
          .updateTable('payments')
          .set({ reference: outcome.reference, updated_at: BigInt(now()) })
          .where('id', '=', row.id)
          .execute();
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        // A gateway that hands out a reference it gave before: that session may credit one payment only.
        logger.error(
          { payment: row.id, gateway: gateway.name, reference: outcome.reference },
          'gateway reused a payment reference',
        );
        const message = 'The gateway answered with a payment session already used; nothing was charged. Try again.';
        await close(row, 'failed', message);
        throw new SvcError('upstream_error', message, { details: { payment_id: row.id } });
      }
      return { payment: toView({ ...row, reference: outcome.reference }), redirectUrl: outcome.redirectUrl };
    },

    /**
     * The payer's return (`GET /console/payments/{gateway}/return?…`): finds the payment by the
     * gateway's reference in `query` (nothing else in it is believed), verifies it server to
     * server and credits it once. Answers the payment as it stands after.
     */
    async completeReturn(input: { gateway: string; query: ReadonlyMap<string, string> }): Promise<PaymentView> {
      enabled();
      const gateway = gatewayOf(input.gateway);
      const reference = gateway.referenceOf(input.query);
      if (reference === undefined)
        throw invalidArgument('reference', 'This return address carries no valid payment reference.');
      const row = await db
        .selectFrom('payments')
        .select('id')
        .where('gateway', '=', gateway.name)
        .where('reference', '=', reference)
        .executeTakeFirst();
      if (row === undefined)
        throw new SvcError('not_found', 'No payment of this server matches this return address.', {
          param: 'reference',
        });
      return settleOrWait(row.id, true);
    },

    async get(id: string): Promise<PaymentView> {
      const row = id.length <= 40 ? await read(id) : undefined;
      if (row === undefined) throw new SvcError('not_found', 'There is no such payment.', { param: 'payment_id' });
      return toView(row);
    },

    /** Newest first; `before` is the page token of the previous page's last payment. */
    async list(input: {
      accountId?: string;
      state?: PaymentState;
      limit?: number;
      pageToken?: string;
    }): Promise<{ payments: PaymentView[]; nextPageToken: string }> {
      const limit = input.limit ?? 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > LIST_MAX)
        throw invalidArgument('limit', `limit must be an integer from 1 to ${LIST_MAX}`);
      let q = db.selectFrom('payments').selectAll();
      if (input.accountId !== undefined) q = q.where('account_id', '=', input.accountId);
      if (input.state !== undefined) q = q.where('state', '=', input.state);
      if (input.pageToken !== undefined && input.pageToken !== '') {
        const m = /^(\d{1,16}):(pay_[0-9A-Za-z]{1,36})$/.exec(input.pageToken);
        if (m === null) throw invalidArgument('page_token', 'page_token is not one this server gave');
        const created = BigInt(m[1] ?? '0');
        const id = m[2] ?? '';
        q = q.where((eb) =>
          eb.or([eb('created_at', '<', created), eb.and([eb('created_at', '=', created), eb('id', '<', id)])]),
        );
      }
      const rows = await q
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(limit + 1)
        .execute();
      const page = rows.slice(0, limit);
      const last = page[page.length - 1];
      return {
        payments: page.map(toView),
        nextPageToken: rows.length > limit && last !== undefined ? `${last.created_at.toString()}:${last.id}` : '',
      };
    },

    /**
     * One reconciliation round (every minute in `svc serve` / `svc core`, on every replica at
     * once): payments pending over two minutes are verified again, and expire after
     * `expire_minutes`; failed and expired ones are re-verified every ten minutes for a day (a
     * payer who paid after a forged early return, a gateway that was down); ZarinPal's list of
     * paid-but-unverified sessions is read, and each of ours on it is verified.
     */
    async reconcile(signal: AbortSignal = new AbortController().signal): Promise<ReconcileReport> {
      if (config === undefined || deps.gateways.size === 0) return { verified: 0, paid: 0, expired: 0 };
      const t = now();
      const due = await db
        .selectFrom('payments')
        .selectAll()
        .where((eb) =>
          eb.or([
            eb.and([eb('state', '=', 'pending'), eb('created_at', '<', BigInt(t - RECONCILE_AFTER_MS))]),
            eb.and([
              eb('state', 'in', ['failed', 'expired']),
              eb('reference', 'is not', null),
              eb('created_at', '>', BigInt(t - RECHECK_FOR_MS)),
              eb('updated_at', '<', BigInt(t - RECHECK_EVERY_MS)),
            ]),
          ]),
        )
        .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', BigInt(t))]))
        .orderBy('created_at')
        .limit(500)
        .execute();
      const ids = new Set(due.map((row) => row.id));
      for (const gateway of deps.gateways.values()) {
        if (gateway.unverified === undefined) continue;
        try {
          const references = await gateway.unverified(signal);
          if (references.length === 0) continue;
          const ours = await db
            .selectFrom('payments')
            .selectAll()
            .where('gateway', '=', gateway.name)
            .where('reference', 'in', [...references])
            .where('state', '!=', 'paid')
            .execute();
          for (const row of ours) {
            if (ids.has(row.id)) continue;
            due.push(row);
            ids.add(row.id);
          }
        } catch (error) {
          logger.warn({ gateway: gateway.name, err: error }, 'reading the unverified payments failed');
        }
      }
      let verified = 0;
      let paid = 0;
      let expired = 0;
      for (const row of due) {
        if (signal.aborted) break;
        try {
          if ((await settle(row, false)) === 'busy') continue;
          verified++;
          const after = await read(row.id);
          if (after?.state === 'paid' && row.state !== 'paid') paid++;
          if (after?.state === 'expired' && row.state !== 'expired') expired++;
        } catch (error) {
          logger.error({ payment: row.id, err: error }, 'reconciling a payment failed');
        }
      }
      return { verified, paid, expired };
    },
  };
}

export type PaymentService = ReturnType<typeof createPaymentService>;
