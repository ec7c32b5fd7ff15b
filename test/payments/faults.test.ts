import assert from 'node:assert/strict';
import pino from 'pino';
import { Agent } from 'undici';
import { createAccountService } from '../../core/accounts/service';
import type { PaymentsConfig } from '../../core/config/types';
import { createGateways } from '../../core/payments/gateways';
import { createPaymentService, type PaymentService } from '../../core/payments/service';
import type { GatewayName } from '../../core/payments/types';
import { upstreamHttp } from '../../core/providers/http';
import { migrate, openStore, type Store } from '../../core/store/db';
import { isSvcError } from '../../core/errors';
import { startFakeGateways, type FakeGateways } from '../fakes/payment-gateways';
import { createTestDatabase, requireMysql, type TestDatabase } from '../helpers/database';

/*
 * Exactly once under every fault (issue 34): real database, the real gateway clients over HTTP
 * to faithful fakes of both gateways' wire, the return query exactly as the fake's start page
 * redirects it. After each case, every wallet equals the sum of its ledger and the credits equal
 * the sum of the paid payments.
 */

const logger = pino({ level: process.env['SVC_TEST_LOG'] ?? 'silent' });

interface World {
  db: TestDatabase;
  store: Store;
  fake: FakeGateways;
  agent: Agent;
  clock: { t: number };
  service: PaymentService;
  accounts: string[];
  make(): PaymentService;
}

function paymentsConfig(fake: FakeGateways, timeoutMs = 1_500): PaymentsConfig {
  return {
    publicUrl: 'https://svc.example.com',
    minToman: 10_000n,
    maxToman: 50_000_000n,
    expireMinutes: 60,
    gateways: new Map([
      [
        'zarinpal',
        {
          name: 'zarinpal',
          merchant: '1344b5d4-0048-11e8-94db-005056a205be',
          baseUrl: fake.baseUrl('zarinpal'),
          timeoutMs,
        },
      ],
      ['zibal', { name: 'zibal', merchant: 'zibal', baseUrl: fake.baseUrl('zibal'), timeoutMs }],
    ]),
  };
}

async function world(kind: 'default' | 'mysql' = 'default'): Promise<World> {
  const db = await createTestDatabase(kind);
  const store = openStore(db.url);
  await migrate(store);
  const fake = await startFakeGateways();
  const agent = new Agent();
  const clock = { t: Date.now() };
  const accountService = createAccountService({ store, now: () => clock.t });
  const accounts = [(await accountService.create('Payer')).id, (await accountService.create('Other')).id];
  const make = () =>
    createPaymentService({
      store,
      logger,
      now: () => clock.t,
      config: paymentsConfig(fake),
      gateways: createGateways(paymentsConfig(fake), upstreamHttp(agent)),
      waitMs: 5_000,
    });
  return { db, store, fake, agent, clock, service: make(), accounts, make };
}

async function teardown(w: World): Promise<void> {
  await w.fake.close();
  await w.agent.close();
  await w.store.close();
  await w.db.drop();
}

/** balance = sum(ledger) for every wallet; credited top-ups = sum(paid payments), once each. */
async function assertBooks(store: Store): Promise<void> {
  const wallets = await store.db.selectFrom('wallets').select(['account_id', 'balance']).execute();
  for (const w of wallets) {
    const ledger = await store.db
      .selectFrom('ledger_entries')
      .select(['amount', 'kind', 'request_id'])
      .where('account_id', '=', w.account_id)
      .execute();
    const sum = ledger.reduce((s, e) => s + BigInt(e.amount), 0n);
    assert.equal(BigInt(w.balance), sum, `wallet ${w.account_id}: balance = sum(ledger)`);
    const paid = await store.db
      .selectFrom('payments')
      .select(['id', 'amount'])
      .where('account_id', '=', w.account_id)
      .where('state', '=', 'paid')
      .execute();
    const topups = ledger.filter((e) => e.kind === 'topup');
    assert.deepEqual(
      topups.map((e) => e.request_id).sort(),
      paid.map((p) => p.id).sort(),
      'one topup per paid payment',
    );
    assert.equal(
      topups.reduce((s, e) => s + BigInt(e.amount), 0n),
      paid.reduce((s, p) => s + BigInt(p.amount), 0n),
      'credited = sum(paid payments)',
    );
  }
}

async function balance(store: Store, accountId: string): Promise<bigint> {
  const row = await store.db
    .selectFrom('wallets')
    .select('balance')
    .where('account_id', '=', accountId)
    .executeTakeFirstOrThrow();
  return BigInt(row.balance);
}

