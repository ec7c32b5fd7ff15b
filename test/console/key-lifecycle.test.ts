import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleClient, type ConsoleUser } from './helpers';

const SECRET_RE = /data-testid="new-key">(svc_sk_[0-9A-Za-z]+)</;

describe('console: safe key creation and the key lifecycle over HTTP', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let alice: ConsoleUser;
  let bob: ConsoleUser;

  async function keyCount(accountId: string): Promise<number> {
    return (await svc.core.keys.list(accountId)).length;
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

  async function signedIn(user: ConsoleUser): Promise<ConsoleClient> {
    const c = consoleClient(svc.baseUrl);
    assert.equal((await c.signIn(user.email, user.password)).status, 303);
    return c;
  }

  before(async function () {
    svc = await startSvc();
    alice = await createConsoleUser(svc, { name: 'Alice', email: 'a@example.com', balance: 10_000n, keyName: 'a1' });
    bob = await createConsoleUser(svc, {
      name: 'Bob',
      email: 'b@example.com',
      balance: 10_000n,
      keyName: 'bobs-build-key',
    });
  });

  after(async function () {
    await svc?.close();
  });

  it('POST → redirect → GET: the secret is shown once; a reload, a replayed form and a stale reveal make and show nothing', async function () {
    const c = await signedIn(alice);
    const before = await keyCount(alice.accountId);
    const { post, page, formId } = await c.createKey({ name: 'once', cap_daily: '' });
    assert.equal(post.status, 303);
    const location = post.headers.get('location') ?? '';
    assert.equal(location, `/console/keys?reveal=${formId}`);
    assert.equal(post.body.includes('svc_sk_'), false, 'the POST answer holds no secret');
    const secret = SECRET_RE.exec(page.body)?.[1] ?? '';
    assert.ok(await keyWorks(secret));

    // A reload of the page the redirect landed on: no secret, a clear word why.
    const reload = await c.get(location.replace('/console', ''));
    assert.equal(reload.status, 200);
    assert.equal(reload.body.includes(secret), false);
    assert.match(reload.body, /already shown once and is not shown again/);

    // The same form posted again (the back button and resubmit, a second tab): nothing made.
    const csrf = await c.csrf('/keys');
    const again = await c.post('/keys', { csrf_token: csrf, form_id: formId, name: 'once' });
    assert.equal(again.status, 303);
    assert.equal(again.headers.get('location'), `/console/keys?reveal=${formId}&again=1`);
    const againPage = await c.get(`/keys?reveal=${formId}&again=1`);
    assert.equal(SECRET_RE.test(againPage.body), false);
    assert.match(againPage.body, /already submitted, so nothing new was made/);
    assert.equal(await keyCount(alice.accountId), before + 1);

    // A crafted or unknown reveal id: the same refusal, nothing echoed.
    const crafted = await c.get(`/keys?reveal=${encodeURIComponent('<script>x</script>')}`);
    assert.equal(crafted.status, 200);
    assert.equal(crafted.body.includes('<script>x'), false);
    assert.match(crafted.body, /not shown again/);
  });

  it('a double submit (two POSTs of one form at once) makes one key, and only one page shows its secret', async function () {
    const c = await signedIn(alice);
    const before = await keyCount(alice.accountId);
    const csrf = await c.csrf('/keys');
    const formId = await c.hidden('/keys', 'form_id');
    const form = { csrf_token: csrf, form_id: formId, name: 'double', cap_daily: '۱٬۰۰۰' };
    const posts = await Promise.all([c.post('/keys', form), c.post('/keys', form)]);
    assert.deepEqual(
      posts.map((p) => p.status),
      [303, 303],
    );
    assert.equal(await keyCount(alice.accountId), before + 1);
    const pages = await Promise.all(posts.map((p) => c.get((p.headers.get('location') ?? '').replace('/console', ''))));
    const shown = pages.filter((p) => SECRET_RE.test(p.body));
    assert.equal(shown.length, 1, 'the secret is on exactly one page');
    const made = (await svc.core.keys.list(alice.accountId)).find((k) => k.name === 'double');
    assert.equal(made?.capDaily, 1000n, 'a cap typed in Persian digits with the Arabic separator');
  });

  it('the secret is shown only to the session that made it, never to another session or account', async function () {
    const c = await signedIn(alice);
    const other = await signedIn(alice);
    const eve = await signedIn(bob);
    const csrf = await c.csrf('/keys');
    const formId = await c.hidden('/keys', 'form_id');
    const post = await c.post('/keys', { csrf_token: csrf, form_id: formId, name: 'mine' });
    assert.equal(post.status, 303);
    for (const stranger of [other, eve]) {
      const page = await stranger.get(`/keys?reveal=${formId}`);
      assert.equal(SECRET_RE.test(page.body), false);
    }
    const page = await c.get(`/keys?reveal=${formId}`);
    assert.ok(SECRET_RE.test(page.body), 'the submitting session still sees it once');
  });

  it('a refused form keeps what was typed and its form id; the corrected form makes one key', async function () {
    const c = await signedIn(alice);
    const before = await keyCount(alice.accountId);
    const csrf = await c.csrf('/keys');
    const formId = await c.hidden('/keys', 'form_id');
    const typed = {
      csrf_token: csrf,
      form_id: formId,
      name: 'typed',
      scope: 'tools',
      cap_daily: '-5',
      cap_monthly: '9,000',
    };
    const refused = await c.post('/keys', typed);
    assert.equal(refused.status, 400);
    assert.match(refused.body, /daily cap must be a whole number of toman/);
    assert.match(refused.body, /<option value="tools" selected>/);
    assert.match(refused.body, /name="cap_daily" inputmode="numeric" size="10" value="-5"/);
    assert.match(refused.body, /value="9,000"/);
    assert.ok(refused.body.includes(`name="form_id" value="${formId}"`));
    assert.equal(await keyCount(alice.accountId), before);
    const fixed = await c.post('/keys', { ...typed, cap_daily: '۲۰۰۰' });
    assert.equal(fixed.status, 303);
    const made = (await svc.core.keys.list(alice.accountId)).find((k) => k.name === 'typed');
    assert.deepEqual([made?.scope, made?.capDaily, made?.capMonthly], ['tools', 2000n, 9000n]);
    assert.equal(await keyCount(alice.accountId), before + 1);
  });

  it('edits caps (Persian digits too) and rolls a key; each change is on its activity list; bad caps change nothing', async function () {
    const c = await signedIn(alice);
    const { page } = await c.createKey({ name: 'lifecycle' });
    const secret = SECRET_RE.exec(page.body)?.[1] ?? '';
    const key = (await svc.core.keys.list(alice.accountId)).find((k) => k.name === 'lifecycle');
    assert.ok(key !== undefined);
    const view = `/keys/view?id=${key.id}`;
    const csrf = await c.csrf(view);

    const saved = await c.post('/keys/caps', {
      csrf_token: csrf,
      key_id: key.id,
      cap_daily: '۱۲٬۰۰۰',
      cap_monthly: '',
    });
    assert.equal(saved.status, 303);
    assert.equal((await svc.core.keys.get(key.id)).capDaily, 12_000n);

    for (const bad of ['-5', '1.5', 'abc', '1e3']) {
      const refused = await c.post('/keys/caps', { csrf_token: csrf, key_id: key.id, cap_daily: bad, cap_monthly: '' });
      assert.equal(refused.status, 400, bad);
      assert.match(refused.body, /daily cap must be a whole number/);
      assert.ok(refused.body.includes(`value="${bad}"`), 'the typed value is kept');
    }
    assert.equal((await svc.core.keys.get(key.id)).capDaily, 12_000n);

    const formId = await c.hidden(view, 'form_id');
    const rolled = await c.post('/keys/roll', { csrf_token: csrf, key_id: key.id, form_id: formId, grace: '0' });
    assert.equal(rolled.status, 303);
    const landing = await c.get((rolled.headers.get('location') ?? '').replace('/console', ''));
    const fresh = SECRET_RE.exec(landing.body)?.[1] ?? '';
    assert.ok(fresh !== '' && fresh !== secret);
    assert.equal(await keyWorks(fresh), true);
    assert.equal(await keyWorks(secret), false, 'with no grace the old secret stops at once');
    assert.match(landing.body, /data-testid="key-activity"/);
    for (const line of [/Created/, /Caps changed/, /daily cap no cap → 12,000 toman/, /Rolled/])
      assert.match(landing.body, line);
    const replay = await c.post('/keys/roll', { csrf_token: csrf, key_id: key.id, form_id: formId, grace: '0' });
    assert.equal(replay.status, 303, 'a replayed roll form rolls nothing');
    assert.equal((await svc.core.keys.list(alice.accountId)).filter((k) => k.lineageId === key.lineageId).length, 2);
  });

  it("shows the key's limit of calls in flight: the service's, none, or the operator's number", async function () {
    const c = await signedIn(alice);
    await c.createKey({ name: 'busy' });
    const key = (await svc.core.keys.list(alice.accountId)).find((k) => k.name === 'busy');
    assert.ok(key !== undefined);
    const shown = async (): Promise<string> => {
      const page = await c.get(`/keys/view?id=${key.id}`);
      return (/data-testid="key-concurrent">\s*([^<]*?)\s*</.exec(page.body)?.[1] ?? '').trim();
    };
    assert.equal(await shown(), 'The service&#39;s limit');
    await svc.core.keys.update(key.id, { concurrentLimit: 0 });
    assert.equal(await shown(), 'No limit');
    await svc.core.keys.update(key.id, { concurrentLimit: 4 });
    assert.equal(await shown(), '4');
  });

  it("another account's key cannot be viewed, capped, rolled or revoked; nothing changes", async function () {
    const c = await signedIn(alice);
    const csrf = await c.csrf('/keys');
    const formId = await c.hidden('/keys', 'form_id');
    const view = await c.get(`/keys/view?id=${bob.keyId}`);
    assert.equal(view.status, 404);
    assert.equal(view.body.includes('bobs-build-key'), false);
    const caps = await c.post('/keys/caps', { csrf_token: csrf, key_id: bob.keyId, cap_daily: '0', cap_monthly: '0' });
    assert.equal(caps.status, 404);
    const roll = await c.post('/keys/roll', { csrf_token: csrf, key_id: bob.keyId, form_id: formId, grace: '0' });
    assert.equal(roll.status, 404);
    assert.match(roll.body, /There is no such API key in your account/);
    const key = await svc.core.keys.get(bob.keyId);
    assert.deepEqual([key.capDaily, key.replacedBy, key.revokedAt], [null, null, null]);
    assert.equal(await keyWorks(bob.key), true);
  });

  it('refuses a CSRF-less caps or roll form, changing nothing', async function () {
    const c = await signedIn(alice);
    const formId = await c.hidden('/keys', 'form_id');
    const caps = await c.post('/keys/caps', { key_id: alice.keyId, cap_daily: '0', cap_monthly: '' });
    assert.equal(caps.status, 403);
    const roll = await c.post('/keys/roll', { key_id: alice.keyId, form_id: formId, grace: '0' });
    assert.equal(roll.status, 403);
    const key = await svc.core.keys.get(alice.keyId);
    assert.deepEqual([key.capDaily, key.replacedBy], [null, null]);
  });

  it('edits the label and expiry; a bidi or markup label and a past date are refused as typed, nothing changed', async function () {
    const c = await signedIn(alice);
    await c.createKey({ name: 'to-edit' });
    const key = (await svc.core.keys.list(alice.accountId)).find((k) => k.name === 'to-edit');
    assert.ok(key !== undefined);
    const csrf = await c.csrf(`/keys/view?id=${key.id}`);
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const persianDate = tomorrow.replace(/[0-9]/g, (d) => String.fromCodePoint(0x06f0 + Number(d)));
    const saved = await c.post('/keys/edit', {
      csrf_token: csrf,
      key_id: key.id,
      name: 'renamed',
      expires_on: persianDate,
    });
    assert.equal(saved.status, 303);
    let now = await svc.core.keys.get(key.id);
    assert.equal(now.name, 'renamed');
    assert.equal(
      now.expiresAt?.toISOString(),
      new Date(Date.parse(`${tomorrow}T00:00:00Z`) + 86_400_000).toISOString(),
    );
    const page = await c.get(`/keys/view?id=${key.id}`);
    assert.match(page.body, /<strong>Edited<\/strong>\s*<span>label “to-edit” → “renamed”; expiry never → /);

    for (const [fields, message] of [
      [{ name: 'gpj\u202Eexe.txt', expires_on: '' }, /control or invisible formatting characters \(found U\+202E/],
      [{ name: '<b>x</b>', expires_on: '' }, /markup is not allowed/],
      [{ name: 'ok', expires_on: '2020-01-01' }, /expiry must be a time in the future/],
      [{ name: 'ok', expires_on: '2026-02-30' }, /expiry must be a date/],
    ] as const) {
      const refused = await c.post('/keys/edit', { csrf_token: csrf, key_id: key.id, ...fields });
      assert.equal(refused.status, 400, fields.name);
      assert.match(refused.body, message);
      assert.equal(refused.body.includes('<b>x'), false);
    }
    now = await svc.core.keys.get(key.id);
    assert.equal(now.name, 'renamed');

    const cleared = await c.post('/keys/edit', { csrf_token: csrf, key_id: key.id, name: 'renamed', expires_on: '' });
    assert.equal(cleared.status, 303);
    assert.equal((await svc.core.keys.get(key.id)).expiresAt, null);
    const foreign = await c.post('/keys/edit', {
      csrf_token: csrf,
      key_id: bob.keyId,
      name: 'mine now',
      expires_on: '',
    });
    assert.equal(foreign.status, 404);
    assert.equal((await svc.core.keys.get(bob.keyId)).name, 'bobs-build-key');
  });
});
