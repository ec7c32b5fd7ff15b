import assert from 'node:assert/strict';
import { ClientError, createChannel, createClient, Metadata, Status, type Channel } from 'nice-grpc';
import {
  HealthDefinition,
  HealthCheckResponse_ServingStatus,
} from 'nice-grpc-server-health/lib/proto/grpc/health/v1/health';
import { credentials } from '@grpc/grpc-js';
import { ServerReflectionClient } from 'nice-grpc-server-reflection/lib/proto/grpc/reflection/v1/reflection_grpc_pb';
import {
  ServerReflectionRequest,
  type ServerReflectionResponse,
} from 'nice-grpc-server-reflection/lib/proto/grpc/reflection/v1/reflection_pb';
import { FileDescriptorProto } from 'google-protobuf/google/protobuf/descriptor_pb';
import pino from 'pino';
import { AccountServiceDefinition } from '../../gen/svc/core/v1/accounts';
import { AuthServiceDefinition } from '../../gen/svc/core/v1/auth';
import { KeyServiceDefinition } from '../../gen/svc/core/v1/keys';
import { WalletServiceDefinition } from '../../gen/svc/core/v1/wallet';
import { createAuthenticator } from '../../core/auth/authenticator';
import { oauthAccessTokens } from '../../core/oauth/principal';
import { createKeyService } from '../../core/keys/service';
import { type SvcError } from '../../core/errors';
import { generateKey, isWellFormedKey } from '../../core/auth/key-format';
import { startSvc, type TestSvc } from '../helpers/harness';

function expectStatus(code: Status, trailerCode?: string) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof ClientError, String(error));
    assert.equal(error.code, code, error.details);
    return trailerCode === undefined || true;
  };
}

