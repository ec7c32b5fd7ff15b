import assert from 'node:assert/strict';
import { loadConfig } from '../../core/config/load';
import { mediaPriceLines } from '../../core/media/pricing';
import { startSvc, type TestSvc } from '../helpers/harness';
import { consoleClient, createConsoleUser, type ConsoleUser } from './helpers';

describe('console: low-balance warning and the prices page', function () {
  this.timeout(120_000);
  let svc: TestSvc;
  let user: ConsoleUser;

  before(async function () {
    svc = await startSvc();
    user = await createConsoleUser(svc, { name: 'Low', email: 'low@example.com', balance: 30_000n, keyName: 'k' });
  });

  after(async function () {
    await svc?.close();
  });

  it('warns on every page while the available balance is below the threshold the user set (typed in Persian digits)', async function () {
    const c = consoleClient(svc.baseUrl);
    await c.signIn(user.email, user.password);
    assert.equal((await c.get('/keys')).body.includes('data-testid="low-balance"'), false, 'no threshold, no warning');
    const csrf = await c.csrf('/wallet');
    const saved = await c.post('/wallet/low-balance', { csrf_token: csrf, threshold: '۵۰٬۰۰۰' });
    assert.equal(saved.status, 303);
    for (const path of ['/keys', '/usage', '/wallet', '/prices', '/connect', '/account']) {
      const page = await c.get(path);
      assert.match(page.body, /data-testid="low-balance"/, path);
      assert.match(page.body, /30,000 toman available, below the\s+50,000 toman/);
    }
    assert.match(
      (await c.get('/wallet')).body,
      /id="threshold" name="threshold" inputmode="numeric" size="14" value="50,000"/,
    );

    // Refused thresholds keep what was typed and change nothing; so does a form without CSRF.
    const bad = await c.post('/wallet/low-balance', { csrf_token: csrf, threshold: '-1' });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /warning threshold must be a whole number/);
    assert.match(bad.body, /value="-1"/);
    assert.equal((await c.post('/wallet/low-balance', { threshold: '' })).status, 403);
    assert.match((await c.get('/keys')).body, /data-testid="low-balance"/);

    // Topped up above it, or the threshold removed: no warning.
    await svc.core.deps.wallet.topUp({ accountId: user.accountId, amount: 25_000n, reference: 'more' });
    assert.equal((await c.get('/keys')).body.includes('data-testid="low-balance"'), false);
    assert.equal((await c.post('/wallet/low-balance', { csrf_token: csrf, threshold: '100,000' })).status, 303);
    assert.match((await c.get('/keys')).body, /data-testid="low-balance"/);
    assert.equal((await c.post('/wallet/low-balance', { csrf_token: csrf, threshold: '' })).status, 303);
    assert.equal((await c.get('/keys')).body.includes('data-testid="low-balance"'), false);
  });

  it('lists every configured model and tool with its price from the running configuration', async function () {
    const config = loadConfig(undefined, {});
    const c = consoleClient(svc.baseUrl);
    await c.signIn(user.email, user.password);
    const page = await c.get('/prices');
    assert.equal(page.status, 200);
    assert.ok(config.models.size > 0);
    for (const m of config.models.values()) {
      // A media model's own price form (per image, minute, …) is checked in test/pricing/console.test.ts.
      if (m.mediaPrice !== undefined && m.mediaPrice.form !== 'tokens') continue;
      const row = page.body.split('<tr>').find((r) => r.includes(`class="mono">${m.id}</td>`)) ?? '';
      const units = m.mediaPrice === undefined ? [] : mediaPriceLines(m.mediaPrice);
      if (units.length > 0) {
        // A media model priced by its unit (SPEC §14): each price with what it buys, in words.
        for (const u of units)
          assert.ok(
            row.includes(`${u.credits.toLocaleString('en-US')} toman <span class="hint">${u.unit}</span>`),
            `${m.id} ${u.unit}`,
          );
        continue;
      }
      assert.ok(row.includes(`${m.price.inputPer1m.toLocaleString('en-US')} toman`), `${m.id} input price`);
      assert.ok(row.includes(`${m.price.outputPer1m.toLocaleString('en-US')} toman`), `${m.id} output price`);
    }
    for (const t of config.tools.values()) {
      const row = page.body.split('<tr>').find((r) => r.includes(`>${t.name}</span>`)) ?? '';
      const price = t.price.kind === 'flat' ? t.price.credits : t.price.tariff.inputPer1m;
      assert.ok(row.includes(`${price.toLocaleString('en-US')} toman`), `${t.name} price`);
    }
  });
});
