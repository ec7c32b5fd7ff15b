import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { createAccountService } from '../../core/accounts/service';
import type { SvcError } from '../../core/errors';
import { createKeyService, type KeyService } from '../../core/keys/service';
import { migrate, openStore, type Store } from '../../core/store/db';
import { capPeriods } from '../../core/wallet/caps';
import type { WalletService } from '../../core/wallet/types';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import type { WalletFactory } from './wallet-cases';

/**
 * Per-key spend caps (issue 9) as every WalletService must keep them: a hold needs room under the
 * key lineage's caps and in the wallet, settle and release move the reservation exactly once, and
 * a lowered cap stops the next hold. Call inside a `describe`.
 */
export function capCases(factory: WalletFactory): void {
  let database: TestDatabase;
  let store: Store;
  let wallet: WalletService;
  let keys: KeyService;
  // Noon UTC, so that a few hours later is still the same day.
  let clock = Date.UTC(2026, 10, 22, 12);
  const now = (): number => clock;
  let accountId: string;

  async function spend(lineageId: string): Promise<Record<string, [bigint, bigint]>> {
    const rows = await store.db
      .selectFrom('key_spend')
      .select(['period', 'spent', 'held'])
      .where('lineage_id', '=', lineageId)
      .execute();
    return Object.fromEntries(rows.map((r) => [r.period, [r.spent, r.held]]));
  }

  async function ledger(): Promise<{ count: number; sum: bigint }> {
    const row = await store.db
      .selectFrom('ledger_entries')
      .select([sql<bigint | null>`sum(amount)`.as('total'), sql<bigint>`count(*)`.as('n')])
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    return { count: Number(row.n), sum: BigInt(row.total ?? 0n) };
  }

  before(async function () {
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    wallet = factory({ store, now, holdTtlSeconds: 60 });
    keys = createKeyService({ store, now });
  });

  beforeEach(async function () {
    clock = Date.UTC(2026, 10, 22, 12);
    accountId = (await createAccountService({ store, now }).create('cap test')).id;
    await wallet.topUp({ accountId, amount: 1_000_000n });
  });

  after(async function () {
    await store.close();
    await database.drop();
  });

  it('holds only what the daily cap has room for, and names the limit, cap, spend and reset', async function () {
    const { key } = await keys.create({ accountId, capDaily: 100n });
    const lineageId = key.lineageId;
    await wallet.hold({ accountId, requestId: 'a', amount: 60n, lineageId });
    await wallet.settle({ accountId, requestId: 'a', amount: 50n });
    await wallet.hold({ accountId, requestId: 'b', amount: 30n, lineageId });
    await assert.rejects(wallet.hold({ accountId, requestId: 'c', amount: 21n, lineageId }), (e: SvcError) => {
      assert.equal(e.code, 'key_cap_exceeded');
      assert.deepEqual(e.details, {
        limit: 'daily',
        cap: 100,
        spent: 50,
        held: 30,
        required: 21,
        resets_at: '2026-11-23T00:00:00.000Z',
      });
      assert.match(e.message, /daily spend cap of 100 credits is reached \(spent 50/);
      return true;
    });
    // What fits exactly is admitted; the wallet kept its money for the refused one.
    await wallet.hold({ accountId, requestId: 'd', amount: 20n, lineageId });
    assert.deepEqual(await spend(lineageId), {
      'd:2026-11-22': [50n, 50n],
      'm:2026-11': [50n, 50n],
      't:all': [50n, 50n],
    });
    const w = await wallet.get(accountId);
    assert.deepEqual([w.balance, w.held], [999_950n, 50n]);
    // A retry of an admitted hold answers with it, even though the cap is now full.
    const again = await wallet.hold({ accountId, requestId: 'd', amount: 20n, lineageId });
    assert.equal(again.hold.amount, 20n);
  });

  it('frees the reservation on release, settle 0 and expiry, and counts what settle charged', async function () {
    const { key } = await keys.create({ accountId, capDaily: 100n, capMonthly: 1000n });
    const lineageId = key.lineageId;
    await wallet.hold({ accountId, requestId: 'r', amount: 40n, lineageId });
    await wallet.hold({ accountId, requestId: 'z', amount: 40n, lineageId });
    await wallet.hold({ accountId, requestId: 'x', amount: 10n, lineageId, ttlSeconds: 5 });
    await wallet.release({ accountId, requestId: 'r' });
    await wallet.release({ accountId, requestId: 'r' });
    await wallet.settle({ accountId, requestId: 'z', amount: 0n });
    clock += 6000;
    assert.ok((await wallet.reapExpired()) >= 1);
    assert.deepEqual(await spend(lineageId), { 'd:2026-11-22': [0n, 0n], 'm:2026-11': [0n, 0n], 't:all': [0n, 0n] });
    await wallet.hold({ accountId, requestId: 's', amount: 90n, lineageId });
    await Promise.all([1, 2, 3].map(() => wallet.settle({ accountId, requestId: 's', amount: 70n })));
    assert.deepEqual(await spend(lineageId), { 'd:2026-11-22': [70n, 0n], 'm:2026-11': [70n, 0n], 't:all': [70n, 0n] });
    // A hold placed before midnight and settled after it counts in the day it was placed.
    clock = Date.UTC(2026, 10, 22, 23, 59);
    await wallet.hold({ accountId, requestId: 'late', amount: 30n, lineageId });
    clock = Date.UTC(2026, 10, 23, 0, 1);
    await wallet.settle({ accountId, requestId: 'late', amount: 30n });
    await wallet.hold({ accountId, requestId: 'new day', amount: 100n, lineageId });
    assert.deepEqual(await spend(lineageId), {
      'd:2026-11-22': [100n, 0n],
      'd:2026-11-23': [0n, 100n],
      'm:2026-11': [100n, 100n],
      't:all': [100n, 100n],
    });
  });

  it('refuses a hold over the monthly cap even when the day has room', async function () {
    const { key } = await keys.create({ accountId, capDaily: 1000n, capMonthly: 150n });
    const lineageId = key.lineageId;
    await wallet.hold({ accountId, requestId: 'a', amount: 100n, lineageId });
    await wallet.settle({ accountId, requestId: 'a', amount: 100n });
    clock = Date.UTC(2026, 10, 25, 12);
    await assert.rejects(wallet.hold({ accountId, requestId: 'b', amount: 51n, lineageId }), (e: SvcError) => {
      assert.equal(e.code, 'key_cap_exceeded');
      assert.equal(e.details?.['limit'], 'monthly');
      assert.equal(e.details?.['resets_at'], '2026-12-01T00:00:00.000Z');
      return true;
    });
    await wallet.hold({ accountId, requestId: 'c', amount: 50n, lineageId });
  });

  it('refuses a hold over the total cap across months, saying it never resets, until the cap is raised', async function () {
    const { key } = await keys.create({ accountId, capTotal: 150n });
    const lineageId = key.lineageId;
    await wallet.hold({ accountId, requestId: 'a', amount: 100n, lineageId });
    await wallet.settle({ accountId, requestId: 'a', amount: 100n });
    clock = Date.UTC(2027, 0, 5, 12);
    await assert.rejects(wallet.hold({ accountId, requestId: 'b', amount: 51n, lineageId }), (e: SvcError) => {
      assert.equal(e.code, 'key_cap_exceeded');
      assert.deepEqual(e.details, { limit: 'total', cap: 150, spent: 100, held: 0, required: 51, resets_at: null });
      assert.match(e.message, /total spend cap of 150 credits is reached \(spent 100; .*never resets/);
      return true;
    });
    await wallet.hold({ accountId, requestId: 'c', amount: 50n, lineageId });
    await keys.setCaps(key.id, { total: 200n });
    await wallet.hold({ accountId, requestId: 'd', amount: 50n, lineageId });
    const view = await keys.get(key.id);
    assert.deepEqual([view.capTotal, view.spentTotal], [200n, 100n]);
  });

  it('answers insufficient credit first when the wallet cannot pay either', async function () {
    const poor = (await createAccountService({ store, now }).create('poor')).id;
    await wallet.topUp({ accountId: poor, amount: 10n });
    const { key } = await keys.create({ accountId: poor, capDaily: 5n });
    await assert.rejects(
      wallet.hold({ accountId: poor, requestId: 'a', amount: 20n, lineageId: key.lineageId }),
      (e: SvcError) => e.code === 'insufficient_credit',
    );
    await assert.rejects(
      wallet.hold({ accountId: poor, requestId: 'b', amount: 6n, lineageId: key.lineageId }),
      (e: SvcError) => e.code === 'key_cap_exceeded',
    );
    const w = await wallet.get(poor);
    assert.deepEqual([w.balance, w.held], [10n, 0n]);
  });

  it('holds of a lineage without caps reserve nothing in any counter', async function () {
    const { key } = await keys.create({ accountId });
    await wallet.hold({ accountId, requestId: 'a', amount: 10n, lineageId: key.lineageId });
    await wallet.settle({ accountId, requestId: 'a', amount: 10n });
    assert.deepEqual(await spend(key.lineageId), {});
  });

  it('admits exactly what the cap covers under 200 concurrent holds, though the wallet could pay all', async function () {
    const { key } = await keys.create({ accountId, capDaily: 100n });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) =>
        wallet.hold({ accountId, requestId: `c${i}`, amount: 10n, lineageId: key.lineageId }),
      ),
    );
    assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 10);
    for (const o of outcomes)
      if (o.status === 'rejected') assert.equal((o.reason as SvcError).code, 'key_cap_exceeded');
    await Promise.all(
      outcomes.map((o, i) =>
        o.status === 'fulfilled' ? wallet.settle({ accountId, requestId: `c${i}`, amount: 10n }) : undefined,
      ),
    );
    const [day] = capPeriods(clock);
    assert.deepEqual((await spend(key.lineageId))[day.key], [100n, 0n]);
    assert.equal((await wallet.get(accountId)).balance, 1_000_000n - 100n);
  });

  it('a lowered cap stops the next hold at once, a raised one admits it, and the ledger is untouched', async function () {
    const { key } = await keys.create({ accountId, capDaily: 1000n });
    const lineageId = key.lineageId;
    await wallet.hold({ accountId, requestId: 'a', amount: 300n, lineageId });
    await wallet.settle({ accountId, requestId: 'a', amount: 300n });
    const before = await ledger();
    const lowered = await keys.setCaps(key.id, { daily: 200n });
    assert.deepEqual([lowered.capDaily, lowered.spentToday], [200n, 300n]);
    await assert.rejects(
      wallet.hold({ accountId, requestId: 'b', amount: 1n, lineageId }),
      (e: SvcError) => e.code === 'key_cap_exceeded' && e.details?.['spent'] === 300,
    );
    await keys.setCaps(key.id, { daily: null, monthly: 400n });
    await wallet.hold({ accountId, requestId: 'c', amount: 100n, lineageId });
    await assert.rejects(
      wallet.hold({ accountId, requestId: 'd', amount: 1n, lineageId }),
      (e: SvcError) => e.code === 'key_cap_exceeded' && e.details?.['limit'] === 'monthly',
    );
    assert.deepEqual(await ledger(), before);
  });
}