describe('gRPC core', function () {
  let svc: TestSvc;
  let channel: Channel;
  const admin = (): Metadata => new Metadata({ authorization: `Bearer ${svc.adminToken}` });
  const asKey = (key: string): Metadata => new Metadata({ authorization: `Bearer ${key}` });

  before(async function () {
    svc = await startSvc();
    channel = createChannel(svc.coreAddress);
  });

  after(async function () {
    channel.close();
    await svc.close();
  });

  it('answers grpc.health.v1 with SERVING', async function () {
    const health = createClient(HealthDefinition, channel);
    const response = await health.check({ service: '' });
    assert.equal(response.status, HealthCheckResponse_ServingStatus.SERVING);
  });

  it('lists its services through server reflection', async function () {
    const client = new ServerReflectionClient(svc.coreAddress, credentials.createInsecure());
    const names = await new Promise<string[]>((resolve, reject) => {
      const call = client.serverReflectionInfo();
      const found: string[] = [];
      call.on('data', (r: ServerReflectionResponse) =>
        found.push(...(r.getListServicesResponse()?.getServiceList() ?? []).map((s) => s.getName())),
      );
      call.on('end', () => resolve(found));
      call.on('error', reject);
      call.write(new ServerReflectionRequest().setListServices('*'));
      call.end();
    });
    client.close();
    for (const name of [
      'svc.core.v1.WalletService',
      'svc.core.v1.ChatService',
      'svc.core.v1.ToolService',
      'svc.core.v1.KeyService',
      'svc.core.v1.PaymentService',
      'grpc.health.v1.Health',
    ]) {
      assert.ok(names.includes(name), `${name} missing from ${names.join(', ')}`);
    }
  });

  it('describes a service through server reflection (its file, comments included), and says which symbol it lacks', async function () {
    const client = new ServerReflectionClient(svc.coreAddress, credentials.createInsecure());
    const answers = await new Promise<ServerReflectionResponse[]>((resolve, reject) => {
      const call = client.serverReflectionInfo();
      const found: ServerReflectionResponse[] = [];
      call.on('data', (r: ServerReflectionResponse) => found.push(r));
      call.on('end', () => resolve(found));
      call.on('error', reject);
      call.write(new ServerReflectionRequest().setFileContainingSymbol('svc.core.v1.WalletService'));
      call.write(new ServerReflectionRequest().setFileContainingSymbol('svc.core.v1.NoSuchService'));
      call.end();
    });
    client.close();
    assert.equal(answers.length, 2);
    const files = answers[0]?.getFileDescriptorResponse()?.getFileDescriptorProtoList_asU8() ?? [];
    assert.equal(files.length, 1);
    const file = FileDescriptorProto.deserializeBinary(files[0]!);
    assert.equal(file.getPackage(), 'svc.core.v1');
    assert.ok(
      file.getServiceList().some((service) => service.getName() === 'WalletService'),
      file
        .getServiceList()
        .map((service) => service.getName())
        .join(', '),
    );
    assert.ok((file.getSourceCodeInfo()?.getLocationList().length ?? 0) > 0, 'the file comes with its comments');
    assert.equal(answers[1]?.getErrorResponse()?.getErrorCode(), Status.NOT_FOUND);
    assert.match(answers[1]?.getErrorResponse()?.getErrorMessage() ?? '', /NoSuchService/);
  });

  it('refuses admin calls without the admin token, and keys for other accounts', async function () {
    const accounts = createClient(AccountServiceDefinition, channel);
    const wallet = createClient(WalletServiceDefinition, channel);
    await assert.rejects(accounts.createAccount({ name: 'x' }), expectStatus(Status.UNAUTHENTICATED));
    const { key, accountId } = await svc.createFundedKey(100);
    await assert.rejects(
      accounts.createAccount({ name: 'x' }, { metadata: asKey(key) }),
      expectStatus(Status.PERMISSION_DENIED),
    );
    await assert.rejects(
      wallet.topUp({ accountId, amount: 5n }, { metadata: asKey(key) }),
      expectStatus(Status.PERMISSION_DENIED),
    );
    await assert.rejects(
      wallet.topUp(
        { accountId, amount: 5n },
        { metadata: new Metadata({ authorization: 'Bearer not-the-admin-token-at-all' }) },
      ),
      expectStatus(Status.UNAUTHENTICATED),
    );
    // A key always acts on its own wallet, whatever account it names.
    const other = await svc.createFundedKey(7);
    const { wallet: seen } = await wallet.getWallet({ accountId: other.accountId }, { metadata: asKey(key) });
    assert.equal(seen?.accountId, accountId);
    assert.equal(seen?.balance, 100n);
    // A key without the `manage` scope manages no key; for one with it, another account's key id
    // is "not found", exactly like an unknown one.
    const keys = createClient(KeyServiceDefinition, channel);
    await assert.rejects(
      keys.revokeKey({ keyId: other.keyId }, { metadata: asKey(key) }),
      expectStatus(Status.PERMISSION_DENIED),
    );
    const manager = await svc.core.keys.create({ accountId, scope: 'manage' });
    await assert.rejects(
      keys.revokeKey({ keyId: other.keyId }, { metadata: asKey(manager.secret) }),
      expectStatus(Status.NOT_FOUND),
    );
  });

  it('validates every input and names the field', async function () {
    const accounts = createClient(AccountServiceDefinition, channel);
    const wallet = createClient(WalletServiceDefinition, channel);
    const { accountId } = await svc.createFundedKey(10);
    const trailers: Metadata[] = [];
    await assert.rejects(
      accounts.createAccount({ name: '   ' }, { metadata: admin(), onTrailer: (t) => trailers.push(t) }),
      expectStatus(Status.INVALID_ARGUMENT),
    );
    assert.equal(trailers.pop()?.get('svc-error-param'), 'name');
    await assert.rejects(
      wallet.topUp({ accountId, amount: -3n }, { metadata: admin(), onTrailer: (t) => trailers.push(t) }),
      expectStatus(Status.INVALID_ARGUMENT),
    );
    assert.equal(trailers.pop()?.get('svc-error-param'), 'amount');
    await assert.rejects(
      wallet.hold(
        { accountId, requestId: 'r', amount: 11n },
        { metadata: admin(), onTrailer: (t) => trailers.push(t) },
      ),
      expectStatus(Status.FAILED_PRECONDITION),
    );
    assert.equal(trailers.pop()?.get('svc-error-code'), 'insufficient_credit');
    await assert.rejects(
      wallet.getWallet({ accountId: '' }, { metadata: admin() }),
      expectStatus(Status.INVALID_ARGUMENT),
    );
    await assert.rejects(
      wallet.getWallet({ accountId: 'acc_missing' }, { metadata: admin() }),
      expectStatus(Status.NOT_FOUND),
    );
  });

  it('authenticates keys, and a revoked key stops at once on the core that revoked it', async function () {
    const auth = createClient(AuthServiceDefinition, channel);
    const keys = createClient(KeyServiceDefinition, channel);
    const { key, keyId, accountId } = await svc.createFundedKey(0);
    const { principal } = await auth.authenticate({}, { metadata: asKey(key) });
    assert.deepEqual(principal, { accountId, keyId, scope: 'all', lineageId: keyId });
    await keys.revokeKey({ keyId }, { metadata: admin() });
    await assert.rejects(auth.authenticate({}, { metadata: asKey(key) }), expectStatus(Status.UNAUTHENTICATED));
    await assert.rejects(
      auth.authenticate({}, { metadata: asKey(generateKey()) }),
      expectStatus(Status.UNAUTHENTICATED),
    );
    await assert.rejects(auth.authenticate({}), expectStatus(Status.UNAUTHENTICATED));
  });

  it('lists keys with prefix and last four only', async function () {
    const keys = createClient(KeyServiceDefinition, channel);
    const { key, accountId } = await svc.createFundedKey(0);
    const { keys: listed } = await keys.listKeys({ accountId }, { metadata: admin() });
    assert.equal(listed.length, 1);
    assert.ok(key.startsWith(listed[0]!.prefix));
    assert.equal(listed[0]!.lastFour, key.slice(-4));
    assert.ok(
      !JSON.stringify(listed, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)).includes(
        key.slice(7, 30),
      ),
    );
  });
});