function queryOf(url: string): Map<string, string> {
  return new Map(new URL(url).searchParams);
}

/** The payer's browser: the gateway's start page with an action, and where it redirects. */
async function payerReturns(redirectUrl: string, action: 'pay' | 'cancel' | 'fail'): Promise<string> {
  const res = await fetch(`${redirectUrl}?action=${action}`, { redirect: 'manual' });
  assert.equal(res.status, 302);
  const location = res.headers.get('location');
  assert.ok(location !== null);
  return location;
}

const GATEWAYS: GatewayName[] = ['zarinpal', 'zibal'];

for (const gateway of GATEWAYS) {
  describe(`payments over ${gateway}: exactly once under every fault`, function () {
    this.timeout(30_000);
    let w: World;
    beforeEach(async () => {
      w = await world();
    });
    afterEach(async () => {
      await assertBooks(w.store);
      await teardown(w);
    });

    it('pays 50,000 toman: rial on the wire, one topup entry with the payment id and the receipt', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 50_000n });
      assert.equal(started.payment.state, 'pending');
      assert.match(started.payment.id, /^pay_/);
      const request = w.fake.calls.find((c) => c.endpoint.startsWith('request'));
      assert.equal(request?.body['amount'], 500_000);
      const back = await payerReturns(started.redirectUrl, 'pay');
      assert.ok(back.startsWith(`https://svc.example.com/console/payments/${gateway}/return?`));
      const paid = await w.service.completeReturn({ gateway, query: queryOf(back) });
      assert.equal(paid.state, 'paid');
      assert.match(paid.receipt, /^\d+$/);
      assert.match(paid.cardPan, /\*{4}/);
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 50_000n);
      const entry = await w.store.db
        .selectFrom('ledger_entries')
        .selectAll()
        .where('account_id', '=', w.accounts[0] ?? '')
        .executeTakeFirstOrThrow();
      assert.equal(entry.kind, 'topup');
      assert.equal(entry.request_id, paid.id);
      assert.ok(entry.reference.includes(paid.receipt));
    });

    it('a replayed and a doubled return credit once', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 20_000n });
      const back = await payerReturns(started.redirectUrl, 'pay');
      const all = await Promise.all(
        [1, 2, 3, 4, 5].map(() => w.service.completeReturn({ gateway, query: queryOf(back) })),
      );
      for (const p of all) assert.equal(p.state, 'paid');
      for (let i = 0; i < 3; i++)
        assert.equal((await w.service.completeReturn({ gateway, query: queryOf(back) })).state, 'paid');
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 20_000n);
    });

    it('returns racing each other and two reconcilers (two services) credit once', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 30_000n });
      const back = await payerReturns(started.redirectUrl, 'pay');
      w.clock.t += 3 * 60_000;
      const other = w.make();
      await Promise.all([
        w.service.completeReturn({ gateway, query: queryOf(back) }),
        other.completeReturn({ gateway, query: queryOf(back) }),
        w.service.reconcile(),
        other.reconcile(),
      ]);
      assert.equal((await w.service.get(started.payment.id)).state, 'paid');
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 30_000n);
    });

    it('a verify whose answer is lost stays pending; the reconciler gets 101/201 and credits once', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 40_000n });
      const back = await payerReturns(started.redirectUrl, 'pay');
      w.fake.fault(gateway, 'verify', 'lost');
      const first = await w.service.completeReturn({ gateway, query: queryOf(back) });
      assert.equal(first.state, 'pending');
      assert.equal(w.fake.sessions.get(started.payment.reference)?.state, 'verified', 'the gateway did verify');
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 0n);
      w.clock.t += 3 * 60_000;
      const report = await w.service.reconcile();
      assert.equal(report.paid, 1);
      const after = await w.service.get(started.payment.id);
      assert.equal(after.state, 'paid');
      assert.match(after.receipt, /^\d+$/);
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 40_000n);
    });

    for (const fault of ['5xx', 'hang'] as const) {
      it(`a gateway ${fault} on verify leaves the payment pending; the reconciler settles it`, async () => {
        const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 10_000n });
        const back = await payerReturns(started.redirectUrl, 'pay');
        w.fake.fault(gateway, 'verify', fault);
        assert.equal((await w.service.completeReturn({ gateway, query: queryOf(back) })).state, 'pending');
        // Within two minutes the reconciler leaves it to the payer's return, except that
        // ZarinPal lists it among its paid and unverified sessions.
        assert.equal((await w.service.reconcile()).paid, gateway === 'zarinpal' ? 1 : 0);
        w.clock.t += 3 * 60_000;
        await w.service.reconcile();
        assert.equal((await w.service.get(started.payment.id)).state, 'paid');
        assert.equal(await balance(w.store, w.accounts[0] ?? ''), 10_000n);
      });

      it(`a gateway ${fault} on request fails the payment with plain words, nothing credited`, async () => {
        w.fake.fault(gateway, 'request', fault);
        await assert.rejects(
          w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 10_000n }),
          (error: unknown) => {
            assert.ok(isSvcError(error));
            assert.equal(error.code, 'upstream_unavailable');
            assert.match(error.message, /could not be reached; nothing was charged/);
            return true;
          },
        );
        const { payments } = await w.service.list({ accountId: w.accounts[0] ?? '' });
        assert.deepEqual(
          payments.map((p) => p.state),
          ['failed'],
        );
      });
    }

    it('a cancelled payment fails, nothing credited; a payer who never returns is credited by the reconciler', async () => {
      const cancelled = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 10_000n });
      const back = await payerReturns(cancelled.redirectUrl, 'cancel');
      const failed = await w.service.completeReturn({ gateway, query: queryOf(back) });
      assert.equal(failed.state, 'failed');
      assert.match(failed.failure, /cancelled or did not go through/);
      const gone = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 25_000n });
      w.fake.pay(gone.payment.reference);
      w.clock.t += 3 * 60_000;
      await w.service.reconcile();
      assert.equal((await w.service.get(gone.payment.id)).state, 'paid');
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 25_000n);
    });

    it('an unpaid payment expires after expire_minutes, never left pending', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 10_000n });
      w.clock.t += 3 * 60_000;
      await w.service.reconcile();
      assert.equal((await w.service.get(started.payment.id)).state, 'pending', 'the payer may still be at the bank');
      w.clock.t += 60 * 60_000;
      const report = await w.service.reconcile();
      assert.equal(report.expired, 1);
      assert.equal((await w.service.get(started.payment.id)).state, 'expired');
    });

    it('a forged early return (OK before paying) cannot lose a payment made after it', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 15_000n });
      const forged =
        gateway === 'zarinpal'
          ? new Map([
              ['Authority', started.payment.reference],
              ['Status', 'OK'],
            ])
          : new Map([
              ['trackId', started.payment.reference],
              ['success', '1'],
              ['status', '1'],
            ]);
      assert.equal((await w.service.completeReturn({ gateway, query: forged })).state, 'failed');
      w.fake.pay(started.payment.reference);
      // ZarinPal lists it as paid and unverified at once; Zibal's is re-verified ten minutes on.
      w.clock.t += 11 * 60_000;
      await w.service.reconcile();
      assert.equal((await w.service.get(started.payment.id)).state, 'paid');
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 15_000n);
    });

    it('a tampered amount in the return query is ignored; a session paid for another amount is never credited', async () => {
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 12_000n });
      const back = queryOf(await payerReturns(started.redirectUrl, 'pay'));
      back.set('amount', '999999990');
      back.set('Amount', '999999990');
      assert.equal((await w.service.completeReturn({ gateway, query: back })).state, 'paid');
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 12_000n);

      const other = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 13_000n });
      const session = w.fake.sessions.get(other.payment.reference);
      assert.ok(session);
      // The payer paid less than the payment is for (what -50 / a different amount report).
      (session as { amount: number }).amount = 10_000;
      const back2 = await payerReturns(other.redirectUrl, 'pay');
      const p = await w.service.completeReturn({ gateway, query: queryOf(back2) });
      assert.equal(p.state, 'failed');
      assert.match(p.failure, /amount paid is not the amount/);
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 12_000n);
    });

    it("a return credits the payment's own account, whatever account starts the return", async () => {
      const started = await w.service.start({ accountId: w.accounts[1] ?? '', gateway, amount: 11_000n });
      const back = await payerReturns(started.redirectUrl, 'pay');
      const paid = await w.service.completeReturn({ gateway, query: queryOf(back) });
      assert.equal(paid.accountId, w.accounts[1]);
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 0n);
      assert.equal(await balance(w.store, w.accounts[1] ?? ''), 11_000n);
    });

    it('a gateway reference reused by the gateway credits at most one payment', async () => {
      const first = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 10_000n });
      w.fake.fault(gateway, 'request', 'reuse-reference');
      await assert.rejects(
        w.service.start({ accountId: w.accounts[1] ?? '', gateway, amount: 10_000n }),
        /payment session already used/,
      );
      const back = await payerReturns(first.redirectUrl, 'pay');
      await w.service.completeReturn({ gateway, query: queryOf(back) });
      await w.service.completeReturn({ gateway, query: queryOf(back) });
      assert.equal(await balance(w.store, w.accounts[0] ?? ''), 10_000n);
      assert.equal(await balance(w.store, w.accounts[1] ?? ''), 0n);
    });

    it('reads numbers sent as strings', async () => {
      w.fake.stringNumbers = true;
      const started = await w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount: 10_000n });
      const back = await payerReturns(started.redirectUrl, 'pay');
      const paid = await w.service.completeReturn({ gateway, query: queryOf(back) });
      assert.equal(paid.state, 'paid');
      assert.match(paid.receipt, /^\d+$/);
    });

    it('refuses bad returns and amounts in plain words, crediting nothing', async () => {
      const refuse = async (query: Map<string, string>, code: string, message: RegExp, name: string = gateway) =>
        assert.rejects(w.service.completeReturn({ gateway: name, query }), (error: unknown) => {
          assert.ok(isSvcError(error));
          assert.equal(error.code, code);
          assert.match(error.message, message);
          return true;
        });
      await refuse(new Map(), 'invalid_argument', /no valid payment reference/);
      const malformed = gateway === 'zarinpal' ? new Map([['Authority', 'A123']]) : new Map([['trackId', '12ab']]);
      await refuse(malformed, 'invalid_argument', /no valid payment reference/);
      const unknown =
        gateway === 'zarinpal' ? new Map([['Authority', `A${'0'.repeat(35)}`]]) : new Map([['trackId', '123456789']]);
      await refuse(unknown, 'not_found', /No payment of this server matches/);
      // Another gateway's reference: a trackId is no authority, an authority no trackId.
      const foreign =
        gateway === 'zarinpal' ? new Map([['trackId', '123456789']]) : new Map([['Authority', `A${'0'.repeat(35)}`]]);
      await refuse(foreign, 'invalid_argument', /no valid payment reference/);
      await refuse(new Map(), 'invalid_argument', /Unknown payment gateway "idpay"/, 'idpay');
      for (const amount of [0n, 9_999n, 50_000_001n])
        await assert.rejects(
          w.service.start({ accountId: w.accounts[0] ?? '', gateway, amount }),
          /from 10,000 to 50,000,000 toman/,
        );
      assert.equal((await w.service.list({})).payments.length, 0, 'a refused amount makes no payment');
    });
  });
}

