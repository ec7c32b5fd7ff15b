import assert from 'node:assert/strict';
import pino from 'pino';
import { Agent } from 'undici';
import { createAccountService } from '../../core/accounts/service';
import type { PaymentsConfig } from '../../core/config/types';
import { createGateways } from '../../core/payments/gateways';
import { createPaymentService } from '../../core/payments/service';
import { upstreamHttp } from '../../core/providers/http';
import { migrate, openStore } from '../../core/store/db';
import { startFakeGateways } from '../fakes/payment-gateways';
import { createTestDatabase } from '../helpers/database';
import { runSvc } from '../cli/run-svc';

describe('svc payment list', function () {
  this.timeout(30_000);

  it('prints every payment in SPEC §12 shape, filtered by account and state', async () => {
    const db = await createTestDatabase();
    const store = openStore(db.url);
    const fake = await startFakeGateways();
    const agent = new Agent();
    try {
      await migrate(store);
      const accounts = createAccountService({ store, now: Date.now });
      const a = (await accounts.create('A')).id;
      const b = (await accounts.create('B')).id;
      const config: PaymentsConfig = {
        publicUrl: 'https://svc.example.com',
        minToman: 10_000n,
        maxToman: 50_000_000n,
        expireMinutes: 60,
        gateways: new Map([
          ['zibal', { name: 'zibal', merchant: 'zibal', baseUrl: fake.baseUrl('zibal'), timeoutMs: 2000 }],
        ]),
      };
      const service = createPaymentService({
        store,
        logger: pino({ level: 'silent' }),
        now: Date.now,
        config,
        gateways: createGateways(config, upstreamHttp(agent)),
      });
      const paid = await service.start({ accountId: a, gateway: 'zibal', amount: 50_000n });
      const back = new URL(fake.returnUrl(paid.payment.reference, 'pay'));
      await service.completeReturn({ gateway: 'zibal', query: new Map(back.searchParams) });
      const pending = await service.start({ accountId: b, gateway: 'zibal', amount: 10_000n });

      const env = { SVC_DATABASE_URL: db.url };
      const all = await runSvc(['payment', 'list', '--json'], env);
      assert.equal(all.code, 0, all.stderr);
      const parsed = JSON.parse(all.stdout) as { payments: Record<string, unknown>[] };
      assert.equal(parsed.payments.length, 2);
      const first = parsed.payments.find((p) => p['id'] === paid.payment.id);
      assert.ok(first);
      assert.deepEqual(Object.keys(first), [
        'id',
        'account_id',
        'gateway',
        'amount',
        'state',
        'reference',
        'receipt',
        'created_at',
        'paid_at',
      ]);
      assert.equal(first['account_id'], a);
      assert.equal(first['gateway'], 'zibal');
      assert.equal(first['amount'], 50_000);
      assert.equal(first['state'], 'paid');
      assert.equal(first['reference'], paid.payment.reference);
      assert.match(String(first['receipt']), /^\d+$/);
      assert.match(String(first['paid_at']), /^\d{4}-\d\d-\d\dT/);
      const second = parsed.payments.find((p) => p['id'] === pending.payment.id);
      assert.equal(second?.['receipt'], null);
      assert.equal(second?.['paid_at'], null);

      const ofB = JSON.parse(
        (await runSvc(['payment', 'list', '--account', b, '--json'], env)).stdout,
      ) as typeof parsed;
      assert.deepEqual(
        ofB.payments.map((p) => p['id']),
        [pending.payment.id],
      );
      const paidOnly = JSON.parse(
        (await runSvc(['payment', 'list', '--state', 'paid', '--json'], env)).stdout,
      ) as typeof parsed;
      assert.deepEqual(
        paidOnly.payments.map((p) => p['id']),
        [paid.payment.id],
      );
      const human = await runSvc(['payment', 'list'], env);
      assert.match(human.stdout, /AMOUNT \(TOMAN\)/);
      const bad = await runSvc(['payment', 'list', '--state', 'done'], env);
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /--state must be one of pending, paid, failed, expired/);
    } finally {
      await fake.close();
      await agent.close();
      await store.close();
      await db.drop();
    }
  });
});
