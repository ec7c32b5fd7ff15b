import assert from 'node:assert/strict';
import { Migrator } from 'kysely';
import pino from 'pino';
import { ClientError, Metadata, Status } from 'nice-grpc';
import { createAuthenticator } from '../../core/auth/authenticator';
import { oauthAccessTokens } from '../../core/oauth/principal';
import { generateKey, hashKey, displayParts } from '../../core/auth/key-format';
import { migrate, openStore } from '../../core/store/db';
import { migrationProvider } from '../../core/store/migrations';
import { createTestDatabase } from '../helpers/database';
import { startSvc, type TestSvc } from '../helpers/harness';
import { runSvc, svcJson } from '../cli/run-svc';

// The built-in sandbox's maps_search_places: always finds places, always costs this.
const PRICE = 460n;

type Call = (options: { metadata: Metadata; onTrailer: (t: Metadata) => void }) => Promise<unknown>;

async function refusal(call: Call, metadata: Metadata): Promise<{ status: Status; code: string | undefined }> {
  let trailer: Metadata | undefined;
  try {
    await call({ metadata, onTrailer: (t) => (trailer = t) });
  } catch (error) {
    assert.ok(error instanceof ClientError, String(error));
    return { status: error.code, code: trailer?.get('svc-error-code') };
  }
  return assert.fail('the call succeeded');
}

const DENIED = { status: Status.PERMISSION_DENIED, code: 'permission_denied' };

/**
 * Issue 20 point 2: key management over the API needs the `manage` scope, which no key has unless
 * it was created with it; and no key lifts its own caps. Reading one's own wallet and usage stays
 * open to every key.
 */
