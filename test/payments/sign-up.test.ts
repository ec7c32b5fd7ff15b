import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startFakeGateways, type FakeGateways } from '../fakes/payment-gateways';
import { consoleClient, createConsoleUser } from '../console/helpers';

/*
 * Self-serve sign-up (issue 34, SPEC §12): closed by default; when open, anyone makes an account
 * with an email and a password, the same answer whether or not the email is taken, limited per
 * address and per client IP; and the whole first hour of a stranger: sign up, top up 50,000
 * toman through the gateway, make a key, make a billed call, see it all in the console.
 */

const PUBLIC = 'http://svc.test';

async function signUpForm(c: ReturnType<typeof consoleClient>, email: string, password: string) {
  const csrf = await c.csrf('/sign-up');
  return c.post('/sign-up', { csrf_token: csrf, email, password });
}

describe('console: sign-up', function () {
  this.timeout(60_000);

  it('is closed by default: no link, the form refused', async function () {
    const svc = await startSvc();
    try {
      const c = consoleClient(svc.baseUrl);
      const page = await c.get('/sign-in');
      assert.doesNotMatch(page.body, /Create an account/);
      assert.match(page.body, /Ask the operator/);
      const form = await c.get('/sign-up');
      assert.equal(form.status, 403);
      assert.match(form.body, /Sign-up is closed/);
      const csrf = await c.csrf('/sign-in');
      const post = await c.post('/sign-up', { csrf_token: csrf, email: 'x@example.com', password: 'long enough pass' });
      assert.equal(post.status, 403);
      assert.equal((await svc.store.db.selectFrom('accounts').select('id').execute()).length, 0);
    } finally {
      await svc.close();
    }
  });

  describe('open', function () {
    let svc: TestSvc;
    let fake: FakeGateways;
    before(async function () {
      fake = await startFakeGateways();
      svc = await startSvc({
        config: `
console:
  signup: open
payments:
  public_url: ${PUBLIC}
  gateways:
    zibal:
      merchant: zibal
      base_url: ${fake.baseUrl('zibal')}
`,
      });
      fake.publicOrigin = { from: PUBLIC, to: svc.baseUrl };
    });
    after(async function () {
      await svc?.close();
      await fake?.close();
    });

    async function accountCount(): Promise<number> {
      const rows = await svc.store.db.selectFrom('accounts').select('id').execute();
      return rows.length;
    }

    it('a stranger signs up, tops up 50,000 toman, makes a key and a billed call, and sees it all', async function () {
      const c = consoleClient(svc.baseUrl);
      assert.match((await c.get('/sign-in')).body, /data-testid="sign-up-link"/);
      const done = await signUpForm(c, 'Stranger@Example.com', 'a long password 1');
      assert.equal(done.status, 200);
      assert.match(done.body, /its account is ready: sign in with it below/);
      const signedIn = await c.signIn('stranger@example.com', 'a long password 1');
      assert.equal(signedIn.status, 303);
      const wallet = await c.get('/wallet');
      assert.match(wallet.body, /data-testid="wallet-balance">0 /);

      const csrf = await c.csrf('/wallet');
      const post = await c.post('/wallet/topup', { csrf_token: csrf, amount: '50,000', gateway: 'zibal' });
      assert.equal(post.status, 303);
      const start = await fetch(`${post.headers.get('location') ?? ''}?action=pay`, { redirect: 'manual' });
      const back = start.headers.get('location') ?? '';
      const receipt = await fetch(back, { redirect: 'manual' });
      assert.match(await receipt.text(), /Payment received/);
      assert.match((await c.get('/wallet')).body, /data-testid="wallet-balance">50,000 /);

      const { page } = await c.createKey({ name: 'first key', scope: 'all' });
      const secret = /svc_sk_[A-Za-z0-9]+/.exec(page.body)?.[0];
      assert.ok(secret, 'the new key is shown once');
      const openai = new OpenAI({ apiKey: secret, baseURL: `${svc.baseUrl}/v1/openai` });
      const completion = await openai.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'hello' }],
      });
      assert.ok(completion.choices.length > 0);
      const after = await c.get('/wallet');
      const balance = Number((/data-testid="wallet-balance">([\d,]+) /.exec(after.body)?.[1] ?? '').replace(/,/g, ''));
      assert.ok(balance < 50_000 && balance > 0, `charged: ${balance}`);
      assert.match(after.body, /data-state="2"[^>]*>\s*Paid\s*<\/td>/);
      assert.match((await c.get('/usage')).body, /svc-pro/);
    });

    it('answers the same for a taken email and creates nothing; refuses a short password like operator-made sign-ins', async function () {
      await createConsoleUser(svc, { name: 'Taken', email: 'taken@example.com', balance: 0n, keyName: 'k' });
      const before = await accountCount();
      const fresh = await signUpForm(consoleClient(svc.baseUrl), 'fresh@example.com', 'another long pass');
      const taken = await signUpForm(consoleClient(svc.baseUrl), 'taken@example.com', 'another long pass');
      assert.equal(fresh.status, taken.status);
      const notice = (body: string) => /<div class="alert[^"]*"[^>]*>([\s\S]*?)<\/div>/.exec(body)?.[1];
      assert.equal(notice(fresh.body), notice(taken.body));
      assert.equal(await accountCount(), before + 1);
      // The taken account's password is untouched.
      assert.equal((await consoleClient(svc.baseUrl).signIn('taken@example.com', 'another long pass')).status, 401);

      const short = await signUpForm(consoleClient(svc.baseUrl), 'short@example.com', 'short');
      assert.equal(short.status, 400);
      assert.match(short.body, /at least 10 characters|10-200|10 to 200/);
      const noCsrf = await consoleClient(svc.baseUrl).post('/sign-up', {
        email: 'a@example.com',
        password: 'long enough pass',
      });
      assert.equal(noCsrf.status, 403);
      assert.equal(await accountCount(), before + 1);
    });

    it('limits sign-ups per email address and per client address', async function () {
      const c = consoleClient(svc.baseUrl);
      for (let i = 0; i < 3; i++)
        assert.equal((await signUpForm(c, 'again@example.com', 'a long password 1')).status, 200);
      const limited = await signUpForm(c, 'again@example.com', 'a long password 1');
      assert.equal(limited.status, 429);
      assert.ok(Number(limited.headers.get('retry-after')) > 0);
      // Per address: ten attempts from one client, whatever the emails.
      let status = 200;
      for (let i = 0; i < 12 && status !== 429; i++)
        status = (await signUpForm(c, `n${i}@example.com`, 'a long password 1')).status;
      assert.equal(status, 429);
    });
  });
});
