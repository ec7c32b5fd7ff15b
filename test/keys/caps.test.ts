import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import OpenAI from 'openai';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createAccountService } from '../../core/accounts/service';
import { createKeyService } from '../../core/keys/service';
import { migrate, openStore, type Store } from '../../core/store/db';
import { capPeriods, TOTAL_PERIOD } from '../../core/wallet/caps';
import { createWalletService } from '../../core/wallet/service';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';
import { freePort, spawnSvc, type SvcProcess } from '../helpers/processes';
import { connectClient } from '../mcp/helpers';

const ADMIN = 'caps-admin-token-0123456789abcdef';
// The built-in sandbox's maps_search_places: always finds places, always costs this.
const PRICE = 460n;
const FUNDS = 1_000_000n;

interface Replica {
  readonly process: SvcProcess;
  readonly http: string;
  readonly channel: Channel;
}

async function failure(call: (options: { metadata: Metadata; onTrailer: (t: Metadata) => void }) => Promise<unknown>) {
  let trailer: Metadata | undefined;
  try {
    await call({ metadata: new Metadata({ authorization: `Bearer ${ADMIN}` }), onTrailer: (t) => (trailer = t) });
  } catch (error) {
    assert.ok(error instanceof ClientError, String(error));
    return { status: error.code, code: trailer?.get('svc-error-code'), param: trailer?.get('svc-error-param') };
  }
  return assert.fail('the call succeeded');
}

