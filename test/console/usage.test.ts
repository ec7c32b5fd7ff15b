import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleUser } from './helpers';

const DAY_MS = 86_400_000;

function amount(text: string): bigint {
  return BigInt(text.replace(/[^0-9]/g, '') || '0');
}

/** The numbers in the cells of one column (by index) of the table with `testid`. */
function column(body: string, testid: string, index: number): string[] {
  const table = body.split(`data-testid="${testid}"`)[1]?.split('</table>')[0] ?? '';
  const rows = table.split('<tbody>')[1]?.split('<tr>').slice(1) ?? [];
  return rows.map((r) => (r.split(/<td[^>]*>/)[index + 1] ?? '').split('</td>')[0] ?? '');
}

describe('console usage: one filter for chart, totals, table, per-key totals and CSV', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let alice: ConsoleUser;
  let bob: ConsoleUser;
  let otherKey: string;
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;

  async function seed(
    user: ConsoleUser,
    keyId: string,
    n: number,
    fields: { kind: string; resource: string; status: string; cost: bigint; day: number },
  ) {
    const rows = Array.from({ length: n }, (_, i) => ({
      request_id: `req_${keyId}_${fields.resource}_${fields.status}_${fields.day}_${i}`,
      client_request_id: null,
      account_id: user.accountId,
      key_id: keyId,
      kind: fields.kind,
      resource: fields.resource,
      provider: 'fake',
      input_tokens: 10n,
      output_tokens: 5n,
      cost: fields.cost + BigInt(i % 7),
      status: fields.status,
      error_code: fields.status === 'error' ? 'upstream_error' : null,
      latency_ms: 5n,
      created_at: BigInt(today - fields.day * DAY_MS + 1000 + i * 1000),
    }));
    await svc.store.db.insertInto('usage_records').values(rows).execute();
  }

  before(async function () {
    svc = await startSvc();
    alice = await createConsoleUser(svc, { name: 'Alice', email: 'ua@example.com', balance: 0n, keyName: 'main' });
    bob = await createConsoleUser(svc, { name: 'Bob', email: 'ub@example.com', balance: 0n, keyName: 'bob' });
    otherKey = (await svc.core.keys.create({ accountId: alice.accountId, name: '=HYPERLINK("x")' })).key.id;
    await seed(alice, alice.keyId, 130, { kind: 'chat', resource: 'svc-pro', status: 'ok', cost: 1200n, day: 1 });
    await seed(alice, otherKey, 40, { kind: 'chat', resource: 'svc-pro', status: 'ok', cost: 900n, day: 2 });
    await seed(alice, alice.keyId, 9, { kind: 'chat', resource: 'svc-pro', status: 'error', cost: 0n, day: 1 });
    await seed(alice, alice.keyId, 25, { kind: 'tool', resource: 'web_search', status: 'ok', cost: 300n, day: 1 });
    await seed(alice, alice.keyId, 30, { kind: 'chat', resource: 'svc-pro', status: 'ok', cost: 500n, day: 20 });
    await seed(bob, bob.keyId, 50, { kind: 'chat', resource: 'svc-pro', status: 'ok', cost: 777n, day: 1 });
  });

  after(async function () {
    await svc?.close();
  });

  it('a filtered page shows the same total in the cards, the chart, the per-key totals, every page of the table and the CSV', async function () {
    const c = consoleClient(svc.baseUrl);
    await c.signIn(alice.email, alice.password);
    const from = new Date(today - 7 * DAY_MS).toISOString().slice(0, 10);
    const to = new Date(today).toISOString().slice(0, 10);
    const query = `what=model%3Asvc-pro&status=ok&from=${from}&to=${to}`;

    const expected = await svc.store.db
      .selectFrom('usage_records')
      .select([(eb) => eb.fn.sum<bigint>('cost').as('cost'), (eb) => eb.fn.countAll<bigint>().as('n')])
      .where('account_id', '=', alice.accountId)
      .where('kind', '!=', 'tool')
      .where('resource', '=', 'svc-pro')
      .where('status', '=', 'ok')
      .where('created_at', '>=', BigInt(today - 7 * DAY_MS))
      .executeTakeFirstOrThrow();
    const cost = BigInt(expected.cost);
    assert.equal(BigInt(expected.n), 170n);

    const first = await c.get(`/usage?${query}`);
    assert.equal(first.status, 200);
    const card = amount(/data-testid="spent">([^<]*)</.exec(first.body)?.[1] ?? '');
    const requests = amount(/data-testid="requests">([^<]*)</.exec(first.body)?.[1] ?? '');
    assert.equal(card, cost, 'the card');
    assert.equal(requests, 170n);
    const chart = [...first.body.matchAll(/<title>[^<]*: ([0-9,]+) toman \(/g)].reduce(
      (s, m) => s + amount(m[1] ?? ''),
      0n,
    );
    assert.equal(chart, cost, 'the chart');
    const perKey = column(first.body, 'key-totals', 2).reduce((s, v) => s + amount(v), 0n);
    assert.equal(perKey, cost, 'the per-key totals');
    assert.equal(column(first.body, 'key-totals', 0).length, 2, 'both of Alice’s keys, none of Bob’s');

    // Every page of the table, by its "Older requests" links.
    let table = 0n;
    let rows = 0;
    let page = first;
    for (let i = 0; i < 10; i++) {
      const costs = column(page.body, 'usage-table', 4);
      rows += costs.length;
      table += costs.reduce((s, v) => s + amount(v), 0n);
      const next = /<a\s+class="btn btn-quiet btn-small"\s+rel="next"\s+href="([^"]+)"/.exec(page.body)?.[1];
      if (next === undefined) break;
      page = await c.get(next.replace(/&amp;/g, '&').replace('/console', ''));
      assert.equal(page.status, 200);
    }
    assert.equal(rows, 170, 'two pages, 100 and 70');
    assert.equal(table, cost, 'the table');

    const csv = await c.get(`/usage.csv?${query}`);
    assert.equal(csv.status, 200);
    assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
    const lines = csv.body.trimEnd().split('\r\n');
    assert.equal(lines[0]?.split(',')[8], 'cost_toman');
    assert.equal(lines.length - 1, 170);
    // The label column is 3; a label like a formula is written as text.
    assert.ok(
      lines.some((l) => l.includes(`'=HYPERLINK(""x"")`)),
      'a formula-like label is defused',
    );
    // Counted from the end (a label may hold a comma): cost_toman, status, error_code, then the
    // four cache columns.
    const csvCost = lines.slice(1).reduce((s, l) => s + BigInt(l.split(',').at(-7) ?? '0'), 0n);
    assert.equal(csvCost, cost, 'the CSV');
  });

  it("crafted filters are refused or match nothing; another account's key id shows nothing of it", async function () {
    const c = consoleClient(svc.baseUrl);
    await c.signIn(alice.email, alice.password);
    const bobs = await c.get(`/usage.csv?key=${bob.keyId}&days=90`);
    assert.equal(bobs.status, 200);
    assert.equal(bobs.body.trimEnd().split('\r\n').length, 1, 'only the header');
    const range = await c.get('/usage?from=2020-01-01&to=2026-12-31');
    assert.equal(range.status, 400);
    assert.match(range.body, /at most 366 days/);
    const cursor = await c.get('/usage?cursor=not-a-cursor');
    assert.equal(cursor.status, 400);
    assert.match(cursor.body, /page_token is not one this service returned/);
    const injected = await c.get(`/usage.csv?status=${encodeURIComponent("ok' OR 1=1 --")}&days=90`);
    assert.equal(injected.status, 200);
    // An unknown status is no filter: every record of Alice's in 90 days, none of Bob's.
    assert.equal(injected.body.trimEnd().split('\r\n').length - 1, 130 + 40 + 9 + 25 + 30);
  });

  it('pages through the whole ledger by cursor; the entries add up to the balance; a crafted cursor is refused', async function () {
    for (let i = 1; i <= 60; i++)
      await svc.core.deps.wallet.topUp({ accountId: bob.accountId, amount: BigInt(i * 100), reference: `t${i}` });
    const c = consoleClient(svc.baseUrl);
    await c.signIn(bob.email, bob.password);
    let page = await c.get('/wallet');
    let rows = 0;
    let sum = 0n;
    for (let i = 0; i < 5; i++) {
      const table = page.body.split('<tbody>')[1]?.split('</tbody>')[0] ?? '';
      for (const m of table.matchAll(/<span class="plus">\+([0-9,]+)<\/span>/g)) {
        rows += 1;
        sum += amount(m[1] ?? '');
      }
      const next = /rel="next"\s+href="([^"]+)"/.exec(page.body)?.[1];
      if (next === undefined) break;
      page = await c.get(next.replace('/console', ''));
      assert.equal(page.status, 200);
    }
    assert.equal(rows, 60, 'two pages: 50 and 10');
    assert.equal(sum, (await svc.wallet(bob.accountId)).balance);
    const crafted = await c.get("/wallet?before=le_1' OR '1'='1");
    assert.equal(crafted.status, 400);
    assert.match(crafted.body, /not a ledger entry id this service returned/);
  });
});
