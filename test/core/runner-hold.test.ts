import assert from 'node:assert/strict';
import pino from 'pino';
import { createAccountService } from '../../core/accounts/service';
import type { Principal } from '../../core/auth/types';
import { createMeter } from '../../core/billing/meter';
import type { PreparedChat } from '../../core/chat/prepare';
import { createChatRunner } from '../../core/chat/runner';
import { parseConfig } from '../../core/config/load';
import { findChatModel } from '../../core/models/catalog';
import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';
import { usageCost } from '../../core/chat/pricing';
import type { ModelConfig } from '../../core/config/types';
import { isSvcError } from '../../core/errors';
import { randomBase64url } from '../../core/ids';
import { estimateUsage, knownBound } from '../../core/providers/llm/tokens';
import type { ChatProvider, WireChunk, WireUsage } from '../../core/providers/llm/types';
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

/**
 * Leaving never costs more than finishing (SPEC §6, issue 48): a caller that leaves after the
 * upstream's usage came (before the final frame reached it) pays no more than that usage prices,
 * and one that leaves before pays svc's tokenizer count of what it was handed.
 */
describe('core: the chat runner charges a departed stream no more than finishing', function () {
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

  /** Streams `words`, then (if given) the upstream's usage, then waits for the caller to leave. */
  async function leave(usage: WireUsage | undefined): Promise<{ charged: bigint; model: ModelConfig }> {
    const account = await createAccountService({ store, now: Date.now }).create('runner-departed');
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
    let waiting!: () => void;
    const waits = new Promise<void>((resolve) => (waiting = resolve));
    const chunk = (content: string, extra: Partial<WireChunk> = {}): WireChunk => ({
      id: 'c',
      created: 1,
      model: 'm',
      choices: content === '' ? [] : [{ index: 0, delta: { content }, finish_reason: null }],
      ...extra,
    });
    const provider: ChatProvider = {
      name: 'leaving',
      complete: () => Promise.reject(new Error('unused')),
      async *stream(_request, signal) {
        for (const word of ['one ', 'two ', 'three']) yield chunk(word);
        if (usage !== undefined) yield chunk('', { usage });
        waiting();
        await new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
      },
    };
    const model = findChatModel(parseConfig('', {}, 'test'), 'svc-pro');
    const prepared: PreparedChat = {
      model,
      provider,
      request: { model: 'x', messages: [{ role: 'user', content: 'count slowly' }] },
      outputLimit: 100,
      choices: 1,
      inputUpperBound: knownBound(40, 40),
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
    const controller = new AbortController();
    const run = {
      principal,
      requestId: `req_departed_${randomBase64url(12)}`,
      kind: 'chat',
      signal: controller.signal,
    };
    const consumed = (async () => {
      for await (const _ of runner.stream(prepared, run)) void _;
    })();
    await waits;
    controller.abort();
    await assert.rejects(consumed, (error: unknown) => isSvcError(error) && error.code === 'cancelled');
    const after = await wallet.get(account.id);
    assert.equal(after.held, 0n, 'the hold was settled');
    return { charged: 1_000_000n - after.balance, model };
  }

  it('charges the tokenizer count of the prompt and the text handed over when no usage came', async () => {
    const { charged, model } = await leave(undefined);
    const counted = estimateUsage([{ role: 'user', content: 'count slowly' }], undefined, 'one two three');
    assert.equal(counted.completion_tokens, countTokens('one two three'));
    assert.equal(charged, usageCost(model.price, counted));
  });

  it("charges no more than the upstream's usage when it came before the caller left", async () => {
    const reported: WireUsage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
    const { charged, model } = await leave(reported);
    assert.ok(
      usageCost(model.price, reported) <
        usageCost(model.price, estimateUsage([{ role: 'user', content: 'count slowly' }], undefined, 'one two three')),
    );
    assert.equal(charged, usageCost(model.price, reported));
  });
});