// Issue 9, per-key spend caps: two `svc serve` replicas (core + gateways) on one database, the
// real MCP SDK and openai clients, a key capped at exactly 10 prices.
for (const kind of ['sqlite', 'mysql'] as const) {
  describe(`per-key spend caps on two replicas sharing one ${kind} database`, function () {
    this.timeout(180_000);
    let database: TestDatabase;
    let store: Store;
    const replicas: Replica[] = [];
    const clients: Client[] = [];
    let accountId: string;
    const admin = { metadata: new Metadata({ authorization: `Bearer ${ADMIN}` }) };
    const keysOf = (i: number) => createClient(KeyServiceDefinition, replicas[i]!.channel);

    async function callTool(replica: number, key: string): Promise<CallToolResult> {
      const client = await connectClient(replicas[replica]!.http, key);
      clients.push(client);
      return (await client.callTool({
        name: 'maps_search_places',
        arguments: { query: 'cafe' },
      })) as CallToolResult;
    }

    async function ledger(): Promise<{ count: bigint; sum: bigint }> {
      const row = await store.db
        .selectFrom('ledger_entries')
        .select([sql<bigint | null>`sum(amount)`.as('total'), sql<bigint>`count(*)`.as('n')])
        .where('account_id', '=', accountId)
        .executeTakeFirstOrThrow();
      return { count: BigInt(row.n), sum: BigInt(row.total ?? 0n) };
    }

    before(async function () {
      if (kind === 'mysql') requireMysql(this);
      database = await createTestDatabase(kind);
      store = openStore(database.url);
      await migrate(store);
      accountId = (await createAccountService({ store, now: Date.now }).create('capped')).id;
      await createWalletService({ store, now: Date.now }).topUp({ accountId, amount: FUNDS });
      for (let i = 0; i < 2; i++) {
        const httpPort = await freePort();
        const grpc = `127.0.0.1:${await freePort()}`;
        const process = await spawnSvc(
          ['serve'],
          {
            SVC_DATABASE_URL: database.url,
            SVC_HTTP_ADDR: `127.0.0.1:${httpPort}`,
            SVC_GRPC_ADDR: grpc,
            SVC_ADMIN_TOKEN: ADMIN,
          },
          'svc is ready',
        );
        replicas.push({ process, http: `http://127.0.0.1:${httpPort}`, channel: createChannel(grpc) });
      }
    });

    afterEach(function () {
      if (this.currentTest?.state === 'failed')
        for (const r of replicas)
          process.stderr.write(
            r.process
              .output()
              .split('\n')
              .filter((l) => /"level":(40|50|60)/.test(l))
              .join('\n'),
          );
    });

    after(async function () {
      await Promise.all(clients.map((c) => c.close()));
      for (const r of replicas) r.channel.close();
      await Promise.all(replicas.map((r) => r.process.stop()));
      await store?.close();
      await database?.drop();
    });

    it('admits exactly 10 of 40 concurrent tool calls against a cap of 10 prices, though the wallet could pay all', async function () {
      const { key, secret } = await createKeyService({ store, now: Date.now }).create({
        accountId,
        name: 'ten calls',
        capDaily: PRICE * 10n,
      });
      // Each replica's client warms its key cache first, so both decide from the database at once.
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => callTool(i % 2, secret)));
      const admitted = results.filter((r) => r.isError !== true);
      const refused = results.filter((r) => r.isError === true);
      assert.equal(admitted.length, 10);
      assert.equal(refused.length, 30);
      for (const r of refused) {
        const meta = r._meta ?? {};
        assert.equal(meta['svc/error_code'], 'key_cap_exceeded');
        assert.equal(meta['svc/cost'], 0);
        assert.equal(meta['svc/cap_limit'], 'daily');
        assert.equal(meta['svc/cap'], Number(PRICE * 10n));
        assert.equal(meta['svc/price'], Number(PRICE));
        assert.match(String((r.content[0] as { text: string }).text), /daily spend cap of 4600 credits is reached/);
      }
      assert.deepEqual(await ledger(), { count: 11n, sum: FUNDS - PRICE * 10n });
      const [day, month] = capPeriods(Date.now());
      const listed = await keysOf(1).listKeys({ accountId }, admin);
      const shown = listed.keys.find((k) => k.id === key.id);
      assert.equal(shown?.capDaily, PRICE * 10n);
      assert.equal(shown?.capMonthly, undefined);
      assert.equal(shown?.spentToday, PRICE * 10n);
      assert.equal(shown?.spentThisMonth, PRICE * 10n);
      const counters = await store.db
        .selectFrom('key_spend')
        .select(['period', 'spent', 'held'])
        .where('lineage_id', '=', key.lineageId)
        .orderBy('period')
        .execute();
      assert.deepEqual(counters, [
        { period: day.key, spent: PRICE * 10n, held: 0n },
        { period: month.key, spent: PRICE * 10n, held: 0n },
        // The lineage's whole-life counter, kept beside the periods for a total cap.
        { period: TOTAL_PERIOD.key, spent: PRICE * 10n, held: 0n },
      ]);

      // The OpenAI API answers the same refusal as a 429 with its own code.
      const openai = new OpenAI({ baseURL: `${replicas[0]!.http}/v1/openai`, apiKey: secret, maxRetries: 0 });
      const error = await openai.chat.completions
        .create({ model: 'svc-pro', messages: [{ role: 'user', content: 'one more?' }] })
        .then(
          () => assert.fail('the call succeeded'),
          (e: unknown) => e,
        );
      assert.ok(error instanceof OpenAI.APIError);
      assert.equal(error.status, 429);
      assert.equal(error.code, 'key_cap_exceeded');
      assert.equal(error.type, 'insufficient_quota');
      assert.equal(error.param, null);
      assert.equal(error.headers?.get('x-should-retry'), 'false');
      assert.match(error.message, /daily spend cap of 4600 credits is reached \(spent 4600.*it resets at /);
      const responses = await openai.responses.create({ model: 'svc-pro', input: 'and a response?' }).then(
        () => assert.fail('the call succeeded'),
        (e: unknown) => e,
      );
      assert.ok(responses instanceof OpenAI.APIError);
      assert.equal(responses.status, 429);
      assert.equal(responses.code, 'key_cap_exceeded');
      assert.deepEqual(await ledger(), { count: 11n, sum: FUNDS - PRICE * 10n });
    });

    it('a rolled key continues its lineage spend; caps changed on one replica apply on the other at once; the ledger is untouched', async function () {
      const created = await keysOf(0).createKey(
        { accountId, name: 'rolled', scope: 'tools', capDaily: PRICE * 2n },
        admin,
      );
      const first = created.secret;
      const keyId = created.key!.id;
      assert.equal(created.key?.capDaily, PRICE * 2n);
      assert.equal((await callTool(0, first)).isError, false);
      const rolled = await keysOf(1).rollKey({ keyId, grace: { seconds: 0n, nanos: 0 } }, admin);
      assert.equal(rolled.key?.capDaily, PRICE * 2n);
      assert.equal(rolled.key?.spentToday, PRICE);
      assert.equal(rolled.key?.lineageId, keyId);
      const second = rolled.secret;
      assert.equal((await callTool(1, second)).isError, false);
      const third = await callTool(0, second);
      assert.equal(third._meta?.['svc/error_code'], 'key_cap_exceeded');
      assert.equal(third._meta?.['svc/cap_spent'], Number(PRICE * 2n));

      // Raised on replica 0, used on replica 1 (which has the key cached as capped): at once.
      const before = await ledger();
      const raised = await keysOf(0).updateKeyCaps(
        { keyId: rolled.key!.id, capDaily: PRICE * 3n, removeCapDaily: false, removeCapMonthly: false },
        admin,
      );
      assert.equal(raised.key?.capDaily, PRICE * 3n);
      assert.equal(raised.key?.spentToday, PRICE * 2n);
      assert.deepEqual(await ledger(), before);
      assert.equal((await callTool(1, second)).isError, false);
      // Lowered below what is spent: the next call stops, spend and ledger stay as they were.
      const afterCall = await ledger();
      const lowered = await keysOf(0).updateKeyCaps(
        { keyId, capDaily: PRICE, capMonthly: PRICE * 100n, removeCapDaily: false, removeCapMonthly: false },
        admin,
      );
      assert.equal(lowered.key?.spentToday, PRICE * 3n);
      assert.equal(lowered.key?.capMonthly, PRICE * 100n);
      assert.deepEqual(await ledger(), afterCall);
      const stopped = await callTool(1, second);
      assert.equal(stopped._meta?.['svc/error_code'], 'key_cap_exceeded');
      assert.equal(stopped._meta?.['svc/cap'], Number(PRICE));
      // Removing the daily cap leaves the monthly one.
      const removed = await keysOf(1).updateKeyCaps({ keyId, removeCapDaily: true, removeCapMonthly: false }, admin);
      assert.equal(removed.key?.capDaily, undefined);
      assert.equal(removed.key?.capMonthly, PRICE * 100n);
      assert.equal((await callTool(0, second)).isError, false);
    });

    it('the first cap of a key that already spent stops it at once on the core that set it', async function () {
      const created = await keysOf(0).createKey({ accountId, name: 'uncapped', scope: '' }, admin);
      assert.equal((await callTool(0, created.secret)).isError, false);
      assert.equal((await callTool(0, created.secret)).isError, false);
      const listed = (await keysOf(0).listKeys({ accountId }, admin)).keys.find((k) => k.id === created.key!.id);
      assert.equal(listed?.spentToday, PRICE * 2n);
      assert.equal(listed?.capDaily, undefined);
      const capped = await keysOf(0).updateKeyCaps(
        { keyId: created.key!.id, capMonthly: PRICE * 2n, removeCapDaily: false, removeCapMonthly: false },
        admin,
      );
      assert.equal(capped.key?.spentThisMonth, PRICE * 2n);
      const refused = await callTool(0, created.secret);
      assert.equal(refused._meta?.['svc/error_code'], 'key_cap_exceeded');
      assert.equal(refused._meta?.['svc/cap_limit'], 'monthly');
    });

    it('refuses negative caps and contradictory changes naming the field, and changes nothing', async function () {
      const created = await keysOf(0).createKey({ accountId, name: 'bad input', scope: '' }, admin);
      const keyId = created.key!.id;
      const keys = keysOf(1);
      const cases: [string, ReturnType<typeof failure>][] = [
        ['cap_daily', failure((o) => keys.createKey({ accountId, name: 'x', scope: '', capDaily: -1n }, o))],
        ['cap_monthly', failure((o) => keys.createKey({ accountId, name: 'x', scope: '', capMonthly: -460n }, o))],
        [
          'cap_daily',
          failure((o) =>
            keys.updateKeyCaps({ keyId, capDaily: -5n, removeCapDaily: false, removeCapMonthly: false }, o),
          ),
        ],
        [
          'cap_monthly',
          failure((o) =>
            keys.updateKeyCaps({ keyId, capMonthly: 5n, removeCapDaily: false, removeCapMonthly: true }, o),
          ),
        ],
        [
          'cap_daily',
          failure((o) =>
            keys.updateKeyCaps({ keyId, capDaily: 10n ** 16n, removeCapDaily: false, removeCapMonthly: false }, o),
          ),
        ],
        [
          'key_id',
          failure((o) => keys.updateKeyCaps({ keyId: '', removeCapDaily: false, removeCapMonthly: false }, o)),
        ],
      ];
      for (const [param, pending] of cases) {
        const got = await pending;
        assert.equal(got.status, Status.INVALID_ARGUMENT, param);
        assert.equal(got.code, 'invalid_argument');
        assert.equal(got.param, param);
      }
      const names = (await keys.listKeys({ accountId }, admin)).keys.map((k) => k.name);
      assert.ok(!names.includes('x'), 'no key was created');
      const after = (await keys.listKeys({ accountId }, admin)).keys.find((k) => k.id === keyId);
      assert.deepEqual([after?.capDaily, after?.capMonthly], [undefined, undefined]);
    });
  });
}
