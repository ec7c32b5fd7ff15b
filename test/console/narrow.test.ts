import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { chromium, type Browser } from 'playwright-core';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser } from './helpers';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

// Every table on the page (the collapsed ones opened first), measured against the box that holds
// it: a table wider than its box is cut off on a phone until the user swipes sideways (issue 33,
// point 11: "By key" showed "CO" for Cost at 375 px). A string, so the test needs no DOM library.
const MEASURE = `(() => {
  for (const d of document.querySelectorAll('details')) d.open = true;
  const out = [];
  for (const table of document.querySelectorAll('table')) {
    const box = table.closest('.table-wrap') ?? table.parentElement;
    const over = Math.ceil(table.getBoundingClientRect().width - box.clientWidth);
    if (over > 0) out.push((table.dataset.testid ?? table.closest('section')?.querySelector('h2')?.textContent ?? 'a table').trim() + ': ' + over + 'px too wide');
  }
  const page = document.documentElement.scrollWidth - window.innerWidth;
  if (page > 0) out.push('the page: ' + page + 'px too wide');
  return out;
})()`;

describe('console tables on a 375 px phone, in English and Persian', function () {
  this.timeout(180_000);
  let svc: TestSvc;
  let browser: Browser;
  let cookies: Map<string, string>;

  before(async function () {
    requireChromium(this);
    svc = await startSvc();
    const user = await createConsoleUser(svc, {
      name: 'Narrow',
      email: 'narrow@example.com',
      balance: 5_000_000n,
      keyName: 'a rather long key label for a phone',
    });
    // Usage by key and a chart with rows: a few billed calls of large-ish cost.
    const client = new OpenAI({ apiKey: user.key, baseURL: `${svc.baseUrl}/v1/openai` });
    for (let i = 0; i < 3; i++)
      await client.chat.completions.create({
        model: 'svc-pro',
        messages: [{ role: 'user', content: 'x'.repeat(4000) }],
      });
    const c = consoleClient(svc.baseUrl);
    assert.equal((await c.signIn(user.email, user.password)).status, 303);
    cookies = c.cookies;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
  });

  for (const locale of ['en-US', 'fa-IR']) {
    it(`the operator's tables fit too (${locale})`, async function () {
      const op = consoleClient(svc.baseUrl);
      assert.equal((await op.signInOperator(svc.adminToken)).status, 303);
      const accounts = await op.get('/accounts');
      const id = /accounts\/view\?id=(acc_[A-Za-z0-9]+)/.exec(accounts.body)?.[1] ?? '';
      const context = await browser.newContext({ viewport: { width: 375, height: 812 }, locale });
      const host = new URL(svc.baseUrl);
      await context.addCookies(
        [...op.cookies].map(([name, value]) => ({ name, value, domain: host.hostname, path: '/' })),
      );
      const page = await context.newPage();
      const problems: string[] = [];
      for (const path of ['/accounts', `/accounts/view?id=${id}`]) {
        await page.goto(`${svc.baseUrl}/console${path}`);
        for (const problem of await page.evaluate<string[]>(MEASURE)) problems.push(`${path}: ${problem}`);
      }
      await context.close();
      assert.deepEqual(problems, []);
    });
  }

  after(async function () {
    await browser?.close();
    await svc?.close();
  });

  for (const locale of ['en-US', 'fa-IR']) {
    it(`every table fits its box at 375 px (${locale}), collapsed ones included`, async function () {
      const context = await browser.newContext({ viewport: { width: 375, height: 812 }, locale });
      const host = new URL(svc.baseUrl);
      await context.addCookies(
        [...cookies].map(([name, value]) => ({ name, value, domain: host.hostname, path: '/' })),
      );
      const page = await context.newPage();
      const problems: string[] = [];
      for (const path of ['/usage', '/keys', '/wallet', '/account', '/prices', '/connect']) {
        await page.goto(`${svc.baseUrl}/console${path}`);
        assert.match(page.url(), new RegExp(`/console${path}`), `signed in on ${path}`);
        for (const problem of await page.evaluate<string[]>(MEASURE)) problems.push(`${path}: ${problem}`);
      }
      await context.close();
      assert.deepEqual(problems, []);
    });
  }
});