describe('API keys and the auth cache', function () {
  let svc: TestSvc;
  before(async function () {
    svc = await startSvc();
  });
  after(async function () {
    await svc.close();
  });

  it('formats keys as svc_sk_ + base62 + checksum and rejects corrupted ones', function () {
    const key = generateKey();
    assert.match(key, /^svc_sk_[0-9A-Za-z]{46}$/);
    assert.ok(isWellFormedKey(key));
    const flipped = key.slice(0, 20) + (key[20] === 'a' ? 'b' : 'a') + key.slice(21);
    assert.ok(!isWellFormedKey(flipped));
    assert.ok(!isWellFormedKey(key.slice(0, -1)));
    assert.ok(!isWellFormedKey(`sk_${key.slice(7)}`));
  });

  it('rejects a malformed key without reading the database', async function () {
    const closedStore = {
      ...svc.store,
      db: new Proxy(svc.store.db, {
        get: () => {
          throw new Error('database was read');
        },
      }),
    };
    const auth = createAuthenticator({
      store: closedStore,
      accessTokens: oauthAccessTokens(closedStore),
      logger: pino({ level: 'silent' }),
      now: Date.now,
    });
    await assert.rejects(auth.authenticate('svc_sk_tooshort'), (e: SvcError) => e.code === 'invalid_api_key');
    await assert.rejects(auth.authenticate(`svc_sk_${'A'.repeat(46)}`), (e: SvcError) => e.code === 'invalid_api_key');
    await assert.rejects(auth.authenticate(generateKey()), /database was read/);
  });

  it('sees a revocation made by another replica once its cache entry (4 s) expires', async function () {
    let clock = 1_000_000;
    const replicaB = createAuthenticator({
      store: svc.store,
      accessTokens: oauthAccessTokens(svc.store),
      logger: pino({ level: 'silent' }),
      now: () => clock,
    });
    const { key, keyId } = await svc.createFundedKey(0);
    assert.equal((await replicaB.authenticate(key)).keyId, keyId);
    // Replica A revokes; B still trusts its cached answer for under 5 s, then reads again.
    await createKeyService({ store: svc.store, now: Date.now }).revoke(keyId);
    clock += 3000;
    assert.equal((await replicaB.authenticate(key)).keyId, keyId);
    clock += 1500;
    await assert.rejects(replicaB.authenticate(key), (e: SvcError) => e.code === 'invalid_api_key');
  });

  it('writes last_used_at at most once a minute per key', async function () {
    let clock = 5_000_000;
    const auth = createAuthenticator({
      store: svc.store,
      accessTokens: oauthAccessTokens(svc.store),
      logger: pino({ level: 'silent' }),
      now: () => clock,
      cacheTtlMs: 0,
    });
    const { key, keyId } = await svc.createFundedKey(0);
    const lastUsed = async (): Promise<bigint | null> =>
      (
        await svc.store.db
          .selectFrom('api_keys')
          .select('last_used_at')
          .where('id', '=', keyId)
          .executeTakeFirstOrThrow()
      ).last_used_at;
    // The write is not awaited by authenticate: poll the row until it shows (or time runs out).
    const becomes = async (value: bigint): Promise<void> => {
      for (let i = 0; i < 500 && (await lastUsed()) !== value; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(await lastUsed(), value);
    };
    await auth.authenticate(key);
    await becomes(5_000_000n);
    clock += 30_000;
    await auth.authenticate(key);
    assert.equal(await lastUsed(), 5_000_000n);
    clock += 31_000;
    await auth.authenticate(key);
    // Written at 5_061_000 only if the call 30 s after the first wrote nothing: had it written,
    // this one would come 31 s after it, inside the minute, and write nothing either.
    await becomes(5_061_000n);
  });
});
