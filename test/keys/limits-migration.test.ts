import assert from 'node:assert/strict';
import { Migrator } from 'kysely';
import { migrationProvider } from '../../core/store/migrations';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/database';

// Migration 0023 starts the total counter of each lineage capped before it at what its keys spent
// (usage records, rolled keys included) and hold, so a total cap set later counts the whole history.
describe('migration 0023_key_limits: the total counter of lineages capped before it', function () {
  this.timeout(60_000);
  let database: TestDatabase;
  let store: Store;

  before(async () => {
    database = await createTestDatabase();
    store = openStore(database.url);
    const { error } = await new Migrator({ db: store.db, provider: migrationProvider }).migrateTo(
      '0022_console_key_forms',
    );
    assert.equal(error, undefined);
  });

  after(async () => {
    await store?.close();
    await database?.drop();
  });

  it('counts the lineage spend and open holds of every key of the lineage, and nothing of others', async () => {
    const db = store.db.withoutPlugins() as unknown as typeof store.db;
    const key = (id: string, lineage: string) => ({
      id,
      account_id: 'acc_m',
      name: '',
      key_hash: id.padEnd(64, '0'),
      prefix: 'svc_sk_x',
      last_four: 'abcd',
      created_at: 1n,
      last_used_at: null,
      revoked_at: null,
      scope: 'all',
      expires_at: null,
      lineage_id: lineage,
      replaced_by: null,
      can_manage: 0,
    });
    await db.insertInto('accounts').values({ id: 'acc_m', name: 'm', created_at: 1n }).execute();
    // Raw rows as they stood at 0022: the key columns of 0023 do not exist yet.
    await db
      .insertInto('api_keys')
      .values([key('key_a', 'key_a'), key('key_b', 'key_a'), key('key_c', 'key_c')] as never)
      .execute();
    await db
      .insertInto('key_lineages')
      .values({
        lineage_id: 'key_a',
        account_id: 'acc_m',
        cap_daily: 5000n,
        cap_monthly: null,
        updated_at: 1n,
      } as never)
      .execute();
    const usage = (requestId: string, keyId: string, cost: bigint, createdAt: bigint) => ({
      request_id: requestId,
      client_request_id: null,
      account_id: 'acc_m',
      key_id: keyId,
      kind: 'tool',
      resource: 'maps_search_places',
      provider: 'sandbox',
      input_tokens: 0n,
      output_tokens: 0n,
      cost,
      status: 'ok',
      error_code: null,
      latency_ms: 1n,
      created_at: createdAt,
    });
    await db
      .insertInto('usage_records')
      .values([usage('r1', 'key_a', 460n, 1n), usage('r2', 'key_b', 200n, 2n), usage('r3', 'key_c', 999n, 3n)])
      .execute();
    await db
      .insertInto('holds')
      .values([
        {
          id: 'hold_1',
          account_id: 'acc_m',
          request_id: 'r4',
          amount: 300n,
          status: 'held',
          settled_amount: null,
          expires_at: 9n,
          created_at: 4n,
          lineage_id: 'key_a',
          client_request_id: null,
        },
        {
          id: 'hold_2',
          account_id: 'acc_m',
          request_id: 'r5',
          amount: 70n,
          status: 'settled',
          settled_amount: 60n,
          expires_at: 9n,
          created_at: 4n,
          lineage_id: 'key_a',
          client_request_id: null,
        },
      ])
      .execute();

    await migrate(store);
    const rows = await store.db.selectFrom('key_spend').select(['lineage_id', 'period', 'spent', 'held']).execute();
    assert.deepEqual(rows, [{ lineage_id: 'key_a', period: 't:all', spent: 660n, held: 300n }]);
    const lineage = await store.db.selectFrom('key_lineages').select(['cap_total']).executeTakeFirstOrThrow();
    assert.equal(lineage.cap_total, null);
  });
});