describe('security: managing keys with an API key', function () {
  this.timeout(60_000);
  let svc: TestSvc;
  let accountId: string;
  const asKey = (key: string): Metadata => new Metadata({ authorization: `Bearer ${key}` });

  before(async () => {
    svc = await startSvc();
    accountId = (await svc.core.accounts.create('managed')).id;
    await svc.core.deps.wallet.topUp({ accountId, amount: 1_000_000n });
  });
  after(async () => {
    await svc?.close();
  });

  const create = (scope: string, name: string, capDaily: bigint | null = null) =>
    svc.core.keys.create({ accountId, name, scope, capDaily });

  it('a capped tools key cannot lift its cap, revoke the all key, or be rolled by a chat key; it stays capped', async () => {
    const all = await create('all', 'all');
    const tools = await create('tools', 'tools', PRICE);
    const chat = await create('chat', 'chat');
    const { keys } = svc.connection.clients;

    const lifted = await refusal(
      (o) => keys.updateKeyCaps({ keyId: tools.key.id, removeCapDaily: true, removeCapMonthly: false }, o),
      asKey(tools.secret),
    );
    assert.deepEqual(lifted, DENIED);
    assert.deepEqual(await refusal((o) => keys.revokeKey({ keyId: all.key.id }, o), asKey(tools.secret)), DENIED);
    assert.deepEqual(await refusal((o) => keys.rollKey({ keyId: tools.key.id }, o), asKey(chat.secret)), DENIED);
    assert.deepEqual(
      await refusal(
        (o) =>
          keys.updateKeyCaps({ keyId: chat.key.id, capDaily: 1n, removeCapDaily: false, removeCapMonthly: false }, o),
        asKey(tools.secret),
      ),
      DENIED,
    );

    const after = await svc.core.keys.get(tools.key.id);
    assert.equal(after.capDaily, PRICE, 'the cap is unchanged');
    assert.equal((await svc.core.keys.get(all.key.id)).revokedAt, null, 'the all key is not revoked');
    assert.equal((await svc.core.keys.get(tools.key.id)).replacedBy, null, 'the tools key is not rolled');
    const tool = svc.connection.clients.tools;
    const first = await tool.callTool(
      { name: 'maps_search_places', arguments: { query: 'cafe' } },
      { metadata: asKey(tools.secret) },
    );
    assert.equal(first.isError, false);
    // A refusal for the cap is a tool result the model can read, not a gRPC error.
    const second = await tool.callTool(
      { name: 'maps_search_places', arguments: { query: 'cafe' } },
      { metadata: asKey(tools.secret) },
    );
    assert.equal(second.isError, true);
    assert.equal(second.errorCode, 'key_cap_exceeded');
    assert.equal(second.errorDetails?.['cap_limit'], 'daily');
  });

  it('without manage a key lists only its own lineage, yet reads its own wallet, ledger and usage', async () => {
    const plain = await create('chat', 'plain');
    await create('tools', 'sibling');
    const c = svc.connection.clients;
    const meta = { metadata: asKey(plain.secret) };
    const listed = await c.keys.listKeys({ accountId: '' }, meta);
    assert.deepEqual(
      listed.keys.map((k) => [k.id, k.manage]),
      [[plain.key.id, false]],
    );
    assert.equal((await c.wallet.getWallet({ accountId: '' }, meta)).wallet?.accountId, accountId);
    assert.ok((await c.wallet.listLedger({ accountId: '', limit: 10 }, meta)).entries.length > 0);
    await c.usage.listUsage({ pageSize: 10, pageToken: '' }, meta);
  });

  it('a manage key manages the account’s other keys and may tighten its own caps, never raise or remove them', async () => {
    const manager = await create('chat,manage', 'manager', 10_000n);
    assert.equal(manager.key.manage, true);
    assert.equal(manager.key.scope, 'chat');
    const other = await create('tools', 'other', 100n);
    const { keys } = svc.connection.clients;
    const meta = { metadata: asKey(manager.secret) };

    const listed = await keys.listKeys({ accountId: '' }, meta);
    assert.ok(listed.keys.some((k) => k.id === other.key.id));
    const raised = await keys.updateKeyCaps(
      { keyId: other.key.id, capDaily: 200n, removeCapDaily: false, removeCapMonthly: false },
      meta,
    );
    assert.equal(raised.key?.capDaily, 200n);
    const lowered = await keys.updateKeyCaps(
      { keyId: manager.key.id, capDaily: 5_000n, removeCapDaily: false, removeCapMonthly: false },
      meta,
    );
    assert.equal(lowered.key?.capDaily, 5_000n);
    for (const change of [
      { capDaily: 5_001n, removeCapDaily: false, removeCapMonthly: false },
      { removeCapDaily: true, removeCapMonthly: false },
    ]) {
      assert.deepEqual(
        await refusal((o) => keys.updateKeyCaps({ keyId: manager.key.id, ...change }, o), meta.metadata),
        DENIED,
      );
    }
    assert.equal((await svc.core.keys.get(manager.key.id)).capDaily, 5_000n);
    const rolled = await keys.rollKey({ keyId: other.key.id, grace: { seconds: 0n, nanos: 0 } }, meta);
    assert.equal(rolled.key?.manage, false, 'a rolled key keeps its scopes');
    const revoked = await keys.revokeKey({ keyId: rolled.key!.id }, meta);
    assert.ok(revoked.key?.revokedAt !== undefined);
  });

  it('a key made before migration 0006 has no manage scope after it', async () => {
    const database = await createTestDatabase();
    const store = openStore(database.url);
    try {
      const migrated = await new Migrator({ db: store.db, provider: migrationProvider }).migrateTo('0004_key_caps');
      assert.equal(migrated.error, undefined);
      const secret = generateKey();
      const { prefix, lastFour } = displayParts(secret);
      await store.db.insertInto('accounts').values({ id: 'acc_old', name: 'old', created_at: 1n }).execute();
      await store.db
        .insertInto('api_keys')
        // Only the columns that existed before 0006.
        .values({
          id: 'key_old',
          account_id: 'acc_old',
          name: 'old',
          key_hash: hashKey(secret),
          prefix,
          last_four: lastFour,
          created_at: 1n,
          scope: 'all',
          lineage_id: 'key_old',
        } as never)
        .execute();
      assert.ok((await migrate(store)).includes('0006_security_controls'));
      const principal = await createAuthenticator({
        store,
        accessTokens: oauthAccessTokens(store),
        logger: pino({ level: 'silent' }),
        now: Date.now,
      }).authenticate(secret);
      assert.equal(principal.manage, false);
    } finally {
      await store.close();
      await database.drop();
    }
  });

  it('svc key create --scope grants manage only when asked; a bad scope is a usage error naming the flag', async () => {
    const env = { SVC_DATABASE_URL: svc.databaseUrl };
    const plain = await svcJson(['key', 'create', '--account', accountId], env);
    assert.equal(plain['manage'], false);
    const managing = await svcJson(['key', 'create', '--account', accountId, '--scope', 'tools,manage'], env);
    assert.equal(managing['scope'], 'tools');
    assert.equal(managing['manage'], true);
    const bad = await runSvc(['key', 'create', '--account', accountId, '--scope', 'chat,tools'], env);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--scope/);
  });
});
