import assert from 'node:assert/strict';
import pino from 'pino';
import { createAccountService } from '../../core/accounts/service';
import type { Principal } from '../../core/auth/types';
import { createMeter } from '../../core/billing/meter';
import type { PreparedChat } from '../../core/chat/prepare';
import { createChatRunner } from '../../core/chat/runner';
import { parseConfig } from '../../core/config/load';
import { findChatModel } from '../../core/models/catalog';
import { knownBound } from '../../core/providers/llm/tokens';
import type { ChatProvider } from '../../core/providers/llm/types';
import { migrate, openStore, type Store } from '../../core/store/db';
import { createUsageRecorder } from '../../core/usage/recorder';
import { createWalletService } from '../../core/wallet/service';
import type { WalletService } from '../../core/wallet/types';
import { createTestDatabase, type TestDatabase } from '../helpers/database';

/**
 * A provider whose stream() throws before it returns an iterator (a bad request body it refuses
 * at once, a bug) must not leave the call's hold behind: the wallet's held amount is back to zero
 * at once, not after the hold TTL, and nothing is charged.
 */
describe('core: the chat runner releases the hold when a provider cannot even start its stream', function () {
  this.timeout(30_000);
  let database: TestDatabase;
  let store: Store;
  let wallet: WalletService;

  before(async () => {
    database = await createTestDatabase();
    store = openStore(database.url);
    await migrate(store);
    wallet = createWalletService({ store, now: Date.now });
  });

  after(async () => {
    await store?.close();
    await database?.drop();
  });

  it('fails the call and frees the hold', async () => {
    const account = await createAccountService({ store, now: Date.now }).create('runner-hold');
    await wallet.topUp({ accountId: account.id, amount: 1_000_000n });
    const logger = pino({ level: 'silent' });
    const meter = createMeter({
      wallet,
      usage: createUsageRecorder({ store, now: Date.now }),
      logger,
      now: Date.now,
      holdTtlSeconds: 600,
    });
    const runner = createChatRunner({ meter, logger, now: Date.now });
    const provider: ChatProvider = {
      name: 'broken',
      complete: () => Promise.reject(new Error('unused')),
      stream: () => {
        throw new Error('refused before any request was made');
      },
    };
    const model = findChatModel(parseConfig('', {}, 'test'), 'svc-pro');
    const prepared: PreparedChat = {
      model,
      provider,
      request: { model: 'x', messages: [{ role: 'user', content: 'hi' }] },
      outputLimit: 100,
      choices: 1,
      inputUpperBound: knownBound(40, 10),
      clientLimit: true,
      limitName: 'max_tokens',
    };
    const principal = {
      accountId: account.id,
      keyId: 'k',
      scope: 'chat',
      manage: false,
      lineageId: 'k',
      capped: false,
    } as Principal;
    const run = {
      principal,
      requestId: 'req_000000000000000000000001',
      kind: 'chat',
      signal: new AbortController().signal,
    };
    await assert.rejects(async () => {
      for await (const _ of runner.stream(prepared, run)) void _;
    }, /refused before any request/);
    const after = await wallet.get(account.id);
    assert.equal(after.held, 0n, 'the hold was released');
    assert.equal(after.balance, 1_000_000n, 'nothing was charged');
  });
});
