import { callerIds } from '../../adapters/http/request';
import assert from 'node:assert/strict';
import { callCore, type CallMeta } from '../../adapters/http/core-client';
import { isSvcError } from '../../core/errors';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser } from '../console/helpers';

// Issue 20, point 11: labels, names and references rendered to people refuse the characters that
// hide or reorder text, and keep the ones Persian needs (ZWNJ).
const SPOOFS: readonly [string, string][] = [
  ['U+202E', 'invoice\u202Etxt.exe'],
  ['U+2067', 'a\u2067b\u2069c'],
  ['U+200B', 'zero\u200Bwidth'],
  ['U+FEFF', 'b\uFEFFom'],
  ['U+0007', 'bell\u0007'],
  ['U+0085', 'next\u0085line'],
];
const PERSIAN = 'کلید می‌خواهم'; // with U+200C ZWNJ between می and خواهم

describe('user-supplied labels and names: no bidi or invisible controls (SQLite/MariaDB)', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let admin: CallMeta;

  async function refusal(call: () => Promise<unknown>): Promise<{ param: string | undefined; message: string }> {
    try {
      await call();
    } catch (error) {
      if (isSvcError(error) && error.code === 'invalid_argument') return { param: error.param, message: error.message };
      throw error;
    }
    assert.fail('accepted');
  }

  before(async () => {
    svc = await startSvc();
    admin = { authorization: `Bearer ${svc.adminToken}`, ids: callerIds('req_invisible_text') };
  });
  after(async () => {
    await svc?.close();
  });

  it('gRPC: key names, account names and top-up references with a hidden control are refused, naming the field', async () => {
    const c = svc.connection.clients;
    const funded = await svc.createFundedKey(1000n, 'plain');
    const keysBefore = (await svc.core.keys.list(funded.accountId)).length;
    const balanceBefore = (await svc.wallet(funded.accountId)).balance;
    const accountsBefore = (await svc.store.db.selectFrom('accounts').select('id').execute()).length;
    for (const [codePoint, text] of SPOOFS) {
      const key = await refusal(() =>
        callCore(admin, (o) => c.keys.createKey({ accountId: funded.accountId, name: text, scope: '' }, o)),
      );
      assert.equal(key.param, 'name');
      assert.ok(key.message.includes(codePoint), key.message);
      const account = await refusal(() => callCore(admin, (o) => c.accounts.createAccount({ name: text }, o)));
      assert.equal(account.param, 'name');
      const topUp = await refusal(() =>
        callCore(admin, (o) =>
          c.wallet.topUp({ accountId: funded.accountId, amount: 5n, reference: text, requestId: '' }, o),
        ),
      );
      assert.equal(topUp.param, 'reference');
    }
    assert.equal((await svc.core.keys.list(funded.accountId)).length, keysBefore);
    assert.equal((await svc.wallet(funded.accountId)).balance, balanceBefore);
    assert.equal((await svc.store.db.selectFrom('accounts').select('id').execute()).length, accountsBefore);

    const { key } = await callCore(admin, (o) =>
      c.keys.createKey({ accountId: funded.accountId, name: PERSIAN, scope: '' }, o),
    );
    assert.equal(key?.name, PERSIAN, 'ZWNJ is kept');
    const { account } = await callCore(admin, (o) => c.accounts.createAccount({ name: PERSIAN }, o));
    assert.equal(account?.name, PERSIAN);
  });

  it('console: a key label with a bidi override is refused with a clear message and no key is made', async () => {
    const user = await createConsoleUser(svc, {
      name: 'Bidi',
      email: 'bidi@example.com',
      balance: 0n,
      keyName: 'first',
    });
    const browser = consoleClient(svc.baseUrl);
    assert.equal((await browser.signIn(user.email, user.password)).status, 303);
    const keys = (await svc.core.keys.list(user.accountId)).length;
    const { page: res } = await browser.createKey({ name: 'gpj\u202Eexe.txt' });
    assert.equal(res.status, 400);
    assert.match(res.body, /The label may not contain control or invisible formatting characters \(found U\+202E/);
    assert.equal((await svc.core.keys.list(user.accountId)).length, keys);
    const { page: ok } = await browser.createKey({ name: PERSIAN });
    assert.equal(ok.status, 200);
    assert.ok(ok.body.includes(PERSIAN));
  });
});
