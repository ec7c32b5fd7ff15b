import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startSvc, type TestSvc } from '../helpers/harness';
import { createConsoleUser } from './helpers';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

const SHOTS = path.join(__dirname, 'screenshots');
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function digits(text: string | null): bigint {
  return BigInt((text ?? '').replace(/[^0-9]/g, ''));
}

describe('console in a real browser (headless Chromium)', function () {
  this.timeout(180_000);
  let svc: TestSvc;
  let browser: Browser;
  let page: Page;

  async function shot(name: string): Promise<void> {
    await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  }

  before(async function () {
    requireChromium(this);
    fs.mkdirSync(SHOTS, { recursive: true });
    svc = await startSvc();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-US' });
    page = await context.newPage();
  });

  after(async function () {
    await browser?.close();
    await svc?.close();
  });

  it('operator creates an account; its owner signs in, creates a key, is billed for a call, revokes the key', async function () {
    const base = `${svc.baseUrl}/console`;
    const email = 'owner@example.com';
    const password = 'correct horse battery';

    // The operator signs in with SVC_ADMIN_TOKEN, creates the account and funds it.
    await page.goto(`${base}/`);
    assert.match(page.url(), /\/console\/sign-in/);
    await shot('01-sign-in');
    await page.getByText('Operator sign-in').click();
    await page.getByLabel('Admin token').fill(svc.adminToken);
    await page.getByRole('button', { name: 'Sign in as operator' }).click();
    await page.waitForURL(/\/console\/accounts/);
    await page.getByLabel('Name', { exact: true }).fill('شرکت نمونه');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel(/Initial password/).fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(/done=account/);
    const row = page.locator('tr', { hasText: email });
    await row.getByPlaceholder('toman').fill('100,000');
    await row.getByPlaceholder('reference').fill('invoice 1405-001');
    await row.getByRole('button', { name: 'Top up' }).click();
    // The top-up is read back (figures, words, the balance after) before it is applied.
    await page.waitForURL(/accounts\/topup/);
    assert.equal(((await page.getByTestId('topup-words').textContent()) ?? '').trim(), 'one hundred thousand toman');
    await shot('02a-operator-topup-confirm');
    await page.getByRole('button', { name: 'Confirm top-up' }).click();
    await page.waitForURL(/done=topup/);
    assert.match((await page.getByTestId('account-balance').textContent()) ?? '', /100,000/);
    assert.match((await page.getByTestId('account-audit').textContent()) ?? '', /Top-up\s+100,000 toman, reference “invoice 1405-001”/);
    await shot('02b-operator-account');
    await page.goto(`${base}/accounts?q=${encodeURIComponent('OWNER@example')}`);
    assert.match((await page.locator('tr', { hasText: email }).textContent()) ?? '', /100,000/);
    await shot('02-operator-accounts');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/signed_out/);

    // The owner signs in and creates a key; it is shown once.
    await page.getByLabel('Email address').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(/\/console\/keys/);
    // Keyboard only: the first Tab reaches the skip link, and Enter in the label field submits.
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate<string>('document.activeElement.textContent'), 'Skip to content');
    await page.getByLabel(/Label/).focus();
    await page.keyboard.type('لپ‌تاپ من');
    await page.keyboard.press('Enter');
    const key = ((await page.getByTestId('new-key').textContent()) ?? '').trim();
    assert.match(key, /^svc_sk_[0-9A-Za-z]{32,}$/);
    assert.ok(await page.getByText('It will not be shown again').isVisible());
    assert.ok(await page.getByRole('button', { name: 'Copy key' }).isVisible());
    await shot('03-key-created');
    await page.goto(`${base}/keys`);
    assert.equal((await page.content()).includes(key), false, 'the full key is shown only once');
    assert.ok(await page.getByRole('cell', { name: 'لپ‌تاپ من', exact: true }).isVisible());
    await shot('04-keys');

    // A real OpenAI client call with the key, billed to the wallet.
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: key, maxRetries: 0 });
    const { data: completion, response } = await client.chat.completions
      .create({ model: 'svc-pro', messages: [{ role: 'user', content: 'سلام! How much is 2+2?' }] })
      .withResponse();
    assert.ok(completion.choices[0]?.message.content);
    const requestId = response.headers.get('x-request-id') ?? '';
    const charge = await svc.store.db
      .selectFrom('usage_records')
      .select(['cost', 'account_id'])
      .where('request_id', '=', requestId)
      .executeTakeFirstOrThrow();
    assert.ok(charge.cost > 0n, 'the call cost something');

    // The usage page shows the request, its cost, and the balance after it.
    await page.goto(`${base}/usage`);
    const usageRow = page.locator('tr', { hasText: requestId });
    assert.ok(await usageRow.isVisible(), 'the request is on the usage page');
    assert.match((await usageRow.textContent()) ?? '', new RegExp(`${charge.cost.toLocaleString('en-US')} toman`));
    assert.equal(digits(await page.getByTestId('balance').textContent()), 100_000n - charge.cost);
    assert.equal(digits(await page.getByTestId('spent').textContent()), charge.cost);
    assert.ok(await page.locator('figure.chart svg rect').first().isVisible(), 'the chart has a bar');
    await shot('05-usage');
    await page.getByLabel('Model or tool').selectOption('model:svc-pro');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/what=model%3Asvc-pro/);
    assert.ok(await page.locator('tr', { hasText: requestId }).isVisible(), 'the model filter keeps the request');
    await page.goto(`${base}/usage?what=tool:web_search`);
    assert.equal(await page.locator('tr', { hasText: requestId }).count(), 0, 'a tool filter hides the chat request');
    assert.ok(await page.getByTestId('usage-table').getByText('No requests match.').isVisible());

    await page.goto(`${base}/wallet`);
    assert.equal(digits(await page.getByTestId('wallet-balance').textContent()), 100_000n - charge.cost);
    assert.match((await page.locator('table').textContent()) ?? '', /invoice 1405-001/);
    await shot('06-wallet');
    await page.goto(`${base}/connect`);
    assert.match(await page.content(), new RegExp(`${svc.baseUrl}/v1/mcp`.replace(/[.]/g, '\\.')));
    assert.ok((await page.content()).includes(`GOOGLE_GEMINI_BASE_URL=${svc.baseUrl}/v1/gemini`), 'the Gemini CLI card');
    await shot('07-connect');
    await page.goto(`${base}/account`);
    await shot('08-account');

    // Revoke, with confirmation; the next call is refused.
    await page.goto(`${base}/keys`);
    await page.getByRole('link', { name: /Revoke/ }).click();
    await page.waitForURL(/keys\/revoke/);
    await shot('09-revoke-confirm');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(/done=revoked/);
    assert.ok(await page.getByText('Revoked', { exact: false }).first().isVisible());
    await shot('10-key-revoked');
    await assert.rejects(
      client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'again' }] }),
      (error: unknown) => error instanceof OpenAI.AuthenticationError && error.code === 'invalid_api_key',
    );
    const after = await svc.wallet(charge.account_id);
    assert.equal(after.balance, 100_000n - charge.cost, 'the refused call cost nothing');

    // Readable on a phone.
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [name, path] of [
      ['11-usage-phone', '/usage'],
      ['12-keys-phone', '/keys'],
      ['13-wallet-phone', '/wallet'],
      ['14-connect-phone', '/connect'],
      ['15-account-phone', '/account'],
    ] as const) {
      await page.goto(`${base}${path}`);
      // A string, so that the test compiles without the DOM library.
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
      assert.ok(overflow <= 0, `no sideways scrolling on a phone on ${path} (overflow ${overflow}px)`);
      await shot(name);
    }
  });

  it('a created key is made and shown once despite a double submit, a reload and the back button; edited caps and a roll take effect on the API', async function () {
    const base = `${svc.baseUrl}/console`;
    const user = await createConsoleUser(svc, {
      name: 'Lifecycle',
      email: 'lifecycle@example.com',
      balance: 100_000n,
      keyName: 'first',
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-US' });
    const tab = await context.newPage();
    try {
      await tab.goto(`${base}/sign-in`);
      await tab.getByLabel('Email address').fill(user.email);
      await tab.getByLabel('Password').fill(user.password);
      await tab.getByRole('button', { name: 'Sign in', exact: true }).click();
      await tab.waitForURL(/\/console\/keys/);
      const before = (await svc.core.keys.list(user.accountId)).length;

      // Two quick clicks post the form twice: one key, and its secret on the page the browser shows.
      await tab.getByLabel(/Label/).fill('ci runner');
      await tab.getByLabel(/Daily cap/).fill('۵۰٬۰۰۰');
      await tab.getByRole('button', { name: 'Create key' }).dblclick();
      await tab.waitForURL(/reveal=/);
      const secret = ((await tab.getByTestId('new-key').textContent()) ?? '').trim();
      assert.match(secret, /^svc_sk_/);
      await tab.screenshot({ path: path.join(SHOTS, '20-key-created-once.png'), fullPage: true });

      await tab.reload();
      assert.equal((await tab.content()).includes(secret), false, 'a reload does not show the secret again');
      assert.ok(await tab.getByText(/not shown again|nothing new was made/).isVisible());
      await tab.goBack();
      assert.equal((await tab.content()).includes(secret), false, 'nor does the back button');
      await tab.goForward();
      assert.equal((await tab.content()).includes(secret), false);
      const mine = (await svc.core.keys.list(user.accountId)).filter((k) => k.name === 'ci runner');
      assert.equal(mine.length, 1, 'exactly one new key');
      assert.equal((await svc.core.keys.list(user.accountId)).length, before + 1);
      assert.equal(mine[0]?.capDaily, 50_000n);

      // The cap is edited in the browser and refuses the next call on the API.
      const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: secret, maxRetries: 0 });
      const ask = () => client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] });
      await ask();
      await tab.goto(`${base}/keys`);
      await tab.getByRole('link', { name: 'ci runner', exact: true }).click();
      await tab.waitForURL(/keys\/view/);
      await tab.getByLabel(/Daily cap/).fill('1');
      await tab.getByRole('button', { name: 'Save caps' }).click();
      await tab.waitForURL(/done=caps/);
      assert.ok(await tab.getByText('Caps changed').isVisible(), 'the change is on the activity list');
      await tab.screenshot({ path: path.join(SHOTS, '21-key-page.png'), fullPage: true });
      await assert.rejects(ask(), (error: unknown) => error instanceof OpenAI.APIError && error.code === 'key_cap_exceeded');

      // Roll with a grace: both secrets work; roll again with none: the previous secret stops at once.
      await tab.getByLabel(/Daily cap/).fill('');
      await tab.getByRole('button', { name: 'Save caps' }).click();
      await tab.waitForURL(/done=caps/);
      await tab.getByLabel('Old secret keeps working for').selectOption('1h');
      await tab.getByRole('button', { name: 'Roll key' }).click();
      await tab.waitForURL(/reveal=/);
      const second = ((await tab.getByTestId('new-key').textContent()) ?? '').trim();
      assert.ok(second !== secret && /^svc_sk_/.test(second));
      await tab.reload();
      assert.equal((await tab.content()).includes(second), false, 'the rolled secret is shown once');
      const client2 = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: second, maxRetries: 0 });
      await client2.models.list();
      await client.models.list();
      await tab.getByLabel('Old secret keeps working for').selectOption('0');
      await tab.getByRole('button', { name: 'Roll key' }).click();
      await tab.waitForURL(/reveal=/);
      const third = ((await tab.getByTestId('new-key').textContent()) ?? '').trim();
      await assert.rejects(client2.models.list(), (error: unknown) => error instanceof OpenAI.AuthenticationError);
      await new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: third, maxRetries: 0 }).models.list();
      await tab.screenshot({ path: path.join(SHOTS, '22-key-rolled.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });
});
