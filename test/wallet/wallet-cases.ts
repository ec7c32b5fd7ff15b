import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { createAccountService } from '../../core/accounts/service';
import type { SvcError } from '../../core/errors';
import { migrate, openStore, type Store } from '../../core/store/db';
import type { WalletServiceOptions } from '../../core/wallet/service';
import type { WalletService } from '../../core/wallet/types';
import { createTestDatabase, type TestDatabase } from '../helpers/database';

/** A wallet implementation under test. */
export type WalletFactory = (options: WalletServiceOptions) => WalletService;

/**
 * The behaviour every WalletService must have (SPEC §5, §6), run against a fresh database of
 * the suite's dialect. Call inside a `describe`.
 */
export function walletCases(factory: WalletFactory): void {
  let database: TestDatabase;
  let store: Store;
  let wallet: WalletService;
  let clock = Date.now();
  const now = (): number => clock;
  let accountId: string;

  async function ledgerSum(id: string): Promise<bigint> {
    const row = await store.db
      .selectFrom('ledger_entries')
      .select(sql<bigint | null>`sum(amount)`.as('total'))
      .where('account_id', '=', id)
      .executeTakeFirstOrThrow();
    return BigInt(row.total ?? 0n);
  }

  before(async function () {
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    wallet = factory({ store, now, holdTtlSeconds: 60 });
  });

  beforeEach(async function () {
    accountId = (await createAccountService({ store, now }).create('wallet test')).id;
  });

  after(async function () {
    await store.close();
    await database.drop();
  });

  it('starts empty, tops up, and keeps balance equal to the ledger sum', async function () {
    assert.deepEqual(await wallet.get(accountId), { accountId, balance: 0n, held: 0n, currency: 'toman' });
    const { entry, wallet: after } = await wallet.topUp({ accountId, amount: 1000n, reference: 'invoice 7' });
    assert.equal(after.balance, 1000n);
    assert.equal(entry.kind, 'topup');
    assert.equal(entry.amount, 1000n);
    assert.equal(entry.balanceAfter, 1000n);
    assert.equal(entry.reference, 'invoice 7');
    assert.equal(await ledgerSum(accountId), 1000n);
  });

  it('a retried top-up with the same request id credits once', async function () {
    await wallet.topUp({ accountId, amount: 500n, requestId: 'pay-1' });
    const again = await wallet.topUp({ accountId, amount: 500n, requestId: 'pay-1' });
    assert.equal(again.wallet.balance, 500n);
    assert.equal((await wallet.ledger(accountId, 10)).length, 1);
  });

  it('refuses bad amounts and unknown accounts with clear errors', async function () {
    for (const amount of [0n, -5n, 10n ** 18n]) {
      await assert.rejects(
        wallet.topUp({ accountId, amount }),
        (e: SvcError) => e.code === 'invalid_argument' && e.param === 'amount',
      );
    }
    await assert.rejects(wallet.topUp({ accountId: 'acc_nope', amount: 5n }), (e: SvcError) => e.code === 'not_found');
    await assert.rejects(
      wallet.hold({ accountId, requestId: '', amount: 5n }),
      (e: SvcError) => e.param === 'request_id',
    );
    await assert.rejects(wallet.ledger(accountId, 0), (e: SvcError) => e.param === 'limit');
    assert.equal((await wallet.ledger(accountId, 10)).length, 0);
  });

  it('holds only what balance - held covers, and says how much is missing', async function () {
    await wallet.topUp({ accountId, amount: 100n });
    await wallet.hold({ accountId, requestId: 'r1', amount: 60n });
    await assert.rejects(wallet.hold({ accountId, requestId: 'r2', amount: 41n }), (e: SvcError) => {
      assert.equal(e.code, 'insufficient_credit');
      assert.deepEqual(e.details, { balance: 100, held: 60, available: 40, required: 41 });
      return true;
    });
    const w = await wallet.hold({ accountId, requestId: 'r3', amount: 40n });
    assert.equal(w.wallet.held, 100n);
    // A retried hold returns the same hold and reserves nothing more.
    const again = await wallet.hold({ accountId, requestId: 'r3', amount: 40n });
    assert.equal(again.hold.id, w.hold.id);
    assert.equal(again.wallet.held, 100n);
  });

  it('settles below and at the hold, and above it charges the hold: the most a call can cost', async function () {
    await wallet.topUp({ accountId, amount: 100n });
    await wallet.hold({ accountId, requestId: 'low', amount: 30n });
    const low = await wallet.settle({ accountId, requestId: 'low', amount: 10n });
    assert.equal(low.charged, 10n);
    assert.deepEqual([low.wallet.balance, low.wallet.held], [90n, 0n]);

    await wallet.hold({ accountId, requestId: 'other', amount: 50n });
    await wallet.hold({ accountId, requestId: 'high', amount: 20n });
    // 90 balance, 70 held, 20 free: "high" is charged its own 20 and no more, however absurd the usage.
    const high = await wallet.settle({ accountId, requestId: 'high', amount: 1_000_000_000_000n });
    assert.equal(high.charged, 20n);
    assert.equal(high.entry?.amount, -20n);
    assert.deepEqual([high.wallet.balance, high.wallet.held], [70n, 50n]);
    const other = await wallet.settle({ accountId, requestId: 'other', amount: 50n });
    assert.equal(other.charged, 50n);
    assert.deepEqual([other.wallet.balance, other.wallet.held], [20n, 0n]);
    // A settle with no hold (a service's direct charge over the wallet API) takes the free credit.
    const unheld = await wallet.settle({ accountId, requestId: 'unheld', amount: 500n });
    assert.equal(unheld.charged, 20n);
    assert.deepEqual([unheld.wallet.balance, unheld.wallet.held], [0n, 0n]);
    assert.equal(await ledgerSum(accountId), 0n);
  });

  it('charges a retried settle once', async function () {
    await wallet.topUp({ accountId, amount: 100n });
    await wallet.hold({ accountId, requestId: 'once', amount: 30n });
    const results = await Promise.all(
      [1, 2, 3, 4].map(() => wallet.settle({ accountId, requestId: 'once', amount: 25n })),
    );
    for (const r of results) assert.equal(r.charged, 25n);
    const again = await wallet.settle({ accountId, requestId: 'once', amount: 25n });
    assert.equal(again.charged, 25n);
    assert.equal(again.entry?.amount, -25n);
    assert.deepEqual(await wallet.get(accountId), { accountId, balance: 75n, held: 0n, currency: 'toman' });
    assert.equal((await wallet.ledger(accountId, 10)).filter((e) => e.kind === 'charge').length, 1);
  });

  it('release frees the hold and charges nothing; settle 0 is a release', async function () {
    await wallet.topUp({ accountId, amount: 100n });
    await wallet.hold({ accountId, requestId: 'a', amount: 30n });
    await wallet.hold({ accountId, requestId: 'b', amount: 30n });
    assert.equal((await wallet.release({ accountId, requestId: 'a' })).wallet.held, 30n);
    assert.equal((await wallet.release({ accountId, requestId: 'a' })).wallet.held, 30n);
    const zero = await wallet.settle({ accountId, requestId: 'b', amount: 0n });
    assert.equal(zero.charged, 0n);
    assert.equal(zero.entry, null);
    assert.deepEqual(await wallet.get(accountId), { accountId, balance: 100n, held: 0n, currency: 'toman' });
    assert.equal(await ledgerSum(accountId), 100n);
  });

  it('the reaper releases expired holds, and a late settle charges at most the hold and the free credit', async function () {
    await wallet.topUp({ accountId, amount: 100n });
    await wallet.hold({ accountId, requestId: 'crashed', amount: 70n, ttlSeconds: 5 });
    await wallet.hold({ accountId, requestId: 'alive', amount: 10n, ttlSeconds: 600 });
    clock += 6000;
    assert.ok((await wallet.reapExpired()) >= 1);
    const w = await wallet.get(accountId);
    assert.deepEqual([w.balance, w.held], [100n, 10n]);
    // The freed credit was taken by another call meanwhile: 65 free is left.
    await wallet.hold({ accountId, requestId: 'later', amount: 25n, ttlSeconds: 600 });
    const late = await wallet.settle({ accountId, requestId: 'crashed', amount: 95n });
    assert.equal(late.charged, 65n);
    assert.deepEqual([late.wallet.balance, late.wallet.held], [35n, 35n]);
    assert.equal(await ledgerSum(accountId), 35n);
    // With the free credit there, the hold (70) still bounds it.
    await wallet.topUp({ accountId, amount: 1000n });
    await wallet.hold({ accountId, requestId: 'crashed-2', amount: 70n, ttlSeconds: 5 });
    clock += 6000;
    assert.ok((await wallet.reapExpired()) >= 1);
    assert.equal((await wallet.settle({ accountId, requestId: 'crashed-2', amount: 95n })).charged, 70n);
  });

  it('admits exactly what the balance covers under 500 concurrent holds', async function () {
    await wallet.topUp({ accountId, amount: 1000n });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 500 }, (_, i) => wallet.hold({ accountId, requestId: `c${i}`, amount: 10n })),
    );
    const admitted = outcomes.filter((o) => o.status === 'fulfilled').length;
    assert.equal(admitted, 100);
    for (const o of outcomes)
      if (o.status === 'rejected') assert.equal((o.reason as SvcError).code, 'insufficient_credit');
    await Promise.all(
      outcomes.map((o, i) =>
        o.status === 'fulfilled'
          ? i % 2 === 0
            ? wallet.settle({ accountId, requestId: `c${i}`, amount: 7n })
            : wallet.release({ accountId, requestId: `c${i}` })
          : undefined,
      ),
    );
    const w = await wallet.get(accountId);
    assert.equal(w.held, 0n);
    assert.ok(w.balance >= 0n);
    assert.equal(w.balance, await ledgerSum(accountId));
  });
}