describe('payments on MariaDB: two replicas reconciling at once', function () {
  this.timeout(60_000);
  let w: World;
  let second: Store | undefined;
  before(function () {
    requireMysql(this);
  });
  afterEach(async () => {
    if (w !== undefined) {
      await assertBooks(w.store);
      await second?.close();
      await teardown(w);
    }
  });

  it('credits every paid payment exactly once while returns race both reconcilers', async () => {
    w = await world('mysql');
    second = openStore(w.db.url);
    const clock = w.clock;
    const replica = createPaymentService({
      store: second,
      logger,
      now: () => clock.t,
      config: paymentsConfig(w.fake),
      gateways: createGateways(paymentsConfig(w.fake), upstreamHttp(w.agent)),
      waitMs: 5_000,
    });
    const started: { gateway: GatewayName; payment: { id: string }; redirectUrl: string }[] = [];
    for (let i = 0; i < 12; i++) {
      const gateway = GATEWAYS[i % 2] as GatewayName;
      started.push({
        gateway,
        ...(await w.service.start({ accountId: w.accounts[i % 2] ?? '', gateway, amount: BigInt(10_000 + i) })),
      });
    }
    const backs = await Promise.all(started.map((s) => payerReturns(s.redirectUrl, 'pay')));
    w.clock.t += 3 * 60_000;
    await Promise.all([
      w.service.reconcile(),
      replica.reconcile(),
      ...backs.map((back, i) =>
        (i % 2 === 0 ? w.service : replica).completeReturn({
          gateway: started[i]?.gateway ?? 'zibal',
          query: queryOf(back),
        }),
      ),
      w.service.reconcile(),
      replica.reconcile(),
    ]);
    await Promise.all([w.service.reconcile(), replica.reconcile()]);
    for (const s of started) assert.equal((await w.service.get(s.payment.id)).state, 'paid');
    const expected = (account: number) =>
      started.reduce((sum, s, i) => (i % 2 === account ? sum + BigInt(10_000 + i) : sum), 0n);
    assert.equal(await balance(w.store, w.accounts[0] ?? ''), expected(0));
    assert.equal(await balance(w.store, w.accounts[1] ?? ''), expected(1));
  });
});
