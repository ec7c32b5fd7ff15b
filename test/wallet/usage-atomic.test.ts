import assert from 'node:assert/strict';
import { sql } from 'kysely';
import pino from 'pino';
import { createAccountService } from '../../core/accounts/service';
import type { Principal } from '../../core/auth/types';
import { createMeter } from '../../core/billing/meter';
import type { Meter } from '../../core/billing/types';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createUsageRecorder, type UsageEntry, type UsageRecord } from '../../core/usage/recorder';
import { createBatchedWalletService } from '../../core/wallet/batched';
import { createWalletService, type WalletServiceOptions } from '../../core/wallet/service';
import type { WalletService } from '../../core/wallet/types';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';

// The usage record of a call is written in the transaction of its charge (SPEC §6: no charge
// without a result). A trigger refuses the record of any call to the resource 'boom', as a
// database that fails mid-batch would: the charge must then be rolled back with it.
const REFUSE_SQLITE = sql.raw(
  `CREATE TRIGGER usage_refuse BEFORE INSERT ON usage_records WHEN NEW.resource = 'boom' ` +
    `BEGIN SELECT RAISE(ABORT, 'usage record refused'); END`,
);
const REFUSE_MYSQL = sql.raw(
  'CREATE TRIGGER usage_refuse BEFORE INSERT ON usage_records FOR EACH ROW BEGIN ' +
    `IF NEW.resource = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'usage record refused'; END IF; END`,
);

