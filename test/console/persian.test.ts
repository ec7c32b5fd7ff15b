import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { errorText, resolveLocale, t } from '../../adapters/console/i18n';
import { calendarDay, inWords, when } from '../../adapters/console/format';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleUser } from './helpers';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

const SHOTS = path.join(__dirname, '..', '..', '.tmp', 'console-screens');
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];
const PERSIAN_DIGITS = /[۰-۹]/;

describe('console in Persian: the language table, formats and locale choice', function () {
  it('chooses the cookie first, then Persian only when the browser lists it before English', function () {
    assert.equal(resolveLocale('fa', 'en-US,en;q=0.9'), 'fa');
    assert.equal(resolveLocale('en', 'fa-IR,fa;q=0.9'), 'en');
    assert.equal(resolveLocale(undefined, 'fa-IR,fa;q=0.9,en;q=0.8'), 'fa');
    assert.equal(resolveLocale(undefined, 'en-US,en;q=0.9,fa;q=0.8'), 'en');
    assert.equal(resolveLocale(undefined, 'en;q=0.5,fa;q=0.9'), 'fa');
    assert.equal(resolveLocale('xx', ''), 'en');
    assert.equal(resolveLocale(undefined, 'de-DE'), 'en');
  });

  it('writes numbers with Persian digits, dates in the Jalali calendar and Tehran time, amounts in Persian words', function () {
    // 20:31 UTC is already the next day in Tehran (UTC+3:30): 5 Azar 1405, one minute past midnight.
    const at = new Date('2026-11-25T20:31:00Z');
    assert.equal(when('fa', at), '۱۴۰۵/۰۹/۰۵ ۰۰:۰۱');
    assert.equal(when('en', at), '2026-11-26 00:01');
    assert.equal(calendarDay('fa', '2026-03-21'), '۱۴۰۵/۰۱/۰۱');
    assert.equal(t('fa', 'prices.tokens', { n: 128_000n }), '۱۲۸٬۰۰۰ توکن');
    assert.equal(t('en', 'prices.tokens', { n: 128_000n }), '128,000 tokens');
    assert.equal(inWords(1_250_000n, 'fa'), 'یک میلیون و دویست و پنجاه هزار');
    assert.equal(inWords(25_000n, 'fa'), 'بیست و پنج هزار');
  });

  it('words a refusal in Persian by its code and field, keeping the core words as detail', function () {
    const cap = errorText('fa', { code: 'invalid_argument', message: 'x', param: 'cap_daily' });
    assert.match(cap.text, /^سقف روزانه باید عددی صحیح/);
    const other = errorText('fa', { code: 'csrf_failed', message: 'This form has expired.' });
    assert.equal(other.detail, 'This form has expired.');
    assert.deepEqual(errorText('en', { code: 'csrf_failed', message: 'This form has expired.' }), {
      text: 'This form has expired.',
    });
  });
});

