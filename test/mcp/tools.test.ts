import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startFakeToolProviders, type FakeProvider, type FakeToolProviders, type Scenario } from '../fakes/providers';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertMcp, assertMcpResponse } from '../helpers/mcp-schema';
import { configA, configB, connectClient, post, toolCall } from './helpers';

type Structured = {
  query: string;
  provider: string;
  sandbox: boolean;
  notice?: string;
  results: Array<Record<string, unknown>>;
};

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  assertMcp('CallToolResult', result);
  return result;
}

function structured(result: CallToolResult): Structured {
  assert.equal(result.isError, false, JSON.stringify(result.content));
  const content = result.structuredContent as Structured;
  const first = result.content[0];
  assert.equal(first?.type, 'text');
  // The same data, as JSON text, for clients that read only `content`.
  assert.deepEqual(JSON.parse(first?.type === 'text' ? first.text : 'null'), content);
  return content;
}

const meta = (result: CallToolResult): Record<string, unknown> => (result._meta ?? {}) as Record<string, unknown>;

describe('MCP tools through svc, against provider fakes', function () {
  let fakes: FakeToolProviders;
  let svcA: TestSvc;
  let svcB: TestSvc;
  const clients: Client[] = [];

  async function client(svc: TestSvc, key: string): Promise<Client> {
    const c = await connectClient(svc.baseUrl, key);
    clients.push(c);
    // Listing first lets the SDK client check every structuredContent against the output schema.
    await c.listTools();
    return c;
  }

  before(async () => {
    fakes = await startFakeToolProviders();
    svcA = await startSvc({ config: configA(fakes) });
    svcB = await startSvc({ config: configB(fakes) });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await svcA?.close();
    await svcB?.close();
    await fakes?.close();
  });
  beforeEach(() => {
    for (const p of ['perplexity', 'searxng', 'neshan', 'nominatim', 'torob', 'digikala'] as FakeProvider[])
      fakes.set(p, 'ok');
  });

  it('initializes with the SDK client and lists exactly the three tools with schemas and annotations', async () => {
    const { key } = await svcA.createFundedKey(0);
    const c = await connectClient(svcA.baseUrl, key);
    clients.push(c);
    assert.equal(c.getServerVersion()?.name, 'svc');
    assert.deepEqual(c.getServerCapabilities()?.tools, { listChanged: false });
    const { tools } = await c.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['maps_search_places', 'shopping_search', 'web_search']);
    for (const tool of tools) {
      assert.ok(tool.title && tool.description, `${tool.name} has a title and a description`);
      assert.equal(tool.inputSchema.type, 'object');
      assert.equal((tool.inputSchema as { additionalProperties?: unknown }).additionalProperties, false);
      assert.equal(tool.outputSchema?.type, 'object');
      assert.equal(tool.annotations?.readOnlyHint, true);
      assert.equal(tool.annotations?.openWorldHint, true);
    }
    const raw = await post(
      svcA.baseUrl,
      { jsonrpc: '2.0', id: 7, method: 'tools/list' },
      { authorization: `Bearer ${key}` },
    );
    assertMcpResponse(raw.message, 'ListToolsResult');
  });

  it('web_search through perplexity: results from search_results, charged by tokens at the tariff', async () => {
    const { key, accountId } = await svcA.createFundedKey(10_000);
    const c = await client(svcA, key);
    const result = await call(c, 'web_search', { query: 'FastAPI latest release', max_results: 5 });
    const content = structured(result);
    assert.equal(content.provider, 'perplexity');
    assert.equal(content.sandbox, false);
    assert.deepEqual(content.results[0], {
      title: 'Release Notes - FastAPI',
      url: 'https://fastapi.tiangolo.com/release-notes/',
      summary: 'Latest Changes. Features: Add support for ...',
      date: '2026-10-20',
    });
    // usage 12 input + 215 output tokens at 100,000 credits per 1M each: ceil(22.7) = 23.
    assert.equal(meta(result)['svc/cost'], 23);
    assert.equal(meta(result)['svc/balance_after'], 10_000 - 23);
    assert.equal((await svcA.wallet(accountId)).balance, 10_000n - 23n);
    assert.equal((await svcA.wallet(accountId)).held, 0n);
  });

  it('maps_search_places through neshan costs 460 and reports distances from the point', async () => {
    const { key, accountId } = await svcA.createFundedKey(1_000);
    const c = await client(svcA, key);
    const result = await call(c, 'maps_search_places', {
      query: 'ولیعصر',
      latitude: 35.7117,
      longitude: 51.406,
      limit: 2,
    });
    const content = structured(result);
    assert.equal(content.provider, 'neshan');
    assert.equal(content.results.length, 2);
    assert.equal(content.results[0]?.['name'], 'میدان ولیعصر');
    assert.ok(Number.isInteger(content.results[0]?.['distance_m']));
    assert.equal(meta(result)['svc/cost'], 460);
    assert.equal((await svcA.wallet(accountId)).balance, 540n);
    const sent = fakes.requestsTo('neshan').at(-1);
    assert.equal(sent?.query.get('term'), 'ولیعصر');
  });

  it('shopping_search through torob costs 230, prices in toman', async () => {
    const { key, accountId } = await svcA.createFundedKey(1_000);
    const c = await client(svcA, key);
    const result = await call(c, 'shopping_search', { query: 'گوشی سامسونگ', sort: 'price_asc' });
    const content = structured(result);
    assert.deepEqual(
      content.results.map((r) => r['price_toman']),
      [17_399_000, 25_500_000],
    );
    assert.equal(meta(result)['svc/cost'], 230);
    assert.equal((await svcA.wallet(accountId)).balance, 770n);
  });

  it('Arabic yeh and kaf reach the Iranian shop and map as the Persian letters', async () => {
    const { key } = await svcA.createFundedKey(10_000);
    const c = await client(svcA, key);
    const shops = fakes.requestsTo('torob').length;
    await call(c, 'shopping_search', { query: 'كيف چرمي' });
    assert.equal(fakes.requestsTo('torob')[shops]?.query.get('q'), 'کیف چرمی');
    const maps = fakes.requestsTo('neshan').length;
    const result = await call(c, 'maps_search_places', { query: 'بانك ملي' });
    assert.equal(fakes.requestsTo('neshan')[maps]?.query.get('term'), 'بانک ملی');
    assert.equal(structured(result).query, 'بانک ملی');
  });

  it('a NUL byte in a query is refused before any provider is called, and costs nothing', async () => {
    const { key, accountId } = await svcA.createFundedKey(10_000);
    const c = await client(svcA, key);
    const sent = fakes.requests.length;
    for (const [tool, args] of [
      ['web_search', { query: 'svc\u0000 release' }],
      ['maps_search_places', { query: 'cafe\u0000' }],
      ['shopping_search', { query: '\u0000گوشی' }],
    ] as const) {
      const result = await c.callTool({ name: tool, arguments: args });
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.match(JSON.stringify(result.content), /control characters/);
    }
    assert.equal(fakes.requests.length, sent, 'no provider was contacted');
    assert.equal((await svcA.wallet(accountId)).balance, 10_000n);
  });

  it('web_search through searxng, maps through nominatim, shopping through digikala', async () => {
    const { key, accountId } = await svcB.createFundedKey(10_000);
    const c = await client(svcB, key);
    const web = structured(await call(c, 'web_search', { query: 'fastapi release notes' }));
    assert.equal(web.provider, 'searxng');
    assert.equal(web.results.length, 2);
    const maps = structured(await call(c, 'maps_search_places', { query: 'داروخانه' }));
    assert.equal(maps.provider, 'nominatim');
    assert.equal(maps.results[0]?.['name'], 'داروخانه ولیعصر');
    const shop = await call(c, 'shopping_search', { query: 'گوشی سامسونگ', limit: 3 });
    const products = structured(shop);
    assert.equal(products.provider, 'digikala');
    assert.equal(products.results[0]?.['price_toman'], 42_503_600);
    assert.equal((await svcB.wallet(accountId)).balance, 10_000n - 150n - 460n - 230n);
  });

  it('digikala behind its 307 cookie challenge still answers', async () => {
    fakes.set('digikala', 'cookie-challenge');
    const { key } = await svcB.createFundedKey(1_000);
    const c = await client(svcB, key);
    assert.ok(structured(await call(c, 'shopping_search', { query: 'گوشی' })).results.length > 0);
  });

  describe('failed, empty and refused calls cost nothing', () => {
    const failures: Array<['A' | 'B', FakeProvider, Scenario, string, Record<string, unknown>, string]> = [
      ['A', 'perplexity', 'failed-200', 'web_search', { query: 'x' }, 'upstream_error'],
      ['A', 'perplexity', 'error-429', 'web_search', { query: 'x' }, 'upstream_unavailable'],
      ['A', 'perplexity', 'hang', 'web_search', { query: 'x' }, 'upstream_timeout'],
      ['A', 'neshan', 'error-480', 'maps_search_places', { query: 'x' }, 'upstream_error'],
      ['A', 'neshan', 'error-481', 'maps_search_places', { query: 'x' }, 'upstream_unavailable'],
      ['A', 'torob', 'captcha', 'shopping_search', { query: 'x' }, 'upstream_unavailable'],
      ['B', 'searxng', 'forbidden', 'web_search', { query: 'x' }, 'upstream_error'],
      ['B', 'nominatim', 'error-400', 'maps_search_places', { query: 'x' }, 'upstream_error'],
      ['B', 'digikala', 'error-400-in-200', 'shopping_search', { query: 'x' }, 'upstream_error'],
    ];
    for (const [which, provider, scenario, tool, args, code] of failures) {
      it(`${provider} ${scenario}: an isError result with ${code}, nothing charged, one usage record`, async () => {
        const svc = which === 'A' ? svcA : svcB;
        fakes.set(provider, scenario);
        const { key, accountId } = await svc.createFundedKey(1_000);
        const c = await client(svc, key);
        const result = await call(c, tool, args);
        assert.equal(result.isError, true);
        assert.equal(meta(result)['svc/error_code'], code);
        assert.equal(meta(result)['svc/cost'], 0);
        const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
        assert.match(text, /try|unavailable|misconfigured/i);
        assert.doesNotMatch(text, /pplx-test-key|neshan-test-key|HTTP \d/);
        assert.deepEqual(await svc.wallet(accountId), { ...(await svc.wallet(accountId)), balance: 1_000n, held: 0n });
        const usage = await svc.store.db
          .selectFrom('usage_records')
          .selectAll()
          .where('account_id', '=', accountId)
          .execute();
        assert.equal(usage.length, 1);
        assert.equal(usage[0]?.cost, 0n);
        assert.equal(usage[0]?.error_code, code);
      });
    }

    for (const [which, provider, tool, args] of [
      ['A', 'perplexity', 'web_search', { query: 'x' }],
      ['A', 'neshan', 'maps_search_places', { query: 'x' }],
      ['A', 'torob', 'shopping_search', { query: 'x' }],
      ['B', 'searxng', 'web_search', { query: 'x' }],
      ['B', 'nominatim', 'maps_search_places', { query: 'x' }],
      ['B', 'digikala', 'shopping_search', { query: 'x' }],
    ] as const) {
      it(`${provider}: an empty result is a normal result saying nothing was found, free`, async () => {
        const svc = which === 'A' ? svcA : svcB;
        fakes.set(provider, 'empty');
        const { key, accountId } = await svc.createFundedKey(1_000);
        const c = await client(svc, key);
        const result = await call(c, tool, args);
        const content = structured(result);
        assert.deepEqual(content.results, []);
        assert.match(content.notice ?? '', /Nothing was found/);
        assert.equal(meta(result)['svc/cost'], 0);
        assert.equal((await svc.wallet(accountId)).balance, 1_000n);
        const usage = await svc.store.db
          .selectFrom('usage_records')
          .select(['status', 'cost'])
          .where('account_id', '=', accountId)
          .execute();
        assert.deepEqual(usage, [{ status: 'empty', cost: 0n }]);
      });
    }

    it('a wallet that cannot cover the price is refused before the provider is called', async () => {
      const { key, accountId } = await svcA.createFundedKey(459);
      const c = await client(svcA, key);
      const before = fakes.requestsTo('neshan').length;
      const result = await call(c, 'maps_search_places', { query: 'داروخانه' });
      assert.equal(result.isError, true);
      assert.equal(meta(result)['svc/error_code'], 'insufficient_credit');
      assert.equal(meta(result)['svc/balance'], 459);
      assert.equal(meta(result)['svc/price'], 460);
      assert.equal(meta(result)['svc/cost'], 0);
      const text = result.content[0]?.type === 'text' ? result.content[0].text : '';
      assert.match(text, /460/);
      assert.match(text, /459/);
      assert.equal(fakes.requestsTo('neshan').length, before);
      assert.equal((await svcA.wallet(accountId)).balance, 459n);
      const usage = await svcA.store.db
        .selectFrom('usage_records')
        .select(['status', 'cost', 'error_code'])
        .where('account_id', '=', accountId)
        .execute();
      assert.deepEqual(usage, [{ status: 'refused', cost: 0n, error_code: 'insufficient_credit' }]);
      const raw = await post(svcA.baseUrl, toolCall('maps_search_places', { query: 'x' }), {
        authorization: `Bearer ${key}`,
      });
      assert.equal(raw.status, 200);
      assertMcpResponse(raw.message, 'CallToolResult');
    });
  });

  it('50 concurrent maps calls against a wallet of 4,600 admit exactly 10', async () => {
    const { key, accountId } = await svcA.createFundedKey(4_600);
    const before = fakes.requestsTo('neshan').length;
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        post(svcA.baseUrl, toolCall('maps_search_places', { query: 'میدان' }, i), { authorization: `Bearer ${key}` }),
      ),
    );
    const results = replies.map((r) => {
      assertMcpResponse(r.message, 'CallToolResult');
      return r.message?.['result'] as CallToolResult;
    });
    const admitted = results.filter((r) => r.isError === false);
    const refused = results.filter(
      (r) => (r._meta as Record<string, unknown> | undefined)?.['svc/error_code'] === 'insufficient_credit',
    );
    assert.equal(admitted.length, 10);
    assert.equal(refused.length, 40);
    assert.equal(fakes.requestsTo('neshan').length - before, 10);
    assert.deepEqual(await svcA.wallet(accountId), { ...(await svcA.wallet(accountId)), balance: 0n, held: 0n });
    const ledger = await svcA.ledger(accountId);
    assert.equal(ledger.filter((e) => e.amount === -460n).length, 10);
  });
});