for (const kind of ['sqlite', 'mysql'] as const) {
  describe(`a charge and its usage record are one write (${kind})`, function () {
    this.timeout(60_000);
    let database: TestDatabase | undefined;
    let store: Store;
    let recorded: UsageRecord[];
    let seq = 0;

    before(async function () {
      if (kind === 'mysql') requireMysql(this);
      database = await createTestDatabase(kind);
      store = openStore(database.url);
      await migrate(store);
      await (kind === 'mysql' ? REFUSE_MYSQL : REFUSE_SQLITE).execute(store.db);
    });

    after(async function () {
      if (database === undefined) return;
      await store.close();
      await database.drop();
    });

    beforeEach(() => {
      recorded = [];
    });

    const options = (): WalletServiceOptions => ({
      store,
      now: Date.now,
      onRecorded: (r: UsageRecord) => void recorded.push(r),
    });

    async function fundedAccount(balance: bigint): Promise<string> {
      const { id } = await createAccountService({ store, now: Date.now }).create('usage atomic');
      await createWalletService({ store, now: Date.now }).topUp({ accountId: id, amount: balance });
      return id;
    }

    function meterOf(wallet: WalletService): Meter {
      return createMeter({
        wallet,
        usage: createUsageRecorder({ store, now: Date.now, onRecorded: (r) => void recorded.push(r) }),
        logger: pino({ level: 'silent' }),
        now: Date.now,
        holdTtlSeconds: 600,
      });
    }

    const principalOf = (accountId: string): Principal => ({
      accountId,
      keyId: 'key_t',
      scope: 'all',
      manage: false,
      lineageId: 'lin_t',
      capped: false,
    });

    const entry = (accountId: string, requestId: string, resource = 'fine'): UsageEntry => ({
      requestId,
      clientRequestId: null,
      accountId,
      keyId: 'key_t',
      kind: 'tool',
      resource,
      provider: 'test',
      inputTokens: 1,
      outputTokens: 2,
      status: 'ok',
      errorCode: null,
      latencyMs: 3,
    });

    async function books(accountId: string): Promise<{
      balance: bigint;
      held: bigint;
      charges: Map<string, bigint>;
      usage: Map<string, bigint>;
      holds: Map<string, string>;
    }> {
      const wallet = await store.db
        .selectFrom('wallets')
        .select(['balance', 'held'])
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      const charges = await store.db
        .selectFrom('ledger_entries')
        .select(['request_id', 'amount'])
        .where('account_id', '=', accountId)
        .where('kind', '=', 'charge')
        .execute();
      const usage = await store.db
        .selectFrom('usage_records')
        .select(['request_id', 'cost'])
        .where('account_id', '=', accountId)
        .execute();
      const holds = await store.db
        .selectFrom('holds')
        .select(['request_id', 'status'])
        .where('account_id', '=', accountId)
        .execute();
      return {
        balance: wallet.balance,
        held: wallet.held,
        charges: new Map(charges.map((c) => [c.request_id, -c.amount])),
        usage: new Map(usage.map((u) => [u.request_id, u.cost])),
        holds: new Map(holds.map((h) => [h.request_id, h.status])),
      };
    }

    for (const [name, make] of [
      ['batched wallet', (o: WalletServiceOptions) => createBatchedWalletService(o)],
      ['per-operation wallet', (o: WalletServiceOptions) => createWalletService(o)],
    ] as const) {
      it(`${name}: a settle whose usage record the database refuses charges nothing and keeps the hold`, async function () {
        const wallet = make(options());
        const accountId = await fundedAccount(1_000n);
        await wallet.hold({ accountId, requestId: 'r1', amount: 100n });
        await assert.rejects(
          wallet.settle({ accountId, requestId: 'r1', amount: 60n, usage: entry(accountId, 'r1', 'boom') }),
          /usage record refused/,
        );
        const after = await books(accountId);
        assert.deepEqual([after.balance, after.held], [1_000n, 100n]);
        assert.equal(after.charges.size, 0);
        assert.equal(after.usage.size, 0);
        assert.equal(after.holds.get('r1'), 'held');
        assert.equal(recorded.length, 0);
        // The same settle with a record the database takes: one charge, one record, announced once.
        const settled = await wallet.settle({ accountId, requestId: 'r1', amount: 60n, usage: entry(accountId, 'r1') });
        assert.equal(settled.charged, 60n);
        const done = await books(accountId);
        assert.deepEqual([done.balance, done.held], [940n, 0n]);
        assert.equal(done.charges.get('r1'), 60n);
        assert.equal(done.usage.get('r1'), 60n);
        assert.deepEqual(
          recorded.map((r) => [r.requestId, r.cost]),
          [['r1', 60n]],
        );
        // A retried settle answers with the first charge and writes no second record.
        const again = await wallet.settle({ accountId, requestId: 'r1', amount: 60n, usage: entry(accountId, 'r1') });
        assert.equal(again.charged, 60n);
        assert.equal(recorded.length, 1);
      });

      it(`${name}: a record stored already is ignored, and the settle still charges`, async function () {
        const wallet = make(options());
        const accountId = await fundedAccount(1_000n);
        await wallet.hold({ accountId, requestId: 'd1', amount: 50n });
        // Written before the settle, e.g. by a core that crashed after it.
        await createUsageRecorder({ store, now: Date.now }).record({ ...entry(accountId, 'd1'), cost: 0n });
        const settled = await wallet.settle({ accountId, requestId: 'd1', amount: 20n, usage: entry(accountId, 'd1') });
        assert.equal(settled.charged, 20n);
        const after = await books(accountId);
        assert.equal(after.charges.get('d1'), 20n);
        assert.equal(after.usage.get('d1'), 0n);
        assert.equal(recorded.length, 0);
      });
    }

    it('batched wallet: a batch that meets stored records writes the others and announces only those', async function () {
      const wallet = createBatchedWalletService(options());
      const accountId = await fundedAccount(1_000n);
      const ids = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
      for (const requestId of ids) await wallet.hold({ accountId, requestId, amount: 50n });
      const recorder = createUsageRecorder({ store, now: Date.now });
      for (const requestId of ['p1', 'p4']) await recorder.record({ ...entry(accountId, requestId), cost: 0n });
      // One batch: its multi-row INSERT meets p1 and p4 and is redone row by row, in the same transaction.
      const settled = await Promise.all(
        ids.map((requestId, i) =>
          wallet.settle({ accountId, requestId, amount: BigInt(10 + i), usage: entry(accountId, requestId) }),
        ),
      );
      settled.forEach((s, i) => assert.equal(s.charged, BigInt(10 + i)));
      const after = await books(accountId);
      ids.forEach((id, i) => {
        assert.equal(after.charges.get(id), BigInt(10 + i), id);
        assert.equal(after.usage.get(id), id === 'p1' || id === 'p4' ? 0n : BigInt(10 + i), id);
      });
      assert.deepEqual(recorded.map((r) => r.requestId).sort(), ['p0', 'p2', 'p3', 'p5']);
    });

    it('through the meter: the client sees an error, pays nothing, and its hold is freed', async function () {
      const meter = meterOf(createBatchedWalletService(options()));
      const accountId = await fundedAccount(1_000n);
      const requestId = `m${seq++}`;
      const call = await meter.begin({
        principal: principalOf(accountId),
        requestId,
        kind: 'tool',
        resource: 'boom',
        provider: 'test',
        maxCost: 100n,
      });
      assert.equal((await books(accountId)).held, 100n);
      await assert.rejects(call.finish({ cost: 70n, status: 'ok' }), /usage record refused/);
      const after = await books(accountId);
      assert.deepEqual([after.balance, after.held], [1_000n, 0n]);
      assert.equal(after.holds.get(requestId), 'released');
      assert.equal(after.charges.size, 0);
      assert.equal(after.usage.size, 0);
      assert.equal(recorded.length, 0);
    });

    it('through the meter: a refused record fails only its own call, not the others of its batch', async function () {
      const meter = meterOf(createBatchedWalletService(options()));
      const accountId = await fundedAccount(10_000n);
      const other = await fundedAccount(10_000n);
      const calls = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          meter.begin({
            principal: principalOf(i % 3 === 2 ? other : accountId),
            requestId: `b${i}`,
            kind: 'tool',
            resource: i === 5 ? 'boom' : 'fine',
            provider: 'test',
            maxCost: 100n,
          }),
        ),
      );
      // Finished in one tick: one batch (on SQLite, of both accounts).
      const results = await Promise.allSettled(calls.map((c, i) => c.finish({ cost: BigInt(10 + i), status: 'ok' })));
      results.forEach((r, i) => assert.equal(r.status, i === 5 ? 'rejected' : 'fulfilled', `b${i}`));
      const mine = await books(accountId);
      const theirs = await books(other);
      for (const [i] of results.entries()) {
        const b = i % 3 === 2 ? theirs : mine;
        const id = `b${i}`;
        assert.equal(b.charges.get(id), i === 5 ? undefined : BigInt(10 + i), id);
        assert.equal(b.usage.get(id), i === 5 ? undefined : BigInt(10 + i), id);
      }
      assert.equal(mine.held + theirs.held, 0n);
      assert.equal(recorded.length, 11);
    });

    it('through the meter: every settle writes exactly one record at the cost the ledger charged, visible when it answers', async function () {
      const meter = meterOf(createBatchedWalletService(options()));
      const accountId = await fundedAccount(2_000n);
      const costs = Array.from({ length: 40 }, (_, i) => BigInt((i * 7) % 23));
      const ids: string[] = [];
      await Promise.all(
        costs.map(async (cost, i) => {
          const requestId = `n${i}`;
          ids.push(requestId);
          const call = await meter.begin({
            principal: principalOf(accountId),
            requestId,
            kind: 'tool',
            resource: 'fine',
            provider: 'test',
            maxCost: 25n,
          });
          // One in five fails: released, recorded at cost 0.
          if (i % 5 === 4) await call.fail({ errorCode: 'upstream_error' });
          else {
            const billing = await call.finish({ cost, status: 'ok' });
            assert.equal(billing.cost, cost);
          }
          const row = await store.db
            .selectFrom('usage_records')
            .select(['cost', 'status'])
            .where('account_id', '=', accountId)
            .where('request_id', '=', requestId)
            .executeTakeFirst();
          assert.ok(row !== undefined, `${requestId} is not visible when its call answered`);
        }),
      );
      const b = await books(accountId);
      assert.equal(b.held, 0n);
      assert.equal(b.usage.size, costs.length);
      let total = 0n;
      for (const id of ids) {
        const charge = b.charges.get(id) ?? 0n;
        total += charge;
        assert.equal(b.usage.get(id), charge, id);
      }
      assert.equal(b.balance, 2_000n - total);
      assert.equal(recorded.length, costs.length);
      assert.equal(new Set(recorded.map((r) => r.requestId)).size, costs.length);
      const statuses = await store.db
        .selectFrom('usage_records')
        .select(['status', sql<number>`count(*)`.as('n')])
        .where('account_id', '=', accountId)
        .groupBy('status')
        .execute();
      const byStatus = Object.fromEntries(statuses.map((s) => [s.status, Number(s.n)]));
      assert.equal(byStatus['error'], 8);
      assert.equal((byStatus['ok'] ?? 0) + (byStatus['empty'] ?? 0), 32);
    });

    it('through the meter: a release whose record the database refuses still frees the hold and does not fail', async function () {
      const meter = meterOf(createBatchedWalletService(options()));
      const accountId = await fundedAccount(1_000n);
      const call = await meter.begin({
        principal: principalOf(accountId),
        requestId: 'f1',
        kind: 'tool',
        resource: 'boom',
        provider: 'test',
        maxCost: 100n,
      });
      await call.fail({ errorCode: 'upstream_error' });
      const after = await books(accountId);
      assert.deepEqual([after.balance, after.held], [1_000n, 0n]);
      assert.equal(after.holds.get('f1'), 'released');
      assert.equal(after.usage.size, 0);
      assert.equal(recorded.length, 0);
    });
  });
}