describe('console in Persian over HTTP and in a real browser (headless Chromium)', function () {
  this.timeout(180_000);
  let svc: TestSvc;
  let browser: Browser;
  let user: ConsoleUser;

  before(async function () {
    requireChromium(this);
    fs.mkdirSync(SHOTS, { recursive: true });
    svc = await startSvc();
    user = await createConsoleUser(svc, { name: 'شرکت نمونه', email: 'fa@example.com', balance: 80_000n, keyName: 'سرور' });
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: user.key, maxRetries: 0 });
    await client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
  });

  after(async function () {
    await browser?.close();
    await svc?.close();
  });

  it('the switch sets a cookie and goes back only to a console page; Accept-Language fa picks Persian', async function () {
    const c = consoleClient(svc.baseUrl);
    const to = await c.get('/lang?to=fa&back=%2Fconsole%2Fsign-in');
    assert.equal(to.status, 303);
    assert.equal(to.headers.get('location'), '/console/sign-in');
    assert.equal(c.cookies.get('svc_lang'), 'fa');
    const signIn = await c.get('/sign-in');
    assert.match(signIn.body, /<html lang="fa" dir="rtl">/);
    assert.match(signIn.body, /نشانی ایمیل/);
    for (const back of ['https://evil.example/', '//evil.example/console/', '/console//evil.example', '/elsewhere']) {
      const res = await c.get(`/lang?to=en&back=${encodeURIComponent(back)}`);
      assert.equal(res.headers.get('location'), '/console/', back);
    }
    assert.equal(c.cookies.get('svc_lang'), 'en');
    const bad = await c.get('/lang?to=xx&back=%2Fconsole%2Fsign-in');
    assert.equal(bad.status, 303);
    assert.equal(c.cookies.get('svc_lang'), 'en', 'an unknown language changes nothing');

    const browserFa = consoleClient(svc.baseUrl, { 'accept-language': 'fa-IR,fa;q=0.9,en;q=0.8' });
    assert.match((await browserFa.get('/sign-in')).body, /<html lang="fa" dir="rtl">/);
    const browserEn = consoleClient(svc.baseUrl, { 'accept-language': 'en-US,en;q=0.9,fa;q=0.5' });
    assert.match((await browserEn.get('/sign-in')).body, /<html lang="en" dir="ltr">/);
  });

  it('switches to فارسی: RTL, Jalali dates, Persian digits; amounts typed in Persian digits work end to end', async function () {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US' });
    const page: Page = await context.newPage();
    try {
      await page.goto(`${svc.baseUrl}/console/sign-in`);
      await page.getByLabel('Email address').fill(user.email);
      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await page.waitForURL(/\/console\/keys/);
      assert.equal(await page.evaluate('document.documentElement.dir'), 'ltr');
      assert.match((await page.locator('main').innerText()) ?? '', /Tehran time/);

      await page.goto(`${svc.baseUrl}/console/wallet`);
      await page.getByRole('link', { name: 'فارسی' }).click();
      await page.waitForURL(/\/console\/wallet$/);
      assert.equal(await page.evaluate('document.documentElement.lang + " " + document.documentElement.dir'), 'fa rtl');
      await page.getByRole('heading', { name: 'کیف پول', level: 1 }).waitFor();
      const balance = (await page.getByTestId('wallet-balance').innerText()) ?? '';
      assert.match(balance, PERSIAN_DIGITS);
      assert.doesNotMatch(balance, /[0-9]/, 'no ASCII digits in a Persian amount');
      const ledger = await page.locator('table').first().innerText();
      assert.match(ledger, /۱۴۰[۵-۹]\/[۰-۱][۰-۹]\/[۰-۳][۰-۹]/, 'a Jalali date (1405 or later) in the ledger');
      assert.match(ledger, /هزینه/);
      await page.screenshot({ path: path.join(SHOTS, 'switch-wallet-1280-fa.png'), fullPage: true });

      // A threshold typed with Persian digits and the Persian thousands separator, read by the
      // existing parser: above the balance, so the low-balance banner shows, in Persian.
      await page.getByLabel(/هشدار زیر/).fill('۹۰٬۰۰۰');
      await page.getByRole('button', { name: 'ذخیره' }).click();
      await page.waitForURL(/done=low_balance/);
      const banner = await page.getByTestId('low-balance').innerText();
      assert.match(banner, /موجودی شما کم است/);
      assert.match(banner, /۹۰٬۰۰۰ تومان/);
      assert.equal(await page.getByLabel(/هشدار زیر/).inputValue(), '90,000', 'the form value stays machine-readable');

      // A refused amount is explained in Persian, and nothing is saved.
      await page.getByLabel(/هشدار زیر/).fill('۱۲.۵');
      await page.getByRole('button', { name: 'ذخیره' }).click();
      assert.match(await page.getByRole('alert').innerText(), /آستانهٔ هشدار باید عددی صحیح به تومان باشد/);

      // Back to English: left to right, Gregorian dates, still Tehran time.
      await page.getByRole('link', { name: 'English' }).click();
      await page.waitForURL(/\/console\/wallet$/);
      assert.equal(await page.evaluate('document.documentElement.lang + " " + document.documentElement.dir'), 'en ltr');
      assert.match(await page.locator('table').first().innerText(), /20\d\d-\d\d-\d\d \d\d:\d\d/);
    } finally {
      await context.close();
    }

    // The operator, whose browser asks for Persian, tops up with an amount in Persian digits.
    const operator = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'fa-IR' });
    const op = await operator.newPage();
    try {
      await op.goto(`${svc.baseUrl}/console/sign-in`);
      assert.equal(await op.evaluate('document.documentElement.dir'), 'rtl');
      await op.getByText('ورود اپراتور').click();
      await op.getByLabel('توکن مدیریت').fill(svc.adminToken);
      await op.getByRole('button', { name: 'ورود به‌عنوان اپراتور' }).click();
      await op.waitForURL(/\/console\/accounts/);
      await op.goto(`${svc.baseUrl}/console/accounts/view?id=${encodeURIComponent(user.accountId)}`);
      const before = (await svc.wallet(user.accountId)).balance;
      const form = op.locator('#topup-heading + form');
      await form.locator('input[name="amount"]').fill('۲۵٬۰۰۰');
      await form.locator('input[name="reference"]').fill('واریز آزمون');
      await form.getByRole('button', { name: 'شارژ' }).click();
      assert.match(await op.getByTestId('topup-amount').innerText(), /۲۵٬۰۰۰ تومان/);
      assert.match(await op.getByTestId('topup-words').innerText(), /بیست و پنج هزار تومان/);
      await op.screenshot({ path: path.join(SHOTS, 'switch-topup-confirm-1280-fa.png'), fullPage: true });
      assert.equal((await svc.wallet(user.accountId)).balance, before, 'reading back moves no money');
      await op.getByRole('button', { name: 'تأیید شارژ' }).click();
      await op.waitForURL(/done=topup/);
      assert.match(await op.getByRole('status').first().innerText(), /کیف پول شارژ شد/);
      assert.equal((await svc.wallet(user.accountId)).balance, before + 25_000n);
    } finally {
      await operator.close();
    }
  });
});
