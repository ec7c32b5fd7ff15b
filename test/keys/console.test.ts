import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser } from '../console/helpers';

describe('console: key access (scope) and expiry', function () {
  let svc: TestSvc;

  before(async function () {
    svc = await startSvc();
  });

  after(async function () {
    await svc.close();
  });

  it('creates a tools-only key from the form; the list shows each key’s access; an unknown scope is refused, nothing created', async function () {
    const user = await createConsoleUser(svc, {
      name: 'Scoped',
      email: 'scoped@example.com',
      balance: 0n,
      keyName: 'first',
    });
    const web = consoleClient(svc.baseUrl);
    assert.equal((await web.signIn(user.email, user.password)).status, 303);
    const { page } = await web.createKey({ name: 'assistant', scope: 'tools' });
    assert.equal(page.status, 200, page.body.slice(0, 300));
    const created = (await svc.core.keys.list(user.accountId)).find((k) => k.name === 'assistant');
    assert.equal(created?.scope, 'tools');
    assert.match(page.body, /<select id="scope" name="scope">/);
    const row = (name: string): string => page.body.split('<tr>').find((r) => r.includes(`>${name}</a`)) ?? '';
    assert.match(row('assistant'), /MCP tools only/);
    assert.match(row('first'), /Chat API and tools/);

    const { page: bad } = await web.createKey({ name: 'wrong', scope: 'admin' });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /scope must be one of all, chat, tools/);
    assert.equal((await svc.core.keys.list(user.accountId)).length, 2);
  });

  it('an expired key shows as expired, with no revoke link', async function () {
    const user = await createConsoleUser(svc, {
      name: 'Expiring',
      email: 'expiring@example.com',
      balance: 0n,
      keyName: 'first',
    });
    const soon = await svc.core.keys.create({
      accountId: user.accountId,
      name: 'short-lived',
      expiresAt: Date.now() + 60_000,
    });
    // Moves the key's expiry into the past the only way the clock of this server allows: in the row.
    await svc.store.db
      .updateTable('api_keys')
      .set({ expires_at: BigInt(Date.now() - 1000) })
      .where('id', '=', soon.key.id)
      .execute();
    const web = consoleClient(svc.baseUrl);
    await web.signIn(user.email, user.password);
    const page = await web.get('/keys');
    const row = page.body.split('<tr>').find((r) => r.includes('>short-lived</a')) ?? '';
    assert.match(row, /Expired/);
    assert.doesNotMatch(row, /Revoke/);
    const other = page.body.split('<tr>').find((r) => r.includes('>first</a')) ?? '';
    assert.match(other, /Revoke/);
  });

  it('creates a key with caps from the form; the list shows spend against them; a bad cap is refused, nothing created', async function () {
    const user = await createConsoleUser(svc, {
      name: 'Capped',
      email: 'capped@example.com',
      balance: 0n,
      keyName: 'first',
    });
    const web = consoleClient(svc.baseUrl);
    await web.signIn(user.email, user.password);
    const { page } = await web.createKey({
      name: 'budgeted',
      scope: 'all',
      cap_daily: '5,000',
      cap_monthly: '',
    });
    assert.equal(page.status, 200, page.body.slice(0, 300));
    const created = (await svc.core.keys.list(user.accountId)).find((k) => k.name === 'budgeted');
    assert.deepEqual([created?.capDaily, created?.capMonthly], [5000n, null]);
    const row = page.body.split('<tr>').find((r) => r.includes('>budgeted</a')) ?? '';
    assert.match(row, /0 <span class="hint">of 5,000<\/span>/);
    assert.match(row, /no cap/);

    for (const [fieldName, value] of [
      ['cap_daily', '-5'],
      ['cap_monthly', '1.5'],
    ] as const) {
      const { page: bad } = await web.createKey({ name: 'wrong', scope: 'all', [fieldName]: value });
      assert.equal(bad.status, 400);
      assert.match(bad.body, fieldName === 'cap_daily' ? /daily cap must be a whole number/ : /monthly cap must be/);
    }
    assert.equal((await svc.core.keys.list(user.accountId)).length, 2);
  });
});
