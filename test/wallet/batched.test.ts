import assert from 'node:assert/strict';
import { sql, type KyselyPlugin } from 'kysely';
import { createAccountService } from '../../core/accounts/service';
import { SvcError } from '../../core/errors';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createBatchedWalletService } from '../../core/wallet/batched';
import { createWalletService } from '../../core/wallet/service';
import type { WalletService } from '../../core/wallet/types';
import { createTestDatabase, type TestDatabase } from '../helpers/database';
import { capCases } from './cap-cases';
import { walletCases } from './wallet-cases';

describe('batched wallet', function () {
  describe('behaves as the per-operation wallet', function () {
    walletCases((options) => createBatchedWalletService(options));
  });

  // Small batches and one transaction at a time: many batch boundaries inside the same cases.
  describe('behaves as the per-operation wallet with batches of 3, one at a time', function () {
    walletCases((options) => createBatchedWalletService({ ...options, maxBatch: 3, maxInFlight: 1 }));
  });

  describe('keeps per-key spend caps as the per-operation wallet', function () {
    capCases((options) => createBatchedWalletService(options));
  });

  describe('keeps per-key spend caps with batches of 3, one at a time', function () {
    capCases((options) => createBatchedWalletService({ ...options, maxBatch: 3, maxInFlight: 1 }));
  });

  describe('coalescing', function () {
    let database: TestDatabase;
    let store: Store;
    // A second pool on the same database, as another core process would have (MySQL).
    let otherStore: Store;
    let statements = 0;

    const counting: KyselyPlugin = {
      transformQuery: (args) => args.node,
      transformResult: async (args) => {
        statements++;
        return args.result;
      },
    };

    async function fundedAccount(balance: bigint): Promise<string> {
      const { id } = await createAccountService({ store, now: Date.now }).create('batch test');
      await createWalletService({ store, now: Date.now }).topUp({
        accountId: id,
        amount: balance,
        requestId: 'funding',
      });
      return id;
    }

    async function ledgerSum(accountId: string): Promise<bigint> {
      const row = await store.db
        .selectFrom('ledger_entries')
        .select(sql<bigint | null>`sum(amount)`.as('total'))
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      return BigInt(row.total ?? 0n);
    }

    before(async function () {
      database = await createTestDatabase();
      store = openStore(database.url);
      await migrate(store);
      // better-sqlite3 waits for a lock synchronously, so two connections in one process would
      // block each other's event loop: on SQLite the second service shares the connection (the
      // two-process test covers SQLite across processes).
      otherStore = database.dialect === 'mysql' ? openStore(database.url) : store;
    });

    after(async function () {
      if (otherStore !== store) await otherStore.close();
      await store.close();
      await database.drop();
    });

    it('decides a mixed batch exactly as the operations one after another, in a few statements', async function () {
      const naive = createWalletService({ store, now: Date.now });
      const batched = createBatchedWalletService({
        store: { ...store, db: store.db.withPlugin(counting) },
        now: Date.now,
      });
      const [one, two] = [await fundedAccount(100n), await fundedAccount(100n)];
      // The same history on both, one operation at a time: s1, s2 held, s3 released, s4 settled
      // at 5 (balance 95, held 30+20). The batched wallet then knows s1, s2 and the balances.
      for (const [accountId, w] of [
        [one, naive],
        [two, batched],
      ] as const) {
        for (const [requestId, amount] of [
          ['s1', 30n],
          ['s2', 20n],
          ['s3', 10n],
          ['s4', 10n],
        ] as const)
          await w.hold({ accountId, requestId, amount });
        await w.release({ accountId, requestId: 's3' });
        await w.settle({ accountId, requestId: 's4', amount: 5n });
      }
      type Op = (w: WalletService, accountId: string) => Promise<unknown>;
      const script: [string, Op][] = [
        [
          'settle a stored hold below its amount',
          (w, accountId) => w.settle({ accountId, requestId: 's1', amount: 25n }),
        ],
        ['hold', (w, accountId) => w.hold({ accountId, requestId: 'n1', amount: 40n })],
        ['repeat that hold', (w, accountId) => w.hold({ accountId, requestId: 'n1', amount: 40n })],
        [
          'settle the new hold above its amount',
          (w, accountId) => w.settle({ accountId, requestId: 'n1', amount: 50n }),
        ],
        ['repeat that settle', (w, accountId) => w.settle({ accountId, requestId: 'n1', amount: 50n })],
        ['release a stored hold', (w, accountId) => w.release({ accountId, requestId: 's2' })],
        ['repeat that release', (w, accountId) => w.release({ accountId, requestId: 's2' })],
        ['hold more than is free', (w, accountId) => w.hold({ accountId, requestId: 'n2', amount: 1000n })],
        ['settle a released hold', (w, accountId) => w.settle({ accountId, requestId: 's3', amount: 7n })],
        ['settle a hold settled before', (w, accountId) => w.settle({ accountId, requestId: 's4', amount: 9n })],
        ['settle without a hold', (w, accountId) => w.settle({ accountId, requestId: 'u1', amount: 3n })],
        ['repeat that settle', (w, accountId) => w.settle({ accountId, requestId: 'u1', amount: 3n })],
        ['hold', (w, accountId) => w.hold({ accountId, requestId: 'n3', amount: 5n })],
        ['settle it at zero', (w, accountId) => w.settle({ accountId, requestId: 'n3', amount: 0n })],
        ['hold all that is free', (w, accountId) => w.hold({ accountId, requestId: 'n4', amount: 20n })],
        ['hold one more', (w, accountId) => w.hold({ accountId, requestId: 'n5', amount: 1n })],
        ['release a hold never made', (w, accountId) => w.release({ accountId, requestId: 'nothing' })],
        [
          'repeat the first settle with another amount',
          (w, accountId) => w.settle({ accountId, requestId: 's1', amount: 99n }),
        ],
        [
          'settle the last hold far above everything',
          (w, accountId) => w.settle({ accountId, requestId: 'n4', amount: 500n }),
        ],
      ];
      // Ids differ between the two accounts; everything else must not.
      const comparable = (value: unknown): unknown =>
        JSON.parse(
          JSON.stringify(value, (key, v: unknown) => {
            if (key === 'id' || key === 'accountId' || key === 'createdAt' || key === 'expiresAt') return undefined;
            if (typeof v === 'bigint') return v.toString();
            if (v instanceof SvcError) return { code: v.code, details: v.details };
            return v;
          }),
        );
      const expected: unknown[] = [];
      for (const [, op] of script) expected.push(await op(naive, one).catch((e: unknown) => e));
      statements = 0;
      const got = await Promise.all(script.map(([, op]) => op(batched, two).catch((e: unknown) => e)));
      const batchStatements = statements;
      script.forEach(([what], i) => assert.deepEqual(comparable(got[i]), comparable(expected[i]), `${i}: ${what}`));
      assert.ok(got[7] instanceof SvcError && got[7].code === 'insufficient_credit');
      assert.ok(got[15] instanceof SvcError && got[15].code === 'insufficient_credit');
      assert.deepEqual(comparable(await batched.get(two)), comparable(await naive.get(one)));
      assert.deepEqual(comparable(await batched.ledger(two, 100)), comparable(await naive.ledger(one, 100)));
      assert.equal(await ledgerSum(two), (await batched.get(two)).balance);
      // Entry ids reported by the batch are the ledger's own.
      const ledger = await batched.ledger(two, 100);
      for (const result of got) {
        const entry = (result as { entry?: { id: string; requestId: string } | null }).entry;
        if (entry)
          assert.equal(ledger.find((e) => e.requestId === entry.requestId && e.kind === 'charge')?.id, entry.id);
      }
      // 19 operations in seven statements: one read of the holds it did not place, the wallet
      // UPDATE on the balances it last wrote, the INSERTs of holds and charges, the UPDATE of
      // closed holds, the read of the charge that s4's repeated settle answers with, and the
      // check that the two refused holds are not retries of stored ones (the per-operation path
      // takes three or more statements for each operation).
      assert.equal(batchStatements, 7);
    });

    it('decides on the database, not on what it remembers, when another writer changed the wallet', async function () {
      const accountId = await fundedAccount(100n);
      const other = createWalletService({ store: otherStore, now: Date.now });
      const wallet = createBatchedWalletService({ store, now: Date.now });
      await wallet.hold({ accountId, requestId: 'h1', amount: 40n });
      // Behind its back: h1 released, more credit, another hold.
      await other.release({ accountId, requestId: 'h1' });
      await other.topUp({ accountId, amount: 50n });
      await other.hold({ accountId, requestId: 'h2', amount: 50n });
      // Planned on what it last wrote (100, 40 held, h1 open), c alone fits and b does not; on
      // the database (150, 50 held) both fit.
      const [c, b] = await Promise.all([
        wallet.hold({ accountId, requestId: 'c', amount: 5n }),
        wallet.hold({ accountId, requestId: 'b', amount: 95n }),
      ]);
      assert.deepEqual([c.wallet.balance, c.wallet.held, b.wallet.balance, b.wallet.held], [150n, 55n, 150n, 150n]);
      await wallet.release({ accountId, requestId: 'c' });
      // h1 is released: its late settle takes only free credit (5), never h2's or b's.
      const late = await wallet.settle({ accountId, requestId: 'h1', amount: 30n });
      assert.equal(late.charged, 5n);
      assert.deepEqual([late.wallet.balance, late.wallet.held], [145n, 145n]);
      assert.equal(await ledgerSum(accountId), 145n);
      assert.deepEqual(await other.get(accountId), { accountId, balance: 145n, held: 145n, currency: 'toman' });
    });

    it('keeps exactly-once per request id for duplicates inside one batch', async function () {
      const accountId = await fundedAccount(1000n);
      const wallet = createBatchedWalletService({ store, now: Date.now });
      const holds = await Promise.all(
        Array.from({ length: 20 }, () => wallet.hold({ accountId, requestId: 'dup', amount: 100n })),
      );
      assert.equal(new Set(holds.map((h) => h.hold.id)).size, 1);
      assert.equal((await wallet.get(accountId)).held, 100n);
      const settles = await Promise.all(
        Array.from({ length: 20 }, () => wallet.settle({ accountId, requestId: 'dup', amount: 60n })),
      );
      assert.equal(new Set(settles.map((s) => s.entry?.id)).size, 1);
      for (const s of settles) assert.equal(s.charged, 60n);
      assert.deepEqual(await wallet.get(accountId), { accountId, balance: 940n, held: 0n, currency: 'toman' });
      assert.equal((await wallet.ledger(accountId, 10)).filter((e) => e.kind === 'charge').length, 1);
    });

    it('admits exactly balance / amount of 2,000 concurrent holds from two connections, and settles exactly', async function () {
      const accountId = await fundedAccount(5000n);
      const wallets = [
        createBatchedWalletService({ store, now: Date.now }),
        createBatchedWalletService({ store: otherStore, now: Date.now }),
      ];
      const outcomes = await Promise.allSettled(
        Array.from({ length: 2000 }, (_, i) => wallets[i % 2]!.hold({ accountId, requestId: `h${i}`, amount: 10n })),
      );
      const admitted = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [i] : []));
      assert.equal(admitted.length, 500);
      for (const o of outcomes) {
        if (o.status === 'rejected') {
          assert.ok(o.reason instanceof SvcError && o.reason.code === 'insufficient_credit', String(o.reason));
          const d = o.reason.details as { balance: number; held: number; available: number; required: number };
          assert.ok(d.available < 10 && d.available === d.balance - d.held && d.required === 10);
        }
      }
      assert.deepEqual(await wallets[0]!.get(accountId), { accountId, balance: 5000n, held: 5000n, currency: 'toman' });
      // Every admitted hold settled or released twice, once through each connection, at once.
      const cost = (n: number): bigint => BigInt(n % 13);
      await Promise.all(
        admitted.flatMap((i, n) => {
          const requestId = `h${i}`;
          return wallets.map((w) =>
            n % 3 === 0 ? w.release({ accountId, requestId }) : w.settle({ accountId, requestId, amount: cost(n) }),
          );
        }),
      );
      // Each charge at most its hold of 10, the most a call can cost.
      const charged = admitted.reduce((sum, _i, n) => (n % 3 === 0 ? sum : sum + (cost(n) > 10n ? 10n : cost(n))), 0n);
      const after = await wallets[1]!.get(accountId);
      assert.deepEqual([after.balance, after.held], [5000n - charged, 0n]);
      assert.equal(await ledgerSum(accountId), after.balance);
      const charges = await store.db
        .selectFrom('ledger_entries')
        .select(sql<bigint>`count(*)`.as('n'))
        .where('account_id', '=', accountId)
        .where('kind', '=', 'charge')
        .executeTakeFirstOrThrow();
      assert.equal(BigInt(charges.n), BigInt(admitted.filter((_i, n) => n % 3 !== 0 && cost(n) > 0n).length));
    });

    it('answers a retry that races its original on another connection with the first result', async function () {
      const accountId = await fundedAccount(10_000n);
      const wallets = [
        createBatchedWalletService({ store, now: Date.now }),
        createBatchedWalletService({ store: otherStore, now: Date.now }),
      ];
      const ids = Array.from({ length: 100 }, (_, i) => `race${i}`);
      const holds = await Promise.all(
        ids.flatMap((requestId) => wallets.map((w) => w.hold({ accountId, requestId, amount: 50n }))),
      );
      for (let i = 0; i < holds.length; i += 2) assert.equal(holds[i]!.hold.id, holds[i + 1]!.hold.id);
      assert.equal((await wallets[0]!.get(accountId)).held, 5000n);
      const settles = await Promise.all(
        ids.flatMap((requestId) => wallets.map((w) => w.settle({ accountId, requestId, amount: 30n }))),
      );
      for (let i = 0; i < settles.length; i += 2) {
        assert.equal(settles[i]!.charged, 30n);
        assert.equal(settles[i]!.entry?.id, settles[i + 1]!.entry?.id);
      }
      assert.deepEqual(await wallets[1]!.get(accountId), { accountId, balance: 7000n, held: 0n, currency: 'toman' });
      assert.equal(await ledgerSum(accountId), 7000n);
    });

    it('keeps the books under random interleavings of both wallets on two connections and the reaper', async function () {
      const accounts = [await fundedAccount(2_000n), await fundedAccount(500n), await fundedAccount(50n)];
      let clock = Date.now();
      const now = (): number => clock;
      const wallets = [
        createBatchedWalletService({ store, now }),
        createBatchedWalletService({ store: otherStore, now, maxBatch: 7 }),
        createWalletService({ store: otherStore, now }),
      ];
      // A fixed seed: a failure replays the same operations.
      let seed = 20261122;
      const random = (n: number): number => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed % n;
      };
      const calls: { accountId: string; call: Promise<unknown> }[] = [];
      const outcomes: { accountId: string; outcome: PromiseSettledResult<unknown> }[] = [];
      const collect = async (): Promise<void> => {
        const batch = calls.splice(0);
        const settled = await Promise.allSettled(batch.map((c) => c.call));
        settled.forEach((outcome, i) => outcomes.push({ accountId: batch[i]!.accountId, outcome }));
      };
      for (let i = 0; i < 1500; i++) {
        const w = wallets[random(wallets.length)]!;
        const accountId = accounts[random(accounts.length)]!;
        const requestId = `r${random(300)}`;
        const amount = BigInt(random(60));
        const pick = random(10);
        const call =
          pick < 4
            ? w.hold({ accountId, requestId, amount: amount + 1n, ttlSeconds: 1 + random(3) })
            : pick < 8
              ? w.settle({ accountId, requestId, amount })
              : w.release({ accountId, requestId });
        calls.push({ accountId, call });
        if (i % 250 === 249) {
          clock += 1500;
          await Promise.all([collect(), wallets[0]!.reapExpired()]);
        }
      }
      await collect();
      assert.equal(outcomes.length, 1500);
      for (const { accountId, outcome } of outcomes) {
        if (outcome.status === 'rejected') {
          assert.equal((outcome.reason as SvcError).code, 'insufficient_credit', String(outcome.reason));
          continue;
        }
        // Every answer is about the account asked for (one SQLite batch serves several).
        const value = outcome.value as { wallet: { accountId: string }; hold?: { accountId: string } };
        assert.equal(value.wallet.accountId, accountId);
        if (value.hold !== undefined) assert.equal(value.hold.accountId, accountId);
      }
      for (const accountId of accounts) {
        const w = await wallets[2]!.get(accountId);
        assert.equal(w.balance, await ledgerSum(accountId));
        const open = await store.db
          .selectFrom('holds')
          .select(sql<bigint | null>`sum(amount)`.as('total'))
          .where('account_id', '=', accountId)
          .where('status', '=', 'held')
          .executeTakeFirstOrThrow();
        assert.equal(w.held, BigInt(open.total ?? 0n));
        assert.ok(w.held >= 0n && w.balance - w.held >= 0n, `${w.balance} - ${w.held}`);
        // A hold settled with a charge has exactly that charge in the ledger. (A settle that
        // found no hold may have charged its request id before a hold of the same id was placed
        // and settled at 0; both wallets allow that, so it is not checked here.)
        const charges = await store.db
          .selectFrom('ledger_entries')
          .select(['request_id', 'amount'])
          .where('account_id', '=', accountId)
          .where('kind', '=', 'charge')
          .execute();
        const settled = await store.db
          .selectFrom('holds')
          .select(['request_id', 'settled_amount'])
          .where('account_id', '=', accountId)
          .where('status', '=', 'settled')
          .execute();
        for (const h of settled.filter((row) => (row.settled_amount ?? 0n) > 0n)) {
          const charge = charges.find((c) => c.request_id === h.request_id);
          assert.equal(charge === undefined ? 0n : -charge.amount, h.settled_amount, h.request_id);
        }
      }
    });

    it('refuses operations on an unknown account with the per-operation errors, and bad input before queueing', async function () {
      const wallet = createBatchedWalletService({ store, now: Date.now });
      const accountId = await fundedAccount(10n);
      // In one batch with a real account's operations (one SQLite batch serves many accounts).
      const [ok, ...results] = await Promise.allSettled([
        wallet.hold({ accountId, requestId: 'fine', amount: 4n }),
        wallet.hold({ accountId: 'acc_nope', requestId: 'x', amount: 5n }),
        wallet.settle({ accountId: 'acc_nope', requestId: 'x', amount: 5n }),
        wallet.release({ accountId: 'acc_nope', requestId: 'y' }),
      ]);
      for (const r of results)
        assert.ok(r.status === 'rejected' && r.reason instanceof SvcError && r.reason.code === 'not_found', String(r));
      assert.ok(ok?.status === 'fulfilled' && ok.value.wallet.held === 4n);
      await wallet.release({ accountId, requestId: 'fine' });
      await assert.rejects(
        wallet.hold({ accountId, requestId: 'r', amount: 0n }),
        (e: SvcError) => e.param === 'amount',
      );
      await assert.rejects(
        wallet.settle({ accountId, requestId: 'r', amount: -1n }),
        (e: SvcError) => e.param === 'amount',
      );
      await assert.rejects(
        wallet.hold({ accountId, requestId: 'r', amount: 1n, ttlSeconds: 90_000 }),
        (e: SvcError) => e.param === 'ttl_seconds',
      );
      await assert.rejects(
        wallet.release({ accountId, requestId: 'x'.repeat(101) }),
        (e: SvcError) => e.param === 'request_id',
      );
      assert.deepEqual(await wallet.get(accountId), { accountId, balance: 10n, held: 0n, currency: 'toman' });
    });
  });
});
