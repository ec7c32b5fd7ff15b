import assert from 'node:assert/strict';
import pino from 'pino';
import { createAudit } from '../../core/accounts/audit';
import { Decimal } from '../../core/config/decimal';
import { parseConfig } from '../../core/config/load';
import { createPriceBook } from '../../core/pricing/book';
import { createRateStore } from '../../core/pricing/rates';
import { migrate, openStore } from '../../core/store/db';
import { createTestDatabase } from '../helpers/database';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { runSvc } from '../cli/run-svc';

// $10 and $20 per 1M tokens at margin 0: at 98000 toman/$ the call below (10 in, 50 out) costs
// ceil((10 × 980000 + 50 × 1960000) / 1e6) = ceil(107.8) = 108 credits; at 147000, ceil(161.7) = 162.
const config = (upstream: string): string => `
pricing: { rate: 98000, margin: 0 }
models:
  dollar-chat:
    provider: openai
    base_url: ${upstream}
    upstream_model: m
    price_usd: { input_per_1m: 10, output_per_1m: 20 }
`;

async function chat(svc: TestSvc, key: string): Promise<{ cost: number; id: string }> {
  // Each answer's usage is 10 in, 50 out (within the hold's bound, so the charge is the price's).
  fake.enqueue({ kind: 'text', usage: { prompt_tokens: 10, completion_tokens: 50 } });
  const res = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'dollar-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }),
  });
  const body = (await res.json()) as { usage?: { cost?: number } };
  assert.equal(res.status, 200, JSON.stringify(body));
  return { cost: Number(body.usage?.cost), id: res.headers.get('x-request-id') ?? '' };
}

let fake: FakeUpstream;

