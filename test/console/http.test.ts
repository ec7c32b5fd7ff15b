import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { consoleDb } from '../../core/console/tables';
import { hashToken } from '../../core/console/sessions';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleUser } from './helpers';

describe('console over HTTP: bad input and account isolation', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let alice: ConsoleUser;
  let bob: ConsoleUser;
  let aliceRequestId: string;

  async function keyCount(accountId: string): Promise<number> {
    return (await svc.core.keys.list(accountId)).length;
  }

  async function sessionCount(): Promise<number> {
    const rows = await consoleDb(svc.store).selectFrom('console_sessions').select('token_hash').execute();
    return rows.length;
  }

  async function keyWorks(key: string): Promise<boolean> {
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    try {
      await client.models.list();
      return true;
    } catch (error) {
      if (error instanceof OpenAI.AuthenticationError) return false;
      throw error;
    }
  }

  before(async function () {
    svc = await startSvc();
    alice = await createConsoleUser(svc, {
      name: 'Alice Ltd',
      email: 'alice@example.com',
      balance: 50_000n,
      keyName: 'alice-laptop',
    });
    bob = await createConsoleUser(svc, {
      name: 'Bob Co',
      email: 'bob@example.com',
      balance: 70_000n,
      keyName: 'bob-server',
    });
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: alice.key, maxRetries: 0 });
    const { response } = await client.chat.completions
      .create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    aliceRequestId = response.headers.get('x-request-id') ?? '';
    assert.ok(aliceRequestId !== '');
  });

  after(async function () {
    await svc?.close();
  });

  describe('sign-in', function () {
    it('signs in with the right password: HttpOnly, SameSite=Strict session cookie, no Secure over plain HTTP', async function () {
      const c = consoleClient(svc.baseUrl);
      const res = await c.signIn(alice.email, alice.password);
      assert.equal(res.status, 303);
      assert.equal(res.headers.get('location'), '/console/keys');
      const cookie = res.headers.getSetCookie().find((l) => l.startsWith('svc_session='));
      assert.ok(cookie);
      assert.match(cookie, /HttpOnly/);
      assert.match(cookie, /SameSite=Strict/);
      assert.doesNotMatch(cookie, /Secure/);
      assert.equal((await c.get('/keys')).status, 200);
    });

    it('marks the cookie Secure behind a TLS proxy (X-Forwarded-Proto: https)', async function () {
      const c = consoleClient(svc.baseUrl, { 'x-forwarded-proto': 'https' });
      const res = await c.signIn(alice.email, alice.password);
      assert.equal(res.status, 303);
      assert.match(res.headers.getSetCookie().find((l) => l.startsWith('svc_session=')) ?? '', /; Secure/);
    });

    it('refuses a wrong password and an unknown email with the same clear message and no session', async function () {
      const before = await sessionCount();
      for (const [email, password] of [
        [alice.email, 'wrong password!'],
        ['nobody@example.com', 'whatever password'],
      ] as const) {
        const c = consoleClient(svc.baseUrl);
        const res = await c.signIn(email, password);
        assert.equal(res.status, 401);
        assert.match(res.body, /The email address or the password is not correct/);
        assert.equal(c.cookies.has('svc_session'), false);
      }
      assert.equal(await sessionCount(), before);
    });

    it('refuses a missing or forged CSRF token on the sign-in form', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.csrf('/sign-in');
      for (const token of ['', 'forged-token-forged-token-forged']) {
        const res = await c.post('/sign-in', { csrf_token: token, email: alice.email, password: alice.password });
        assert.equal(res.status, 403);
        assert.match(res.body, /did not come from this console/);
        assert.equal(c.cookies.has('svc_session'), false);
      }
    });

    it('rate-limits failed attempts per email: after 5, even the right password is refused for a while', async function () {
      const carol = await createConsoleUser(svc, {
        name: 'Carol',
        email: 'carol@example.com',
        balance: 0n,
        keyName: 'k',
      });
      const c = consoleClient(svc.baseUrl);
      for (let i = 0; i < 5; i++) assert.equal((await c.signIn(carol.email, `wrong password ${i}`)).status, 401);
      const res = await c.signIn(carol.email, carol.password);
      assert.equal(res.status, 429);
      assert.match(res.body, /Too many failed sign-in attempts/);
      assert.ok(Number(res.headers.get('retry-after')) > 0);
      assert.equal(c.cookies.has('svc_session'), false);
      // Another account is not locked by Carol's failures.
      assert.equal((await consoleClient(svc.baseUrl).signIn(bob.email, bob.password)).status, 303);
    });

    it('refuses a wrong operator token, and rate-limits guessing it', async function () {
      const c = consoleClient(svc.baseUrl);
      const res = await c.signInOperator('not-the-token');
      assert.equal(res.status, 401);
      assert.match(res.body, /not the operator token/);
      for (let i = 0; i < 4; i++) assert.equal((await c.signInOperator(`guess ${i}`)).status, 401);
      const locked = await c.signInOperator(svc.adminToken);
      assert.equal(locked.status, 429);
      assert.match(locked.body, /Too many failed sign-in attempts/);
      assert.equal(c.cookies.has('svc_session'), false);
      // Later tests sign the operator in from the same address: forget these failures.
      await consoleDb(svc.store)
        .deleteFrom('console_sign_in_failures')
        .where('subject', 'like', 'operator:%')
        .execute();
    });
  });

  describe('sessions and CSRF', function () {
    it('an expired session is sent to sign-in and changes nothing', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const csrf = await c.csrf('/keys');
      const token = c.cookies.get('svc_session') ?? '';
      await consoleDb(svc.store)
        .updateTable('console_sessions')
        .set({ expires_at: BigInt(Date.now() - 1000) })
        .where('token_hash', '=', hashToken(token))
        .execute();
      const keys = await keyCount(alice.accountId);
      const res = await c.post('/keys', { csrf_token: csrf, name: 'after expiry' });
      assert.equal(res.status, 401);
      assert.match(res.body, /session has ended, so nothing was changed/);
      assert.equal(await keyCount(alice.accountId), keys);
      c.cookies.set('svc_session', token);
      const page = await c.get('/keys');
      assert.equal(page.status, 303);
      assert.equal(page.headers.get('location'), '/console/sign-in?m=ended');
      assert.equal(c.cookies.has('svc_session'), false, 'the dead cookie is cleared');
    });

    it('no cookie: pages redirect to sign-in, forms are refused', async function () {
      const c = consoleClient(svc.baseUrl);
      const page = await c.get('/usage');
      assert.equal(page.status, 303);
      assert.equal(page.headers.get('location'), '/console/sign-in');
      assert.equal((await c.post('/keys', { csrf_token: 'x', name: 'x' })).status, 401);
    });

    it('refuses a missing or forged CSRF token on every form and changes nothing', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const keys = await keyCount(alice.accountId);
      for (const token of ['', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']) {
        const created = await c.post('/keys', { csrf_token: token, name: 'csrf test' });
        assert.equal(created.status, 403);
        assert.match(created.body, /did not come from this console/);
        const revoked = await c.post('/keys/revoke', { csrf_token: token, key_id: alice.keyId });
        assert.equal(revoked.status, 403);
        const password = await c.post('/account/password', {
          csrf_token: token,
          current_password: alice.password,
          new_password: 'a brand new password',
        });
        assert.equal(password.status, 403);
        const out = await c.post('/sign-out', { csrf_token: token });
        assert.equal(out.status, 403, 'a forged sign-out does not sign anyone out');
      }
      assert.equal(await keyCount(alice.accountId), keys);
      assert.equal(await keyWorks(alice.key), true);
      assert.equal((await c.get('/keys')).status, 200, 'still signed in');
      assert.equal(
        (await consoleClient(svc.baseUrl).signIn(alice.email, alice.password)).status,
        303,
        'the password did not change',
      );
    });

    it("another site's sign-out form (no cookie, as SameSite=Strict sends none) clears nothing; a real sign-out ends the server session", async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const token = c.cookies.get('svc_session') ?? '';
      const forged = await fetch(`${svc.baseUrl}/console/sign-out`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: 'https://evil.example',
          'sec-fetch-site': 'cross-site',
        },
        body: 'csrf_token=',
        redirect: 'manual',
      });
      assert.equal(forged.status, 303);
      assert.deepEqual(
        forged.headers.getSetCookie().filter((l) => l.startsWith('svc_session=')),
        [],
        'the session cookie is not cleared',
      );
      assert.equal((await c.get('/keys')).status, 200, 'still signed in');

      const out = await c.post('/sign-out', { csrf_token: await c.csrf('/keys') });
      assert.equal(out.status, 303);
      assert.equal(out.headers.get('location'), '/console/sign-in?m=signed_out');
      const row = await consoleDb(svc.store)
        .selectFrom('console_sessions')
        .select('token_hash')
        .where('token_hash', '=', hashToken(token))
        .executeTakeFirst();
      assert.equal(row, undefined, 'the server session is gone');
      c.cookies.set('svc_session', token);
      assert.equal((await c.get('/keys')).status, 303, 'the old cookie no longer works');
    });

    it('refuses a body that is not a form', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const res = await fetch(`${svc.baseUrl}/console/keys`, {
        method: 'POST',
        headers: { cookie: `svc_session=${c.cookies.get('svc_session') ?? ''}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'json' }),
      });
      assert.equal(res.status, 400);
      assert.match(await res.text(), /accepts only submitted forms/);
    });
  });

  describe('API keys', function () {
    it('refuses a 10,000-character label and a label with markup, creating nothing and echoing no markup', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const keys = await keyCount(alice.accountId);
      const { page: long } = await c.createKey({ name: 'x'.repeat(10_000) });
      assert.equal(long.status, 400);
      assert.match(long.body, /The label must be at most 100 characters \(this one has 10000\)/);
      const markup = '<script>alert(1)</script>';
      const { page: res } = await c.createKey({ name: markup });
      assert.equal(res.status, 400);
      assert.match(res.body, /markup is not allowed/);
      assert.equal(res.body.includes('<script>alert'), false);
      assert.ok(
        res.body.includes('&lt;script&gt;alert(1)&lt;/script&gt;'),
        'the rejected label is shown escaped for correction',
      );
      assert.equal(await keyCount(alice.accountId), keys);
    });

    it('creates a key shown in full once, escaped Persian label with dir=auto', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const { post, page: res } = await c.createKey({ name: 'کلید "تست" & co' });
      assert.equal(post.status, 303, 'POST → redirect → GET');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      const key = /data-testid="new-key">(svc_sk_[0-9A-Za-z]+)</.exec(res.body)?.[1] ?? '';
      assert.equal(await keyWorks(key), true);
      assert.ok(res.body.includes('کلید &quot;تست&quot; &amp; co'));
      const list = await c.get('/keys');
      assert.equal(list.body.includes(key), false);
      assert.match(list.body, /<td dir="auto">\s*<a href="\/console\/keys\/view\?id=key_[^"]+"\s*>کلید &quot;تست&quot; &amp; co<\/a/);
    });

    it("cannot revoke another account's key: refused as unknown, and the key keeps working", async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const confirm = await c.get(`/keys/revoke?id=${bob.keyId}`);
      assert.equal(confirm.status, 404);
      assert.equal(confirm.body.includes('bob-server'), false);
      const res = await c.post('/keys/revoke', { csrf_token: await c.csrf('/keys'), key_id: bob.keyId });
      assert.equal(res.status, 404);
      assert.match(res.body, /There is no such API key in your account/);
      assert.equal(await keyWorks(bob.key), true);
      const row = await svc.core.keys.get(bob.keyId);
      assert.equal(row.revokedAt, null);
    });
  });

  describe('no page shows another account', function () {
    it("Bob's pages show none of Alice's keys, usage, ledger or identity, and Alice's show none of Bob's", async function () {
      const aliceKey = await svc.core.keys.get(alice.keyId);
      const bobKey = await svc.core.keys.get(bob.keyId);
      const secrets = {
        alice: [alice.keyId, aliceKey.lastFour, 'alice-laptop', alice.email, 'Alice Ltd', aliceRequestId, '50,000'],
        bob: [bob.keyId, bobKey.lastFour, 'bob-server', bob.email, 'Bob Co', '70,000'],
      };
      for (const [who, user, others] of [
        ['bob', bob, secrets.alice],
        ['alice', alice, secrets.bob],
      ] as const) {
        const c = consoleClient(svc.baseUrl);
        assert.equal((await c.signIn(user.email, user.password)).status, 303);
        for (const path of [
          '/keys',
          '/usage',
          `/usage?key=${alice.keyId}`,
          `/usage?key=${bob.keyId}`,
          '/wallet',
          '/account',
          '/connect',
        ]) {
          const page = await c.get(path);
          assert.equal(page.status, 200, `${who} ${path}`);
          for (const text of others) assert.equal(page.body.includes(text), false, `${who} sees ${text} on ${path}`);
        }
      }
      // Alice does see her own request on her usage page.
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      assert.ok((await c.get('/usage')).body.includes(aliceRequestId));
    });

    it('a user session cannot reach the operator pages or top up a wallet', async function () {
      const c = consoleClient(svc.baseUrl);
      await c.signIn(alice.email, alice.password);
      const page = await c.get('/accounts');
      assert.equal(page.status, 303);
      assert.equal(page.headers.get('location'), '/console/keys');
      const res = await c.post('/accounts/topup', {
        csrf_token: await c.csrf('/keys'),
        account_id: alice.accountId,
        amount: '1000000',
      });
      assert.equal(res.status, 403);
      assert.equal((await svc.wallet(alice.accountId)).balance < 50_000n, true);
      const created = await c.post('/accounts', {
        csrf_token: await c.csrf('/keys'),
        name: 'x',
        email: 'x@example.com',
        password: 'long enough pw',
      });
      assert.equal(created.status, 403);
    });
  });

  describe('operator', function () {
    it('creates accounts and tops up wallets; bad input is refused and changes nothing', async function () {
      const c = consoleClient(svc.baseUrl);
      const signIn = await c.signInOperator(svc.adminToken);
      assert.equal(signIn.status, 303);
      assert.equal(signIn.headers.get('location'), '/console/accounts');
      const csrf = await c.csrf('/accounts');
      const count = async (): Promise<number> =>
        (await svc.store.db.selectFrom('accounts').select('id').execute()).length;
      const before = await count();
      const taken = await c.post('/accounts', {
        csrf_token: csrf,
        name: 'Dup',
        email: alice.email,
        password: 'long enough pw',
      });
      assert.equal(taken.status, 400);
      assert.match(taken.body, /already exists/);
      const markup = await c.post('/accounts', {
        csrf_token: csrf,
        name: '<b>x</b>',
        email: 'new@example.com',
        password: 'long enough pw',
      });
      assert.equal(markup.status, 400);
      const short = await c.post('/accounts', {
        csrf_token: csrf,
        name: 'New',
        email: 'new@example.com',
        password: 'short',
      });
      assert.equal(short.status, 400);
      assert.match(short.body, /at least 10 characters/);
      assert.equal(await count(), before);

      const ok = await c.post('/accounts', {
        csrf_token: csrf,
        name: 'نمونه',
        email: 'dana@example.com',
        password: 'dana password 1',
      });
      assert.equal(ok.status, 303);
      assert.equal(await count(), before + 1);
      assert.equal((await consoleClient(svc.baseUrl).signIn('dana@example.com', 'dana password 1')).status, 303);

      const balance = (await svc.wallet(bob.accountId)).balance;
      const formId = 'form0123456789abcdef';
      for (const amount of ['-5', 'abc', '0', '1.5']) {
        const res = await c.post('/accounts/topup', {
          csrf_token: csrf,
          account_id: bob.accountId,
          amount,
          form_id: formId,
        });
        assert.equal(res.status, 400, amount);
      }
      const unknown = await c.post('/accounts/topup', {
        csrf_token: csrf,
        account_id: 'acc_nope',
        amount: '10',
        form_id: formId,
      });
      assert.equal(unknown.status, 404);
      const noForm = await c.post('/accounts/topup', {
        csrf_token: csrf,
        account_id: bob.accountId,
        amount: '10',
        confirm: 'yes',
      });
      assert.equal(noForm.status, 400);
      assert.equal((await svc.wallet(bob.accountId)).balance, balance);
      const topUp = {
        csrf_token: csrf,
        account_id: bob.accountId,
        amount: '12,345',
        reference: 'receipt 7',
        form_id: formId,
      };
      // The first step reads the top-up back and changes nothing.
      const confirm = await c.post('/accounts/topup', { ...topUp, amount: '۱۲٬۳۴۵' });
      assert.equal(confirm.status, 200);
      assert.match(confirm.body, /data-testid="topup-words">twelve thousand three hundred forty-five toman/);
      assert.match(
        confirm.body,
        new RegExp(`data-testid="topup-after"><strong>${(balance + 12_345n).toLocaleString('en-US')} toman`),
      );
      assert.match(confirm.body, /name="confirm" value="yes"/);
      assert.ok(confirm.body.includes(`name="form_id" value="${formId}"`), 'the confirmation keeps the form id');
      assert.equal((await svc.wallet(bob.accountId)).balance, balance, 'nothing applied before confirming');
      const withoutCsrf = await c.post('/accounts/topup', { ...topUp, csrf_token: '' });
      assert.equal(withoutCsrf.status, 403);
      Object.assign(topUp, { confirm: 'yes' });
      assert.equal((await c.post('/accounts/topup', topUp)).status, 303);
      // The same form again credits nothing and says so, with what was applied (issue 30 point 7).
      const again = await c.post('/accounts/topup', topUp);
      assert.equal(again.status, 409, 'the same form again');
      assert.match(again.body, /already applied: 12,345 toman/);
      assert.equal((await svc.wallet(bob.accountId)).balance, balance + 12_345n, 'one form credits once');
      const page = await c.get('/accounts');
      const ids = [...page.body.matchAll(/name="form_id" value="([^"]+)"/g)].map((m) => m[1]);
      assert.ok(ids.length >= 2 && new Set(ids).size === ids.length, 'every top-up form has its own id');
    });
  });

  describe('password change', function () {
    it('needs the current password; afterwards the old one fails and other sessions end', async function () {
      const erin = await createConsoleUser(svc, { name: 'Erin', email: 'erin@example.com', balance: 0n, keyName: 'k' });
      const other = consoleClient(svc.baseUrl);
      await other.signIn(erin.email, erin.password);
      const c = consoleClient(svc.baseUrl);
      await c.signIn(erin.email, erin.password);
      const wrong = await c.post('/account/password', {
        csrf_token: await c.csrf('/account'),
        current_password: 'not it at all',
        new_password: 'erin new password',
      });
      assert.equal(wrong.status, 401);
      assert.match(wrong.body, /current password is not correct/);
      const weak = await c.post('/account/password', {
        csrf_token: await c.csrf('/account'),
        current_password: erin.password,
        new_password: 'short',
      });
      assert.equal(weak.status, 400);
      const ok = await c.post('/account/password', {
        csrf_token: await c.csrf('/account'),
        current_password: erin.password,
        new_password: 'erin new password',
      });
      assert.equal(ok.status, 303);
      assert.equal((await c.get('/keys')).status, 200, 'this session stays');
      assert.equal((await other.get('/keys')).status, 303, 'the other session ended');
      assert.equal((await consoleClient(svc.baseUrl).signIn(erin.email, erin.password)).status, 401);
      assert.equal((await consoleClient(svc.baseUrl).signIn(erin.email, 'erin new password')).status, 303);
    });
  });
});
