import assert from 'node:assert/strict';
import { createAccountService } from '../../core/accounts/service';
import type { Principal } from '../../core/auth/types';
import { createIdempotency, type Codec } from '../../core/chat/idempotency';
import { isSvcError } from '../../core/errors';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createTestDatabase, type TestDatabase } from '../helpers/database';

const LEASE_MS = 60_000;

const codec: Codec<string> = {
  encode: (value) => value,
  decode: (json) => String(json),
  replayed: (value) => `${value} (replayed)`,
};

/**
 * An Idempotency-Key whose first request outlived its lease (its core stalled) and was taken over by
 * a second request: the first one's end (failure or success) touches only its own claim, so a third
 * request neither runs again while the second is in flight nor replays the stale first result.
 */
describe('core: an Idempotency-Key claim belongs to the request that made it', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  let store: Store;
  let principal: Principal;
  let clock = 1_000_000;

  before(async () => {
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    const account = await createAccountService({ store, now: () => clock }).create('idem-claims');
    principal = {
      accountId: account.id,
      keyId: 'k',
      scope: 'chat',
      manage: false,
      lineageId: 'k',
      capped: false,
    } as Principal;
  });

  after(async () => {
    await store?.close();
    await database?.drop();
  });

  function idempotency() {
    return createIdempotency({ store, now: () => clock, leaseMs: LEASE_MS, balance: async () => 0n });
  }

  function deferred(): { promise: Promise<string>; resolve: (v: string) => void; reject: (e: Error) => void } {
    let resolve!: (v: string) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<string>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  }

  async function inProgress(run: Promise<unknown>): Promise<boolean> {
    try {
      await run;
      return false;
    } catch (error) {
      if (isSvcError(error) && error.code === 'idempotency_conflict') return true;
      throw error;
    }
  }

  it('a stalled first request that fails does not free the claim its successor holds', async () => {
    const idem = idempotency();
    const key = 'stalled-then-failed';
    const first = deferred();
    let firstRan = 0;
    const firstRun = idem.unary(principal, 'req_a', key, () => 'body', codec, () => {
      firstRan += 1;
      return first.promise;
    });
    // The work starts only once the claim is stored: only then may the clock move past its lease.
    for (let i = 0; i < 500 && firstRan === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    assert.equal(firstRan, 1);
    clock += LEASE_MS + 1; // the first request's lease ran out: its core looked dead
    const second = deferred();
    let secondRan = 0;
    const secondRun = idem.unary(principal, 'req_b', key, () => 'body', codec, () => {
      secondRan += 1;
      return second.promise;
    });
    for (let i = 0; i < 500 && secondRan === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    assert.equal(secondRan, 1, 'the second request took over the expired claim');

    first.reject(new Error('upstream failed'));
    await assert.rejects(firstRun, /upstream failed/);

    let thirdRan = 0;
    const third = idem.unary(principal, 'req_c', key, () => 'body', codec, async () => {
      thirdRan += 1;
      return 'third';
    });
    assert.equal(await inProgress(third), true, 'the second request still holds the key');
    assert.equal(thirdRan, 0, 'no third upstream call (and charge) for the same key');

    second.resolve('second');
    assert.equal(await secondRun, 'second');
    assert.equal(await idem.unary(principal, 'req_d', key, () => 'body', codec, async () => 'fourth'), 'second (replayed)');
  });

  it('a stalled first request that succeeds late does not overwrite its successor', async () => {
    const idem = idempotency();
    const key = 'stalled-then-succeeded';
    const first = deferred();
    let firstRan = 0;
    const firstRun = idem.unary(principal, 'req_a', key, () => 'body', codec, () => {
      firstRan += 1;
      return first.promise;
    });
    // The work starts only once the claim is stored: only then may the clock move past its lease.
    for (let i = 0; i < 500 && firstRan === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    assert.equal(firstRan, 1);
    clock += LEASE_MS + 1;
    const second = deferred();
    let secondRan = 0;
    const secondRun = idem.unary(principal, 'req_b', key, () => 'body', codec, () => {
      secondRan += 1;
      return second.promise;
    });
    // Poll until the second request holds the claim (a loaded machine may take a while).
    for (let i = 0; i < 500 && secondRan === 0; i += 1) await new Promise((r) => setTimeout(r, 10));
    assert.equal(secondRan, 1, 'the second request took over the expired claim');

    first.resolve('first');
    assert.equal(await firstRun, 'first');
    const third = idem.unary(principal, 'req_c', key, () => 'body', codec, async () => 'third');
    assert.equal(await inProgress(third), true, 'the late first result did not mark the key done under the second');

    second.resolve('second');
    assert.equal(await secondRun, 'second');
    assert.equal(await idem.unary(principal, 'req_d', key, () => 'body', codec, async () => 'x'), 'second (replayed)');
  });
});