describe('prices resolved at admission from the rate in force (SPEC §15)', function () {
  this.timeout(120_000);
  let a: TestSvc;
  let b: TestSvc;

  before(async () => {
    fake = await startFakeUpstream();
    // Two cores on one database (SQLite in one process, or MariaDB with SVC_TEST_DATABASE=mysql),
    // each reading the stored rate at every admission.
    a = await startSvc({ config: config(fake.baseUrl), priceCacheMs: 0 });
    b = await startSvc({ config: config(fake.baseUrl), priceCacheMs: 0, databaseUrl: a.databaseUrl });
  });

  after(async () => {
    await b?.close();
    await a?.close();
    await fake?.close();
  });

  it('a call held before a rate change settles at its price; calls admitted after it pay the new rate, on either core', async () => {
    const { key, accountId } = await a.createFundedKey(100_000);
    const before = await chat(b, key);
    assert.equal(before.cost, 108);

    // A call in flight on core a: admitted and held at 98000, its upstream answer held back.
    const release = fake.pause();
    const opened = fake.nextRequestOpen();
    const held = chat(a, key);
    await opened;
    const set = await runSvc(['price', 'rate', 'set', '147000', '--json'], { SVC_DATABASE_URL: a.databaseUrl });
    assert.equal(set.code, 0, set.stderr);
    // Core b admits a call after the change (it reaches the upstream: held) while core a's is still held.
    const reachedB = fake.nextRequestOpen();
    const onBCall = chat(b, key);
    await reachedB;
    release();
    const onB = await onBCall;
    const settled = await held;
    assert.equal(settled.cost, 108, 'held at 98000, settled at 98000');
    assert.equal(onB.cost, 162, 'admitted after the change on the other core');
    assert.equal((await chat(a, key)).cost, 162, 'and on the first core');

    // Every charge is the ledger's, to the credit.
    const charges = (await a.ledger(accountId)).filter((e) => e.kind === 'charge').map((e) => -e.amount);
    assert.deepEqual(charges.sort(), [108n, 108n, 162n, 162n].sort());
    assert.equal((await a.wallet(accountId)).balance, 100_000n - 108n * 2n - 162n * 2n);

    // Every usage record keeps what it was charged at: credit prices, dollar prices, rate, margin.
    const usage = await runSvc(['usage', '--account', accountId, '--json'], { SVC_DATABASE_URL: a.databaseUrl });
    assert.equal(usage.code, 0, usage.stderr);
    const records = (JSON.parse(usage.stdout) as { records: { request_id: string; cost: number; pricing: unknown }[] })
      .records;
    const heldRecord = records.find((r) => r.request_id === settled.id);
    assert.deepEqual(heldRecord?.pricing, {
      price: {
        input_per_1m: 980000,
        output_per_1m: 1960000,
        cached_input_per_1m: 980000,
        cache_write_per_1m: 980000,
        cache_write_1h_per_1m: 980000,
      },
      price_usd: { input_per_1m: 10, output_per_1m: 20 },
      rate: 98000,
      margin: 0,
    });
    const afterRecord = records.find((r) => r.request_id === onB.id);
    assert.equal((afterRecord?.pricing as { rate?: unknown } | undefined)?.rate, 147000);
    assert.equal((afterRecord?.pricing as { price: Record<string, number> }).price['input_per_1m'], 1470000);
  });

  it("an account's own margin replaces the default for its dollar-priced calls only, on every core; negative needs --force", async () => {
    const { key, accountId } = await a.createFundedKey(100_000);
    const other = await a.createFundedKey(100_000);
    const env = { SVC_DATABASE_URL: a.databaseUrl };
    const refused = await runSvc(['account', 'update', '--account', accountId, '--margin', '-0.1'], env);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /negative margin \(-0\.1\) sells below the upstream's cost; run again with --force/);
    const set = await runSvc(['account', 'update', '--account', accountId, '--margin', '0.5', '--json'], env);
    assert.equal(set.code, 0, set.stderr);
    assert.deepEqual(JSON.parse(set.stdout), { id: accountId, margin: 0.5 });
    // At the rate the first case left (147000) × 1.5: ceil(10 × 2205000 / 1e6 + 50 × 4410000 / 1e6) = ceil(242.55).
    assert.equal((await chat(b, key)).cost, 243);
    assert.equal((await chat(a, other.key)).cost, 162, 'another account keeps the default');
    const forced = await runSvc(['account', 'update', '--account', accountId, '--margin', '-0.5', '--force'], env);
    assert.equal(forced.code, 0, forced.stderr);
    // 147000 × 0.5 = 73500 per $: ceil(10 × 735000 / 1e6 + 50 × 1470000 / 1e6) = ceil(80.85).
    assert.equal((await chat(a, key)).cost, 81);
    const removed = await runSvc(['account', 'update', '--account', accountId, '--margin', 'none'], env);
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal((await chat(b, key)).cost, 162);
    const unknown = await runSvc(['account', 'update', '--account', 'acc_nope', '--margin', '0.1'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /acc_nope/);
    // Every change is on the account's audit list (the operator's account page), the refusal not.
    const audit = await createAudit({ store: a.store, now: Date.now, logger: pino({ level: 'silent' }) }).list(accountId, 10);
    assert.deepEqual(
      audit.map((e) => e.detail.replace(/ by \S+/, ' by OP')),
      ['margin none by OP', 'margin -0.5 by OP (forced)', 'margin 0.5 by OP'],
    );
  });
});

describe('the price book: the stored rate, cached a short while (SPEC §15)', () => {
  it('trusts the rate it read for cacheMs, then reads the new one; the file rate is written first', async () => {
    const db = await createTestDatabase();
    const store = openStore(db.url);
    try {
      await migrate(store);
      let clock = 1_000_000;
      const parsed = parseConfig(
        'pricing: { rate: 100000 }\nmodels:\n  m:\n    provider: sandbox\n    price_usd: { input_per_1m: 1, output_per_1m: 2 }\n',
        {},
        'test',
      );
      const book = createPriceBook({
        store,
        config: parsed,
        now: () => clock,
        logger: pino({ level: 'silent' }),
        cacheMs: 2000,
      });
      const model = parsed.models.get('m') ?? assert.fail('model m');
      await book.start();
      const rates = createRateStore({ store, now: () => clock });
      assert.deepEqual(
        (await rates.history()).map((r) => [r.rate, r.by]),
        [[100000n, 'config']],
      );
      assert.equal((await book.price(model)).price.inputPer1m, 100000n);
      // The file's margins are in the audit log once, again only when they change.
      await book.start();
      const audit = createAudit({ store, now: () => clock, logger: pino({ level: 'silent' }) });
      assert.deepEqual(
        (await audit.list('*', 10)).map((e) => [e.action, e.detail]),
        [['margins_loaded', 'margins from the configuration: default 0']],
      );
      await rates.set(120000n, 'test', { force: false });
      clock += 1999;
      assert.equal((await book.price(model)).price.inputPer1m, 100000n, 'still within the cache');
      clock += 1;
      assert.equal((await book.price(model)).price.inputPer1m, 120000n, 'read again after cacheMs');
      assert.equal((await book.price(model)).price.outputPer1m, 240000n);
      // A model priced in credits is as configured, without reading anything.
      const { dollar: _dollar, ...rest } = model;
      const credits = { ...rest, price: { inputPer1m: 7n, outputPer1m: 9n } };
      assert.equal(await book.price(credits), credits);
      assert.equal(Decimal.ZERO.toString(), '0');
    } finally {
      await store.close();
      await db.drop();
    }
  });
});
