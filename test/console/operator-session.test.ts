import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, type ConsoleClient } from './helpers';

// Issue 20, point 7: an operator session is bound to the SVC_ADMIN_TOKEN it was opened with. The
// "restart" is a second core and gateway on the same database with another token (or none).
describe('console operator sessions end with the admin token (SQLite/MariaDB)', function () {
  this.timeout(120_000);
  let first: TestSvc;
  const others: TestSvc[] = [];
  let accountId: string;

  async function restarted(adminToken: string | null): Promise<TestSvc> {
    const svc = await startSvc({ databaseUrl: first.databaseUrl, adminToken });
    others.push(svc);
    return svc;
  }

  /** An operator signed in on `first`, its cookie then sent to `svc`. */
  async function operatorOn(svc: TestSvc): Promise<{ c: ConsoleClient; csrf: string }> {
    const signIn = consoleClient(first.baseUrl);
    assert.equal((await signIn.signInOperator(first.adminToken)).status, 303);
    const csrf = await signIn.csrf('/accounts');
    const c = consoleClient(svc.baseUrl);
    for (const [name, value] of signIn.cookies) c.cookies.set(name, value);
    return { c, csrf };
  }

  async function refused(svc: TestSvc): Promise<void> {
    const { c } = await operatorOn(svc);
    const page = await c.get('/accounts');
    assert.equal(page.status, 303);
    assert.equal(page.headers.get('location'), '/console/sign-in?m=ended');
    assert.equal(c.cookies.has('svc_session'), false, 'the dead cookie is cleared');

    const { c: again, csrf } = await operatorOn(svc);
    const balance = (await svc.wallet(accountId)).balance;
    const topUp = await again.post('/accounts/topup', {
      csrf_token: csrf,
      account_id: accountId,
      amount: '1000',
      form_id: 'form0123456789abcdef',
    });
    assert.equal(topUp.status, 401);
    assert.match(topUp.body, /session has ended, so nothing was changed/);
    assert.equal((await svc.wallet(accountId)).balance, balance, 'no top-up');
  }

  before(async () => {
    first = await startSvc();
    accountId = (await first.createFundedKey(100n, 'operator target')).accountId;
  });
  after(async () => {
    for (const svc of others.reverse()) await svc.close();
    await first?.close();
  });

  it('survives a restart with the same token', async () => {
    const same = await restarted(first.adminToken);
    const { c } = await operatorOn(same);
    const page = await c.get('/accounts');
    assert.equal(page.status, 200);
    assert.ok(page.body.includes('operator target'));
  });

  it('ends after a restart with another SVC_ADMIN_TOKEN: no account list, no top-up', async () => {
    await refused(await restarted('a-new-admin-token-after-rotation-0123'));
  });

  it('ends after a restart without SVC_ADMIN_TOKEN', async () => {
    await refused(await restarted(null));
  });

  it('offers the operator sign-in only on a server that has an SVC_ADMIN_TOKEN', async () => {
    const withToken = await consoleClient(first.baseUrl).get('/sign-in');
    assert.match(withToken.body, /action="\/console\/sign-in\/operator"/);
    const none = await restarted(null);
    const page = await consoleClient(none.baseUrl).get('/sign-in');
    assert.equal(page.status, 200);
    assert.doesNotMatch(page.body, /sign-in\/operator|admin_token|SVC_ADMIN_TOKEN/);
    assert.match(page.body, /action="\/console\/sign-in"/);
  });
});
