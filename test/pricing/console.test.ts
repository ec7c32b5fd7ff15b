import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Decimal } from '../../core/config/decimal';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startFakeUpstream, type FakeUpstream } from '../fakes/openai-upstream';
import { runSvc, svcJson } from '../cli/run-svc';
import { consoleClient, createConsoleUser } from '../console/helpers';

// $10 and $20 per 1M tokens at margin 0: a call of 10 in, 50 out costs ceil(107.8) = 108 credits
// at 98000 toman/$, ceil(161.7) = 162 at 147000, and upstream $0.0011 at either.
const config = (upstream: string): string => `
pricing: { rate: 98000, margin: 0 }
models:
  dollar-chat:
    provider: openai
    base_url: ${upstream}
    upstream_model: m
    price_usd: { input_per_1m: 10, output_per_1m: 20 }
  credit-chat:
    provider: sandbox
    price: { input_per_1m: 1000, output_per_1m: 4000 }
  dollar-emb:
    kind: embedding
    provider: sandbox
    price_usd: { input_per_1m: 0.02 }
    margin: 0.25
  pictures:
    kind: image
    provider: sandbox
    price: { per_image: { "1024x1024/high": 1500, "1024x1024/low": 400 } }
  voice:
    kind: speech
    provider: sandbox
    price: { per_1m_characters: 900000 }
  ears:
    kind: transcription
    provider: sandbox
    price: { per_minute: 350 }
  ranker:
    kind: rerank
    provider: sandbox
    price: { per_search: 120 }
  guard:
    kind: moderation
    provider: sandbox
`;

let fake: FakeUpstream;

