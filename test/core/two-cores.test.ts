import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { createChannel, createClient, Metadata, ClientError, Status } from 'nice-grpc';
import { WalletServiceDefinition } from '../../gen/svc/core/v1/wallet';
import { AccountServiceDefinition } from '../../gen/svc/core/v1/accounts';
import { migrate, openStore } from '../../core/store/db';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';

const ADMIN = 'two-cores-admin-token-0123456789';

// SPEC §6 "Never below zero" and the foundation issue's acceptance test: two core processes on
// one database, 500 concurrent holds of 10 against a wallet of 1,000.
for (const kind of ['sqlite', 'mysql'] as const) {
  describe(`two core processes on one ${kind} database`, function () {
    this.timeout(180_000);
    let database: TestDatabase;
    const cores: SvcProcess[] = [];
    const addresses: string[] = [];

    before(async function () {
      if (kind === 'mysql') requireMysql(this);
      database = await createTestDatabase(kind);
      const store = openStore(database.url);
      await migrate(store);
      await store.close();
      for (let i = 0; i < 2; i++) {
        const port = await freePort();
        const address = `127.0.0.1:${port}`;
        cores.push(
          await spawnSvc(
            ['core'],
            { SVC_DATABASE_URL: database.url, SVC_GRPC_ADDR: address, SVC_ADMIN_TOKEN: ADMIN, SVC_LOG_LEVEL: 'info' },
            `"address":"${address}"`,
          ),
        );
        addresses.push(address);
      }
    });

    afterEach(function () {
      // The cores' own logs say why a call failed; show them with the failure.
      if (this.currentTest?.state === 'failed')
        for (const c of cores)
          process.stderr.write(
            c
              .output()
              .split('\n')
              .filter((l) => /"level":(40|50|60)/.test(l) && !l.includes('SANDBOX'))
              .join('\n'),
          );
    });

    after(async function () {
      await Promise.all(cores.map((c) => c.stop()));
      await database?.drop();
    });

    it('admits exactly 100 of 500 concurrent holds of 10 against 1,000, and the ledger adds up', async function () {
      const channels = addresses.map((a) => createChannel(a));
      const wallets = channels.map((c) => createClient(WalletServiceDefinition, c));
      const accounts = createClient(AccountServiceDefinition, channels[0]!);
      const metadata = new Metadata({ authorization: `Bearer ${ADMIN}` });
      try {
        const { account } = await accounts.createAccount({ name: 'hot wallet' }, { metadata });
        const accountId = account!.id;
        await wallets[0]!.topUp({ accountId, amount: 1000n, reference: 'funding' }, { metadata });

        let minSeen = 1000n;
        let watching = true;
        const watcher = (async () => {
          while (watching) {
            const { wallet } = await wallets[1]!.getWallet({ accountId }, { metadata });
            const free = wallet!.balance - wallet!.held;
            if (wallet!.balance < minSeen) minSeen = wallet!.balance;
            assert.ok(free >= 0n, `balance - held went negative: ${String(wallet!.balance)} - ${String(wallet!.held)}`);
          }
        })();

        const outcomes = await Promise.allSettled(
          Array.from({ length: 500 }, (_, i) =>
            wallets[i % 2]!.hold({ accountId, requestId: `hold-${i}`, amount: 10n }, { metadata }),
          ),
        );
        const admitted = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [i] : []));
        assert.equal(admitted.length, 100);
        for (const o of outcomes) {
          if (o.status === 'rejected') {
            assert.ok(o.reason instanceof ClientError);
            assert.equal(o.reason.code, Status.FAILED_PRECONDITION);
          }
        }
        // Settle half (some below, some above the hold), release the rest, each twice across cores.
        await Promise.all(
          admitted.flatMap((i, n) => {
            const requestId = `hold-${i}`;
            const op = (w: (typeof wallets)[number]) =>
              n % 2 === 0
                ? w.settle({ accountId, requestId, amount: BigInt(5 + (n % 7)) }, { metadata })
                : w.release({ accountId, requestId }, { metadata });
            return [op(wallets[0]!), op(wallets[1]!)];
          }),
        );
        watching = false;
        await watcher;

        const { wallet } = await wallets[0]!.getWallet({ accountId }, { metadata });
        assert.equal(wallet!.held, 0n);
        assert.ok(minSeen >= 0n);
        // A settle above its hold of 10 charges the hold: the most a call can cost.
        const expectedCharged = admitted.reduce(
          (sum, _i, n) => (n % 2 === 0 ? sum + BigInt(Math.min(10, 5 + (n % 7))) : sum),
          0n,
        );
        assert.equal(wallet!.balance, 1000n - expectedCharged);

        const store = openStore(database.url);
        try {
          const row = await store.db
            .selectFrom('ledger_entries')
            .select([sql<bigint>`sum(amount)`.as('total'), sql<bigint>`count(*)`.as('n')])
            .where('account_id', '=', accountId)
            .executeTakeFirstOrThrow();
          assert.equal(BigInt(row.total), wallet!.balance);
          assert.equal(BigInt(row.n), 1n + 50n);
        } finally {
          await store.close();
        }
      } finally {
        for (const c of channels) c.close();
      }
    });
  });
}
