import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startSvc, type TestSvc } from '../helpers/harness';
import { startFakeGateways, type FakeGateways } from '../fakes/payment-gateways';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

/*
 * The happy path of each gateway through the console's real pages in headless Chromium (issue
 * 34): "Create an account", sign in, the wallet's top-up form, the gateway's start page (the
 * fake's), the receipt, the wallet with the credit and the payment listed.
 */

const SHOTS = path.join(__dirname, '..', 'console', 'screenshots');
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
const PUBLIC = 'http://svc.test';

function digits(text: string | null): bigint {
  return BigInt((text ?? '').replace(/[^0-9]/g, '') || '0');
}

describe('payments in a real browser (headless Chromium)', function () {
  this.timeout(180_000);
  let svc: TestSvc;
  let fake: FakeGateways;
  let browser: Browser;
  let page: Page;

  before(async function () {
    requireChromium(this);
    fs.mkdirSync(SHOTS, { recursive: true });
    fake = await startFakeGateways();
    svc = await startSvc({
      config: `
console:
  signup: open
payments:
  public_url: ${PUBLIC}
  gateways:
    zarinpal:
      merchant_id: 1344b5d4-0048-11e8-94db-005056a205be
      base_url: ${fake.baseUrl('zarinpal')}
    zibal:
      merchant: zibal
      base_url: ${fake.baseUrl('zibal')}
`,
    });
    fake.publicOrigin = { from: PUBLIC, to: svc.baseUrl };
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-US' });
    page = await context.newPage();
  });

  after(async function () {
    await browser?.close();
    await svc?.close();
    await fake?.close();
  });

  it('a stranger signs up and tops up 50,000 toman through ZarinPal, then through Zibal', async function () {
    const base = `${svc.baseUrl}/console`;
    await page.goto(`${base}/sign-in`);
    await page.getByTestId('sign-up-link').click();
    await page.waitForURL(/\/console\/sign-up/);
    await page.getByLabel('Email address').fill('stranger@example.com');
    await page.getByLabel(/Password/).fill('a long password 1');
    await page.getByRole('button', { name: 'Create the account' }).click();
    await page.getByText(/its account is ready/).waitFor();
    await page.getByLabel('Password').fill('a long password 1');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(/\/console\/keys/);

    let expected = 0n;
    for (const gateway of ['zarinpal', 'zibal'] as const) {
      await page.goto(`${base}/wallet`);
      await page.getByText('From 10,000 to 50,000,000 toman').first().waitFor();
      await page.getByLabel(/^Amount/).fill('۵۰٬۰۰۰');
      await page.getByLabel('Gateway').selectOption(gateway);
      await page.getByTestId('topup-submit').click();
      // The fake gateway's start page, on its own origin.
      await page.waitForURL((url) => url.href.startsWith(fake.baseUrl(gateway)));
      await page.screenshot({ path: path.join(SHOTS, `payments-${gateway}-1-gateway.png`), fullPage: true });
      await page.locator('#pay').click();
      await page.waitForURL(new RegExp(`/console/payments/${gateway}/return\\?`));
      const receipt = page.getByTestId('receipt');
      await receipt.waitFor();
      await page.screenshot({ path: path.join(SHOTS, `payments-${gateway}-2-receipt.png`), fullPage: true });
      assert.match((await page.locator('h1').textContent()) ?? '', /Payment received/);
      assert.equal(digits(await page.getByTestId('receipt-amount').textContent()), 50_000n);
      assert.match((await page.getByTestId('receipt-number').textContent()) ?? '', /^\d+$/);
      assert.match((await page.getByTestId('receipt-card').textContent()) ?? '', /\*{4}/);
      assert.match((await page.getByTestId('receipt-jalali').textContent()) ?? '', /^۱۴۰۵\//);
      expected += 50_000n;

      await page.locator('a.btn', { hasText: /wallet/ }).click();
      await page.waitForURL(/\/console\/wallet/);
      assert.equal(digits(await page.getByTestId('wallet-balance').textContent()), expected);
      const row = page.getByTestId('payments').locator('tbody tr').first();
      assert.match(
        (await row.textContent()) ?? '',
        new RegExp(`${gateway === 'zarinpal' ? 'ZarinPal' : 'Zibal'}[\\s\\S]*50,000[\\s\\S]*Paid`),
      );
    }
    await page.screenshot({ path: path.join(SHOTS, 'payments-3-wallet.png'), fullPage: true });
  });
});