async function chat(svc: TestSvc, key: string): Promise<{ cost: bigint; id: string }> {
  const res = await fetch(`${svc.baseUrl}/v1/openai/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'dollar-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }),
  });
  const body = (await res.json()) as { usage?: { cost?: number } };
  assert.equal(res.status, 200, JSON.stringify(body));
  return { cost: BigInt(body.usage?.cost ?? -1), id: res.headers.get('x-request-id') ?? '' };
}

/** Waits until `n` requests in all have reached the fake upstream (each held there while paused). */
async function reached(n: number): Promise<void> {
  while (fake.requests.length < n) await fake.nextRequestOpen();
}

describe('pricing on the console and calls in flight across a rate change (SPEC §15)', function () {
  this.timeout(180_000);
  let a: TestSvc;
  let b: TestSvc;

  before(async () => {
    fake = await startFakeUpstream();
    // Two cores on one database (SQLite in one process; MariaDB over gRPC with SVC_TEST_DATABASE=mysql
    // SVC_TEST_TRANSPORT=grpc), each reading the stored rate at every admission.
    a = await startSvc({ config: config(fake.baseUrl), priceCacheMs: 0 });
    b = await startSvc({ config: config(fake.baseUrl), priceCacheMs: 0, databaseUrl: a.databaseUrl });
  });

  after(async () => {
    await b?.close();
    await a?.close();
    await fake?.close();
  });

  it('every call in flight on either core is charged at the price it was admitted at, to the credit; the report adds up', async () => {
    fake.reset();
    const { key, accountId } = await a.createFundedKey(1_000_000);
    const op = consoleClient(a.baseUrl);
    assert.equal((await op.signInOperator(a.adminToken)).status, 303);
    const page = await op.get('/pricing');
    assert.equal(page.status, 200);
    assert.match(page.body, /data-testid="current-rate">\s*98,000 toman per US dollar/);

    // Six calls admitted on each core at 98000, all held at the upstream.
    const PER_CORE = 6;
    for (let i = 0; i < PER_CORE * 4; i++)
      fake.enqueue({ kind: 'text', usage: { prompt_tokens: 10, completion_tokens: 50 } });
    const release = fake.pause();
    const early = [...Array(PER_CORE).keys()].flatMap(() => [chat(a, key), chat(b, key)]);
    await reached(PER_CORE * 2);

    // The rate changes on the console while they are in flight.
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(page.body)?.[1] ?? assert.fail('csrf token');
    const set = await op.post('/pricing/rate', { csrf_token: csrf, rate: '۱۴۷٬۰۰۰' });
    assert.equal(set.status, 303, set.body);
    assert.equal(set.headers.get('location'), '/console/pricing?done=rate');

    // Six more on each core, admitted after the change, also held.
    const late = [...Array(PER_CORE).keys()].flatMap(() => [chat(a, key), chat(b, key)]);
    await reached(PER_CORE * 4);
    release();
    const earlyCosts = (await Promise.all(early)).map((c) => c.cost);
    const lateCosts = (await Promise.all(late)).map((c) => c.cost);
    assert.deepEqual(earlyCosts, Array<bigint>(PER_CORE * 2).fill(108n), 'admitted at 98000');
    assert.deepEqual(lateCosts, Array<bigint>(PER_CORE * 2).fill(162n), 'admitted at 147000');

    // The ledger, to the credit.
    const charges = (await a.ledger(accountId, 200)).filter((e) => e.kind === 'charge').map((e) => -e.amount);
    const ledgerTotal = charges.reduce((s, c) => s + c, 0n);
    assert.equal(ledgerTotal, 108n * 12n + 162n * 12n);
    assert.equal((await a.wallet(accountId)).balance, 1_000_000n - ledgerTotal);

    // The margin report: revenue is the ledger's charges; upstream cost the usage × dollar prices.
    const today = new Date().toISOString().slice(0, 10);
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    // The page and its CSV say the same.
    const shown = await op.get(`/pricing?from=${yesterday}&to=${today}`);
    assert.match(
      shown.body,
      /data-testid="rate-history"[\s\S]*147,000[\s\S]*console:operator[\s\S]*98,000[\s\S]*config/,
    );
    assert.match(
      shown.body,
      /data-testid="pricing-audit"[\s\S]*Rate set[\s\S]*rate 147000 toman per US dollar \(was 98000\) by console:operator/,
    );
    const csv = await op.get(`/pricing/report.csv?from=${yesterday}&to=${today}`);
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
    assert.equal(
      csv.headers.get('content-disposition'),
      `attachment; filename="svc-margin-${yesterday}-to-${today}.csv"`,
    );
    const lines = csv.body.trim().split('\r\n');
    assert.equal(
      lines[0],
      'day,model,calls,revenue_credits,upstream_cost_usd,upstream_cost_credits,margin_credits,unpriced_calls',
    );
    const rows = lines
      .slice(1)
      .map((l) => l.split(','))
      .filter((cells) => cells[1] === 'dollar-chat')
      .map(([, , calls = '', revenue = '', costUsd = '', cost = '', margin = '']) => ({
        calls: BigInt(calls),
        revenue: BigInt(revenue),
        costUsd: Decimal.parse(costUsd) ?? assert.fail(costUsd),
        cost: BigInt(cost),
        margin: BigInt(margin),
      }));
    assert.equal(
      rows.reduce((s, r) => s + r.revenue, 0n),
      ledgerTotal,
      "revenue is the ledger's charges",
    );
    assert.equal(
      rows.reduce((s, r) => s + r.calls, 0n),
      24n,
    );
    // Upstream cost: each usage record's tokens × the dollar prices it keeps, at its rate.
    const usage = await a.store.db
      .selectFrom('usage_records')
      .select(['input_tokens', 'output_tokens', 'pricing'])
      .where('account_id', '=', accountId)
      .execute();
    let usd = Decimal.ZERO;
    let credits = Decimal.ZERO;
    for (const u of usage) {
      const p = JSON.parse(u.pricing ?? '{}') as { price_usd: Record<string, number>; rate: number };
      const callUsd = Decimal.of(
        BigInt(u.input_tokens) * BigInt(p.price_usd['input_per_1m'] ?? 0) +
          BigInt(u.output_tokens) * BigInt(p.price_usd['output_per_1m'] ?? 0),
        6,
      );
      usd = usd.plus(callUsd);
      credits = credits.plus(callUsd.times(Decimal.of(BigInt(p.rate))));
    }
    assert.equal(usd.toString(), '0.0264', '24 calls × $0.0011');
    assert.equal(rows.reduce((s, r) => s.plus(r.costUsd), Decimal.ZERO).toString(), usd.toString());
    // 12 × 0.0011 × 98000 + 12 × 0.0011 × 147000 = 3234 credits upstream; the margin the rest.
    assert.equal(credits.ceil(), 3234n);
    if (rows.length === 1) {
      assert.equal(rows[0]?.cost, 3234n);
      assert.equal(rows[0]?.margin, ledgerTotal - 3234n);
    }
  });

  it('the rate form: CSRF, 0, a step over 50 % and words refused in words, nothing written; forced allowed', async () => {
    const op = consoleClient(a.baseUrl);
    assert.equal((await op.signInOperator(a.adminToken)).status, 303);
    const csrf = await op.csrf('/pricing');
    const before = (await svcJson(['price', 'history'], { SVC_DATABASE_URL: a.databaseUrl }))['rates'] as unknown[];
    assert.equal((await op.post('/pricing/rate', { rate: '150000' })).status, 403, 'no CSRF token');
    for (const [rate, status, words] of [
      ['0', 400, /above 0/],
      ['-5', 400, /whole number/],
      ['abc', 400, /whole number/],
      ['300000', 400, /more than 50 % above the current rate 147000/],
      ['70000', 400, /more than 50 % below the current rate 147000/],
    ] as const) {
      const refused = await op.post('/pricing/rate', { csrf_token: csrf, rate });
      assert.equal(refused.status, status, `${rate}: ${refused.body.slice(0, 200)}`);
      assert.match(refused.body, words);
      assert.match(refused.body, new RegExp(`name="rate" inputmode="numeric" required size="10" value="${rate}"`));
    }
    const after = (await svcJson(['price', 'history'], { SVC_DATABASE_URL: a.databaseUrl }))['rates'] as unknown[];
    assert.equal(after.length, before.length, 'nothing written');
    const forced = await op.post('/pricing/rate', { csrf_token: csrf, rate: '300000', force: '1' });
    assert.equal(forced.status, 303);
    // A user session may not see the page nor post the form.
    const user = await createConsoleUser(a, { name: 'U', email: 'u@example.com', balance: 0n, keyName: 'k' });
    const u = consoleClient(a.baseUrl);
    await u.signIn(user.email, user.password);
    assert.notEqual((await u.get('/pricing')).status, 200);
    const uCsrf = await u.csrf('/wallet');
    assert.notEqual((await u.post('/pricing/rate', { csrf_token: uCsrf, rate: '310000' })).status, 303);
    const rates = (await svcJson(['price', 'history'], { SVC_DATABASE_URL: a.databaseUrl }))['rates'] as {
      rate: number;
    }[];
    assert.equal(rates[0]?.rate, 300000);
  });

  it("the Prices page shows the toman prices in force now, every kind, the account's own margin included; svc price list agrees", async () => {
    const user = await createConsoleUser(b, { name: 'P', email: 'p@example.com', balance: 0n, keyName: 'k' });
    const c = consoleClient(b.baseUrl);
    await c.signIn(user.email, user.password);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-prices-'));
    fs.writeFileSync(path.join(dir, 'svc.yaml'), config(fake.baseUrl));
    const list = await svcJson(['price', 'list'], {
      SVC_DATABASE_URL: a.databaseUrl,
      SVC_CONFIG: path.join(dir, 'svc.yaml'),
    });
    fs.rmSync(dir, { recursive: true, force: true });
    const cell = (body: string, id: string): string =>
      (new RegExp(`data-testid="prices-${id}">([\\s\\S]*?)</td>`).exec(body)?.[1] ?? assert.fail(`${id} on the page`))
        .replace(/\s+/g, ' ')
        .replace(/\s*>\s*/g, '>')
        .replace(/\s*<\s*/g, '<');
    const rate = (
      (await svcJson(['price', 'history'], { SVC_DATABASE_URL: a.databaseUrl }))['rates'] as { rate: number }[]
    )[0]?.rate;
    assert.equal(rate, 300000);
    let body = (await c.get('/prices')).body;
    // ceil(10 × 300000 × 1) and ceil(20 × 300000); embeddings ceil(0.02 × 300000 × 1.25) = 7500.
    assert.match(cell(body, 'dollar-chat'), /3,000,000 toman<span class="hint">input, per 1M tokens · from \$10/);
    assert.match(cell(body, 'dollar-chat'), /6,000,000 toman<span class="hint">output, per 1M tokens · from \$20/);
    assert.match(cell(body, 'dollar-emb'), /7,500 toman<span class="hint">input, per 1M tokens · from \$0.02/);
    assert.match(cell(body, 'credit-chat'), /1,000 toman<span class="hint">input, per 1M tokens<\/span>/);
    assert.match(cell(body, 'pictures'), /1,500 toman<span class="hint">per image, 1024×1024 high</);
    assert.match(cell(body, 'pictures'), /400 toman<span class="hint">per image, 1024×1024 low</);
    assert.match(cell(body, 'voice'), /900,000 toman<span class="hint">per 1M characters/);
    assert.match(cell(body, 'ears'), /350 toman<span class="hint">per minute of audio/);
    assert.match(cell(body, 'ranker'), /120 toman<span class="hint">per search/);
    assert.match(cell(body, 'guard'), /free/);
    // `svc price list` says the same, every kind: each credit price it lists is on the page.
    const listed = list['models'] as { id: string; price: Record<string, number | Record<string, number>> }[];
    assert.equal(listed.length, 8);
    for (const m of listed) {
      const shownHere = cell(body, m.id);
      for (const [k, v] of Object.entries(m.price)) {
        const prices =
          typeof v === 'number'
            ? { [k]: v }
            : Object.fromEntries(Object.entries(v).map(([sz, n]) => [`${k} ${sz}`, n]));
        for (const [name, n] of Object.entries(prices))
          assert.ok(shownHere.includes(`${n.toLocaleString('en-US')} toman<`), `${m.id} ${name} ${n}: ${shownHere}`);
      }
    }
    assert.deepEqual(listed.find((m) => m.id === 'pictures')?.price, {
      per_image: { '1024x1024/high': 1500, '1024x1024/low': 400 },
    });
    assert.deepEqual(listed.find((m) => m.id === 'dollar-emb')?.price['input_per_1m'], 7500);

    // The account's own margin: its dollar-priced models only.
    const set = await runSvc(['account', 'update', '--account', user.accountId, '--margin', '0.1'], {
      SVC_DATABASE_URL: a.databaseUrl,
    });
    assert.equal(set.code, 0, set.stderr);
    body = (await c.get('/prices')).body;
    assert.match(cell(body, 'dollar-chat'), /3,300,000 toman<span class="hint">input, per 1M tokens/);
    assert.match(cell(body, 'dollar-emb'), /6,600 toman/, 'the account margin replaces the model margin');
    assert.match(cell(body, 'credit-chat'), /1,000 toman/);
  });
});
