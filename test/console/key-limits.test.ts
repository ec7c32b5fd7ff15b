import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startSvc, type TestSvc } from '../helpers/harness';
import { connectClient } from '../mcp/helpers';
import { createConsoleUser, type ConsoleUser } from './helpers';
import { CHROMIUM, requireChromium } from '../helpers/chromium';

const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

// Issue 22: the key's total cap and allowed models and tools, set and edited in a real browser,
// take effect on the API (SQLite, or MySQL with SVC_TEST_DATABASE=mysql).
describe('console in a real browser: total cap, allowed models and tools', function () {
  this.timeout(180_000);
  let svc: TestSvc;
  let browser: Browser;
  let page: Page;
  let user: ConsoleUser;

  before(async function () {
    requireChromium(this);
    svc = await startSvc();
    user = await createConsoleUser(svc, { name: 'Limits', email: 'limits@example.com', balance: 100_000n, keyName: 'k0' });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: 'en-US' })).newPage();
  });

  after(async function () {
    await browser?.close();
    await svc?.close();
  });

  it('creates a key limited to a model and a tool with a total cap, edits them, and the API follows each change', async function () {
    const base = `${svc.baseUrl}/console`;
    await page.goto(`${base}/sign-in`);
    await page.getByLabel('Email address').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(/\/console\/keys/);

    // An unknown model is refused with a clear message, the form keeps what was typed, no key is made.
    const before = (await svc.core.keys.list(user.accountId)).length;
    await page.getByLabel(/Label/).fill('limited');
    await page.getByLabel(/Total cap/).fill('۱٬۰۰۰');
    await page.getByLabel(/^Models/).fill('svc-pro, gpt-nope');
    await page.getByLabel(/^Tools/).fill('maps_search_places');
    await page.getByRole('button', { name: 'Create key' }).click();
    assert.match(await page.content(), /unknown model (&quot;|")gpt-nope/);
    assert.equal(await page.getByLabel(/^Models/).inputValue(), 'svc-pro, gpt-nope');
    assert.equal((await svc.core.keys.list(user.accountId)).length, before);

    await page.getByLabel(/^Models/).fill('svc-pro');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = ((await page.getByTestId('new-key').textContent()) ?? '').trim();
    assert.match(secret, /^svc_sk_/);
    const key = (await svc.core.keys.list(user.accountId)).find((k) => k.name === 'limited');
    assert.ok(key !== undefined);
    assert.deepEqual([key.capTotal, key.allowedModels, key.allowedTools], [1000n, ['svc-pro'], ['maps_search_places']]);

    const openai = new OpenAI({ baseURL: `${svc.baseUrl}/v1/openai`, apiKey: secret, maxRetries: 0 });
    const mcp = await connectClient(svc.baseUrl, secret);
    try {
      assert.deepEqual(
        (await openai.models.list()).data.map((m) => m.id),
        ['svc-pro'],
      );
      await assert.rejects(
        openai.embeddings.create({ model: 'svc-embed', input: 'x' }),
        (e: unknown) => e instanceof OpenAI.APIError && e.status === 403 && e.code === 'permission_denied',
      );
      assert.deepEqual(
        (await mcp.listTools()).tools.map((t) => t.name),
        ['maps_search_places'],
      );
      // 460 credits a search: two fit in the total cap of 1,000, the third is refused uncharged.
      for (let i = 0; i < 2; i++) {
        const ok = await mcp.callTool({ name: 'maps_search_places', arguments: { query: 'cafe' } });
        assert.notEqual(ok.isError, true);
      }
      const wallet = await svc.wallet(user.accountId);
      const refused = await mcp.callTool({ name: 'maps_search_places', arguments: { query: 'cafe' } });
      assert.equal(refused.isError, true);
      assert.match(JSON.stringify(refused.content), /total spend cap of 1000 credits is reached/);
      assert.deepEqual(await svc.wallet(user.accountId), wallet);

      // The key page edits: models widened to all, tools to web_search only, the total cap raised.
      await page.goto(`${base}/keys/view?id=${key.id}`);
      await page.locator('#edit_models').fill('');
      await page.locator('#edit_tools').fill('web_search');
      await page.getByRole('button', { name: 'Save', exact: true }).click();
      await page.waitForURL(/done=edited/);
      assert.equal(((await page.getByTestId('key-models').textContent()) ?? '').trim(), 'All');
      assert.equal(((await page.getByTestId('key-tools').textContent()) ?? '').trim(), 'web_search');
      await page.locator('#edit_cap_total').fill('-5');
      await page.getByRole('button', { name: 'Save caps' }).click();
      assert.match(await page.content(), /total cap must be a whole number/i);
      assert.equal((await svc.core.keys.get(key.id)).capTotal, 1000n);
      await page.locator('#edit_cap_total').fill('2,000');
      await page.getByRole('button', { name: 'Save caps' }).click();
      await page.waitForURL(/done=caps/);
      const activity = (await page.getByTestId('key-activity').textContent()) ?? '';
      assert.match(activity, /models svc-pro → all/);
      assert.match(activity, /tools maps_search_places → web_search/);
      assert.match(activity, /total cap 1,000 toman → 2,000 toman/);

      // The API follows at once: the embedding model is usable, maps is not, the cap has room.
      const embedded = await openai.embeddings.create({ model: 'svc-embed', input: 'x' });
      assert.equal(embedded.data.length, 1);
      const fresh = await connectClient(svc.baseUrl, secret);
      try {
        assert.deepEqual(
          (await fresh.listTools()).tools.map((t) => t.name),
          ['web_search'],
        );
        await assert.rejects(
          fresh.callTool({ name: 'maps_search_places', arguments: { query: 'cafe' } }),
          /may not use the tool 'maps_search_places'/,
        );
      } finally {
        await fresh.close();
      }
    } finally {
      await mcp.close();
    }
  });
});
