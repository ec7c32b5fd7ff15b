import { toman, when } from '../../adapters/console/format';
import assert from 'node:assert/strict';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser } from './helpers';

describe('console operator: search and page accounts, an account page, audited top-ups', function () {
  this.timeout(120_000);
  let svc: TestSvc;

  before(async function () {
    svc = await startSvc();
  });

  after(async function () {
    await svc?.close();
  });

  it('searches by name, email or id; pages by cursor; refuses a crafted cursor', async function () {
    const made: string[] = [];
    for (let i = 0; i < 55; i++) made.push((await svc.core.accounts.create(`Tenant ${String(i).padStart(2, '0')}`)).id);
    const special = await createConsoleUser(svc, {
      name: 'Zagros 50%_off',
      email: 'zagros@example.com',
      balance: 0n,
      keyName: 'k',
    });
    const c = consoleClient(svc.baseUrl);
    assert.equal((await c.signInOperator(svc.adminToken)).status, 303);

    const first = await c.get('/accounts');
    const rows = (body: string): number => (body.split('<tbody>')[1]?.match(/<tr>/g) ?? []).length;
    assert.equal(rows(first.body), 50);
    const next = /rel="next" href="([^"]+)"/.exec(first.body)?.[1] ?? '';
    const second = await c.get(next.replace(/&amp;/g, '&').replace('/console', ''));
    assert.ok(rows(second.body) >= 6, 'the rest on the next page');
    const all = [first.body, second.body].join('');
    for (const id of made) assert.ok(all.includes(id), `${id} is on a page`);

    for (const q of ['ZAGROS@', 'zagros 50%_', special.accountId]) {
      const found = await c.get(`/accounts?q=${encodeURIComponent(q)}`);
      assert.equal(rows(found.body), 1, q);
      assert.ok(found.body.includes(special.accountId));
    }
    // LIKE wildcards are matched as themselves: "%" finds only the name that has one.
    assert.equal(rows((await c.get('/accounts?q=%25')).body), 1);
    const none = await c.get('/accounts?q=nobody-here');
    assert.match(none.body, /No account matches/);
    const crafted = await c.get(`/accounts?cursor=${Buffer.from("1|x' OR 1=1").toString('base64url')}`);
    assert.equal(crafted.status, 400);
    assert.match(crafted.body, /page_token is not one this service returned/);
  });

  it('shows one account (wallet, keys, ledger, operator actions); a user session cannot open it', async function () {
    const user = await createConsoleUser(svc, {
      name: 'Kavir',
      email: 'kavir@example.com',
      balance: 0n,
      keyName: 'kavir-key',
    });
    const op = consoleClient(svc.baseUrl);
    await op.signInOperator(svc.adminToken);
    const csrf = await op.csrf('/accounts');
    const form = {
      csrf_token: csrf,
      account_id: user.accountId,
      amount: '2,500',
      reference: 'inv 9',
      form_id: 'form-kavir-000000001',
      confirm: 'yes',
    };
    assert.equal((await op.post('/accounts/topup', form)).status, 303);
    // Issue 30: a form confirmed again (the same amount, or another typed into it) credits
    // nothing, and says so with the amount that was applied and when, never the success notice.
    const applied = (await svc.core.deps.wallet.ledger(user.accountId, 10)).find((e) => e.kind === 'topup');
    assert.ok(applied !== undefined);
    const at = when('en', applied.createdAt);
    for (const amount of ['2,500', '50,000']) {
      const again = await op.post('/accounts/topup', { ...form, amount });
      assert.equal(again.status, 409, `replayed with ${amount}`);
      assert.ok(again.body.includes(`This top-up form was already applied: 2,500 toman at ${at}.`), again.body);
      assert.doesNotMatch(again.body, /The wallet was topped up/);
      assert.match(again.body, /data-testid="account-balance">2,500 /);
    }
    op.cookies.set('svc_lang', 'fa');
    const fa = await op.post('/accounts/topup', { ...form, amount: '50,000' });
    assert.equal(fa.status, 409);
    assert.ok(fa.body.includes(`این فرم شارژ پیش‌تر اعمال شده است: ${toman(2500n, 'fa')} در ${when('fa', applied.createdAt)}.`), fa.body);
    op.cookies.set('svc_lang', 'en');
    const page = await op.get(`/accounts/view?id=${user.accountId}`);
    assert.equal(page.status, 200);
    assert.match(page.body, /data-testid="account-balance">2,500 /);
    assert.match(page.body, /kavir-key/);
    const audit = page.body.split('data-testid="account-audit"')[1] ?? '';
    assert.equal((audit.match(/<strong>Top-up<\/strong>/g) ?? []).length, 1, 'one top-up, audited once');
    assert.match(audit, /2,500 toman, reference “inv 9”, balance after 2,500/);
    assert.equal((await op.get('/accounts/view?id=acc_nope')).status, 404);

    const u = consoleClient(svc.baseUrl);
    await u.signIn(user.email, user.password);
    const denied = await u.get(`/accounts/view?id=${user.accountId}`);
    assert.equal(denied.status, 303);
    assert.equal(denied.headers.get('location'), '/console/keys');
  });
  it("gives an existing account a console sign-in from its page, and its owner then sees that account's key", async function () {
    const account = await svc.core.accounts.create('Bare Account');
    const { key } = await svc.core.keys.create({ accountId: account.id, name: 'made-before-sign-in' });
    const op = consoleClient(svc.baseUrl);
    await op.signInOperator(svc.adminToken);
    const page = await op.get(`/accounts/view?id=${account.id}`);
    assert.match(page.body, /action="\/console\/accounts\/sign-in"/);
    const csrf = await op.csrf(`/accounts/view?id=${account.id}`);
    const short = await op.post('/accounts/sign-in', {
      csrf_token: csrf,
      account_id: account.id,
      email: 'bare@example.com',
      password: 'short',
    });
    assert.equal(short.status, 400);
    assert.match(short.body, /at least 10 characters/);
    const saved = await op.post('/accounts/sign-in', {
      csrf_token: csrf,
      account_id: account.id,
      email: 'bare@example.com',
      password: 'bare account password',
    });
    assert.equal(saved.status, 303);
    assert.equal(saved.headers.get('location'), `/console/accounts/view?id=${account.id}&done=sign_in`);
    const after = await op.get(`/accounts/view?id=${account.id}&done=sign_in`);
    assert.match(after.body, /The sign-in was saved/);
    assert.match(after.body.split('data-testid="account-audit"')[1] ?? '', /Sign-in set.*bare@example.com added/s);
    const taken = await op.post('/accounts/sign-in', {
      csrf_token: csrf,
      account_id: (await svc.core.accounts.create('Another')).id,
      email: 'bare@example.com',
      password: 'another long password',
    });
    assert.equal(taken.status, 400);
    assert.match(taken.body, /already exists/);

    const owner = consoleClient(svc.baseUrl);
    assert.equal((await owner.signIn('bare@example.com', 'bare account password')).status, 303);
    assert.ok((await owner.get('/keys')).body.includes(key.id));
    // A user session cannot set anyone's sign-in.
    const ownerCsrf = await owner.csrf('/account');
    const denied = await owner.post('/accounts/sign-in', {
      csrf_token: ownerCsrf,
      account_id: account.id,
      email: 'thief@example.com',
      password: 'thief long password',
    });
    assert.equal((denied.headers.get('location') ?? '').includes('done=sign_in'), false);
    assert.notEqual((await consoleClient(svc.baseUrl).signIn('thief@example.com', 'thief long password')).status, 303);
  });
  it("pages the account's ledger back to its first entry, as the user's wallet page does", async function () {
    const account = await svc.core.accounts.create('Long Ledger');
    const wallet = svc.core.deps.wallet;
    await wallet.topUp({ accountId: account.id, amount: 100_000n, reference: 'the very first top-up' });
    for (let i = 0; i < 55; i++) await wallet.topUp({ accountId: account.id, amount: 1n, reference: `later ${i}` });
    const op = consoleClient(svc.baseUrl);
    await op.signInOperator(svc.adminToken);
    const seen: string[] = [];
    let path = `/accounts/view?id=${account.id}`;
    for (let pages = 0; pages < 5; pages++) {
      const page = await op.get(path);
      assert.equal(page.status, 200);
      const ledger = (page.body.split('data-testid="account-ledger"')[1] ?? '').split('</nav>')[0] ?? '';
      seen.push(...[...ledger.matchAll(/<li>[\s\S]*?<\/li>/g)].map((m) => m[0]));
      const older = /rel="next"\s+href="([^"]+)"/.exec(ledger)?.[1];
      if (older === undefined) break;
      path = older.replace(/&amp;/g, '&').replace('/console', '').replace(/#.*$/, '');
    }
    assert.equal(seen.length, 56, 'every entry once');
    assert.match(seen.at(-1) ?? '', /the very first top-up/);
    const crafted = await op.get(`/accounts/view?id=${account.id}&before=not-an-entry`);
    assert.equal(crafted.status, 400);
  });
});
