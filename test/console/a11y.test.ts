import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { startSvc, type TestSvc } from '../helpers/harness';
import { createConsoleUser, type ConsoleUser } from './helpers';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

const SHOTS = path.join(__dirname, '..', '..', '.tmp', 'console-screens');
const AXE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

interface AxeResult {
  readonly violations: readonly { id: string; impact: string; help: string; nodes: readonly { target: unknown }[] }[];
}

describe('console accessibility: axe-core on every page, English and Persian, desktop and phone, light and dark (headless Chromium)', function () {
  this.timeout(300_000);
  let svc: TestSvc;
  let browser: Browser;
  let user: ConsoleUser;

  before(async function () {
    requireChromium(this);
    fs.mkdirSync(SHOTS, { recursive: true });
    svc = await startSvc();
    user = await createConsoleUser(svc, { name: 'شرکت آزمون', email: 'a11y@example.com', balance: 80_000n, keyName: 'لپ‌تاپ' });
    const client = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: user.key, maxRetries: 0 });
    await client.chat.completions.create({ model: 'svc-pro', messages: [{ role: 'user', content: 'hi' }] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
  });

  after(async function () {
    await browser?.close();
    await svc?.close();
  });

  async function signIn(context: BrowserContext, operator: boolean): Promise<void> {
    const page = await context.newPage();
    await page.goto(`${svc.baseUrl}/console/sign-in`);
    if (operator) {
      await page.getByText('Operator sign-in').click();
      await page.getByLabel('Admin token').fill(svc.adminToken);
      await page.getByRole('button', { name: 'Sign in as operator' }).click();
    } else {
      await page.getByLabel('Email address').fill(user.email);
      await page.getByLabel('Password').fill(user.password);
      await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    }
    await page.waitForURL(/\/console\/(keys|accounts)/);
    await page.close();
  }

  for (const locale of ['en', 'fa'] as const)
  for (const scheme of ['light', 'dark'] as const) {
    for (const width of [1280, 375]) {
      it(`0 violations at ${width} px, ${scheme}, ${locale === 'fa' ? 'Persian (RTL)' : 'English'}`, async function () {
        const failures: string[] = [];
        for (const operator of [false, true]) {
          const context = await browser.newContext({
            viewport: { width, height: 900 },
            colorScheme: scheme,
            locale: 'en-US',
            // axe is injected as a script: the console's CSP (script-src 'self') would refuse it.
            bypassCSP: true,
          });
          try {
            await signIn(context, operator);
            // The language cookie, as the switch sets it: every page after sign-in is in Persian.
            if (locale === 'fa') await context.addCookies([{ name: 'svc_lang', value: 'fa', url: `${svc.baseUrl}/console/` }]);
            const page = await context.newPage();
            const paths = operator
              ? ['/accounts', '/pricing', '/prices', '/connect']
              : ['/keys', `/keys/view?id=${user.keyId}`, '/keys/revoke?id=' + user.keyId, '/usage', '/wallet', '/prices', '/connect', '/account', '/sign-in'];
            for (const p of paths) {
              await page.goto(`${svc.baseUrl}/console${p}`);
              if (locale === 'fa') {
                const dir = await page.evaluate<string>('document.documentElement.lang + " " + document.documentElement.dir');
                if (dir !== 'fa rtl') failures.push(`${p}: <html> is "${dir}", not lang=fa dir=rtl`);
              }
              await page.evaluate(AXE);
              const result = await page.evaluate<AxeResult>(
                'axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"] } })',
              );
              for (const v of result.violations)
                failures.push(`${p}: ${v.id} (${v.impact}) ${v.help} — ${JSON.stringify(v.nodes.slice(0, 3).map((n) => n.target))}`);
              const name = `${operator ? 'op' : 'user'}${p.replace(/[/?=]/g, '-').replace(/key_[A-Za-z0-9]+/, 'key')}-${width}-${scheme}${locale === 'fa' ? '-fa' : ''}`;
              await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
              if (width === 375) {
                const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
                if (overflow > 0) failures.push(`${p}: ${overflow}px sideways scroll at 375 px`);
              }
            }
            await page.goto(`${svc.baseUrl}/console/sign-in`);
          } finally {
            await context.close();
          }
        }
        assert.deepEqual(failures, []);
      });
    }
  }
});
