import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleUser } from './helpers';

/*
 * Issue 48 point 1: a key's own limit of calls in flight, set by the operator in the console (the
 * account's page, one form per key): a whole number from 1, or empty for the service's
 * `limits.concurrent_per_key`; refused with a clear message otherwise; CSRF-checked; the
 * operator's alone (a user's session cannot post it); each change on the key's activity list
 * (SQLite, or MySQL with SVC_TEST_DATABASE=mysql).
 */
describe("console: the operator sets a key's limit of calls at once", function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let user: ConsoleUser;

  before(async function () {
    svc = await startSvc();
    user = await createConsoleUser(svc, { name: 'Tenant', email: 'tenant@example.com', balance: 0n, keyName: 'k0' });
  });
  after(async () => {
    await svc?.close();
  });

  const limitOf = async (keyId: string): Promise<number | null | undefined> =>
    (await svc.core.keys.list(user.accountId)).find((k) => k.id === keyId)?.concurrentLimit;

  /** The key's activity lines, oldest first. */
  async function activity(keyId: string): Promise<string[]> {
    const rows = await svc.store.db
      .withTables<{ console_key_events: { key_id: string; detail: string; created_at: bigint; kind: string } }>()
      .selectFrom('console_key_events')
      .select(['detail', 'kind'])
      .where('key_id', '=', keyId)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => `${r.kind}: ${r.detail}`);
  }

  it('saves a whole number and empty (the default), refuses anything else, and notes each change', async () => {
    const op = consoleClient(svc.baseUrl);
    assert.equal((await op.signInOperator(svc.adminToken)).status, 303);
    const view = `/accounts/view?id=${user.accountId}`;
    const page = await op.get(view);
    assert.equal(page.status, 200);
    const input = `data-testid="concurrent-${user.keyId}"`;
    assert.ok(page.body.includes(input), 'a form per key on the account page');
    assert.match(page.body, /action="\/console\/accounts\/keys\/concurrent"/);
    const csrf = await op.csrf(view);
    const post = (concurrent: string, extra: Record<string, string> = {}) =>
      op.post('/accounts/keys/concurrent', {
        csrf_token: csrf,
        account_id: user.accountId,
        key_id: user.keyId,
        concurrent,
        ...extra,
      });

    for (const bad of ['0', '-2', '2.5', 'many', '100001', '9'.repeat(20)]) {
      const refused = await post(bad);
      assert.equal(refused.status, 400, bad);
      assert.match(refused.body, /whole number from 1 to 100000, or empty/, bad);
      assert.equal(await limitOf(user.keyId), null, `${bad}: nothing saved`);
    }

    const saved = await post('3');
    assert.equal(saved.status, 303);
    assert.equal(saved.headers.get('location'), `/console/accounts/view?id=${user.accountId}&done=concurrent`);
    assert.equal(await limitOf(user.keyId), 3);
    const after = await op.get(`${view}&done=concurrent`);
    assert.match(after.body, /limit of calls at once was saved/);
    assert.match(after.body, new RegExp(`${input}\\s+value="3"`));

    // Persian digits, as the console takes them in every number field.
    assert.equal((await post('۱۲')).status, 303);
    assert.equal(await limitOf(user.keyId), 12);

    assert.equal((await post('')).status, 303);
    assert.equal(await limitOf(user.keyId), null, 'empty: the service’s limit');

    assert.deepEqual(await activity(user.keyId), [
      'edited: calls at once the default → 3',
      'edited: calls at once 3 → 12',
      'edited: calls at once 12 → the default',
    ]);

    // Without the form's CSRF token nothing is saved.
    const forged = await op.post('/accounts/keys/concurrent', {
      csrf_token: 'forged',
      account_id: user.accountId,
      key_id: user.keyId,
      concurrent: '5',
    });
    assert.notEqual(forged.status, 303);
    assert.equal(await limitOf(user.keyId), null);

    // Another account's key through this account's form: as if it did not exist.
    const other = await createConsoleUser(svc, {
      name: 'Other',
      email: 'other@example.com',
      balance: 0n,
      keyName: 'k',
    });
    const crossed = await post('5', { key_id: other.keyId });
    assert.equal(crossed.status, 404);
    assert.equal((await svc.core.keys.list(other.accountId))[0]?.concurrentLimit, null);
  });

  it("is the operator's alone: the account's own session cannot post it", async () => {
    const owner = consoleClient(svc.baseUrl);
    assert.equal((await owner.signIn(user.email, user.password)).status, 303);
    const csrf = await owner.csrf('/account');
    const tried = await owner.post('/accounts/keys/concurrent', {
      csrf_token: csrf,
      account_id: user.accountId,
      key_id: user.keyId,
      concurrent: '50',
    });
    // Sent away as on every operator page, nothing saved.
    assert.ok(!(tried.headers.get('location') ?? '').includes('done=concurrent'), `${tried.status}`);
    assert.equal(await limitOf(user.keyId), null);
    // The key's own page shows the limit read-only.
    const keyPage = await owner.get(`/keys/view?id=${user.keyId}`);
    assert.match(
      keyPage.body,
      /data-testid="key-concurrent">The service&#39;s limit|data-testid="key-concurrent">The service's limit/,
    );
    assert.ok(!keyPage.body.includes('name="concurrent"'));
  });
});
