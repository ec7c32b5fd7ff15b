import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isSvcError } from '../../core/errors';
import { MAPS_SEARCH_PLACES, WEB_SEARCH } from '../../core/tools/catalog';
import type { CoreClients } from '../../adapters/http/core-client';
import { createDispatcher } from '../../adapters/mcp/methods';
import type { WebResult } from '../../core/tools/types';
import { startFakeToolProviders, type FakeProvider, type FakeToolProviders } from '../fakes/providers';
import { startSvc, type TestSvc } from '../helpers/harness';
import { assertMcp, assertMcpResponse } from '../helpers/mcp-schema';
import { configA, configB, connectClient, post } from './helpers';

type Structured = { provider: string; notice?: string; results: Array<Record<string, unknown>> };

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  assertMcp('CallToolResult', result);
  return result;
}

function structured(result: CallToolResult): Structured {
  assert.equal(result.isError, false, JSON.stringify(result.content));
  return result.structuredContent as Structured;
}

const text = (result: CallToolResult): string => (result.content[0]?.type === 'text' ? result.content[0].text : '');

function refusal(raw: unknown, tool = WEB_SEARCH): { param: string | undefined; message: string } {
  try {
    tool.parse(raw);
  } catch (error) {
    assert.ok(isSvcError(error) && error.code === 'invalid_argument', String(error));
    return { param: error.param, message: error.message };
  }
  assert.fail(`expected ${JSON.stringify(raw)} to be refused`);
}

describe('richer tool arguments (issue 16): recency, language, domains, radius', function () {
  describe('web_search arguments (zod schema)', () => {
    it('accepts every new argument and hands them to the provider, asking it for more when svc filters after', () => {
      const args = WEB_SEARCH.parse({
        query: ' news ',
        max_results: 3,
        recency: 'week',
        include_domains: ['IRNA.ir', '.gov.ir'],
        language: 'fa',
      });
      assert.deepEqual(args, {
        query: 'news',
        maxResults: 20,
        resultLimit: 3,
        recency: 'week',
        includeDomains: ['irna.ir', '.gov.ir'],
        excludeDomains: undefined,
        language: 'fa',
      });
      assert.equal(
        WEB_SEARCH.parse({ query: 'x' }).maxResults,
        5,
        'no filter: the provider is asked for what the model asked',
      );
    });

    it('refuses bad values naming the argument and what it takes', () => {
      assert.deepEqual(refusal({ query: 'x', recency: 'hour' }), {
        param: 'recency',
        message:
          'Argument "recency" of web_search must be one of "day", "week", "month", "year", got the string "hour"',
      });
      assert.match(
        refusal({ query: 'x', include_domains: ['https://bbc.com/news'] }).message,
        /"include_domains".*bare domain names/,
      );
      assert.match(
        refusal({ query: 'x', include_domains: 'bbc.com' }).message,
        /"include_domains" of web_search must be a list of up to 20 values/,
      );
      assert.match(refusal({ query: 'x', exclude_domains: [] }).message, /"exclude_domains"/);
      assert.match(refusal({ query: 'x', language: 'persian' }).message, /"language".*ISO 639-1/);
      assert.deepEqual(
        refusal({ query: 'x', include_domains: ['bbc.com'], exclude_domains: ['bbc.com'] }).param,
        'exclude_domains',
      );
      assert.match(
        refusal({ query: 'x', radius_m: 50 }, MAPS_SEARCH_PLACES as never).message,
        /"radius_m" of maps_search_places must be an integer between 100 and 100000, got number 50/,
      );
    });

    it('drops results older than the recency window (when dated) and outside the domain lists, then keeps max_results', () => {
      const page = (url: string, date: string | null): WebResult => ({ title: url, url, summary: '', date });
      const items = [
        page('https://www.irna.ir/news/1', '2026-11-20'),
        page('https://old.irna.ir/news/2', '2026-01-01'),
        page('https://bbc.com/persian', '2026-11-24'),
        page('https://news.irna.ir/3', null),
        page('https://irna.ir/4', '2026-11-25'),
      ];
      const now = Date.parse('2026-11-25T12:00:00Z');
      const args = WEB_SEARCH.parse({ query: 'x', max_results: 2, recency: 'week', include_domains: ['irna.ir'] });
      assert.deepEqual(
        WEB_SEARCH.refine?.(items, args, { now }).map((r) => r.url),
        ['https://www.irna.ir/news/1', 'https://news.irna.ir/3'],
      );
      const excluding = WEB_SEARCH.parse({ query: 'x', exclude_domains: ['irna.ir'] });
      assert.deepEqual(
        WEB_SEARCH.refine?.(items, excluding, { now }).map((r) => r.url),
        ['https://bbc.com/persian'],
      );
    });
  });

  it('serverInfo names the website (SVC_PUBLIC_URL) and describes svc from 2025-11-25 on, not before', async () => {
    // Only initialize's authentication reaches the core here.
    const core = { auth: { authenticate: () => Promise.resolve({}) } } as unknown as CoreClients;
    const dispatch = createDispatcher(core, { websiteUrl: 'https://svc.example' });
    const meta = { authorization: 'Bearer k', ids: { client: undefined, current: 'req_1', adopt: () => undefined } };
    const info = async (version: string) =>
      (
        (await dispatch(meta, 'initialize', { protocolVersion: version }, { modern: false, version: undefined })) as {
          serverInfo: Record<string, unknown>;
        }
      ).serverInfo;
    const modern = await info('2025-11-25');
    assert.equal(modern['websiteUrl'], 'https://svc.example');
    assert.equal(typeof modern['description'], 'string');
    assertMcp('Implementation', modern, '2025-11-25');
    const old = await info('2025-06-18');
    assert.ok(!('websiteUrl' in old) && !('description' in old));
    assertMcp('Implementation', old, '2025-06-18');
  });

  describe('through svc against the provider fakes', () => {
    let fakes: FakeToolProviders;
    let svcA: TestSvc;
    let svcB: TestSvc;
    let sandbox: TestSvc;
    const clients: Client[] = [];

    async function client(svc: TestSvc, key: string): Promise<Client> {
      const c = await connectClient(svc.baseUrl, key);
      clients.push(c);
      await c.listTools();
      return c;
    }

    before(async () => {
      fakes = await startFakeToolProviders();
      svcA = await startSvc({ config: configA(fakes) });
      svcB = await startSvc({ config: configB(fakes) });
      sandbox = await startSvc();
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.close()));
      await svcA?.close();
      await svcB?.close();
      await sandbox?.close();
      await fakes?.close();
    });
    beforeEach(() => {
      for (const p of ['perplexity', 'searxng', 'neshan', 'nominatim'] as FakeProvider[]) fakes.set(p, 'ok');
    });

    it('perplexity gets recency, language and the allow list as its web_search filters; svc keeps only allowed domains', async () => {
      const { key } = await svcA.createFundedKey(10_000);
      const c = await client(svcA, key);
      const before = fakes.requestsTo('perplexity').length;
      const result = structured(
        await call(c, 'web_search', {
          query: 'fastapi',
          recency: 'year',
          language: 'en',
          include_domains: ['github.com'],
          exclude_domains: ['gist.github.com'],
        }),
      );
      const sent = JSON.parse(fakes.requestsTo('perplexity')[before]?.body ?? '{}') as { tools: unknown[] };
      assert.deepEqual(sent.tools, [
        {
          type: 'web_search',
          filters: {
            search_recency_filter: 'year',
            search_language_filter: ['en'],
            search_domain_filter: ['github.com'],
          },
        },
      ]);
      assert.deepEqual(
        result.results.map((r) => r['url']),
        ['https://github.com/fastapi/fastapi/releases'],
      );
      assert.equal(result.results[0]?.['date'], '2026-10-20', "the provider's date is kept");
    });

    it('perplexity gets a deny list as "-domain" entries', async () => {
      const { key } = await svcA.createFundedKey(10_000);
      const c = await client(svcA, key);
      const before = fakes.requestsTo('perplexity').length;
      const result = structured(await call(c, 'web_search', { query: 'fastapi', exclude_domains: ['tiangolo.com'] }));
      const sent = JSON.parse(fakes.requestsTo('perplexity')[before]?.body ?? '{}') as {
        tools: Array<{ filters?: Record<string, unknown> }>;
      };
      assert.deepEqual(sent.tools[0]?.filters, { search_domain_filter: ['-tiangolo.com'] });
      assert.ok(result.results.every((r) => !String(r['url']).includes('tiangolo.com')));
    });

    it('searxng gets time_range and language; a domain filter that leaves nothing is a free empty result saying so', async () => {
      const { key, accountId } = await svcB.createFundedKey(1_000);
      const c = await client(svcB, key);
      const before = fakes.requestsTo('searxng').length;
      const kept = structured(await call(c, 'web_search', { query: 'fastapi', recency: 'month', language: 'fa' }));
      const query = fakes.requestsTo('searxng')[before]?.query;
      assert.equal(query?.get('time_range'), 'month');
      assert.equal(query?.get('language'), 'fa');
      assert.ok(kept.results.length > 0);
      const balance = (await svcB.wallet(accountId)).balance;
      const none = await call(c, 'web_search', { query: 'fastapi', include_domains: ['example.org'] });
      assert.deepEqual(structured(none).results, []);
      assert.match(structured(none).notice ?? '', /passes the filters/);
      assert.equal((none._meta as Record<string, unknown>)['svc/cost'], 0);
      assert.equal((await svcB.wallet(accountId)).balance, balance, 'filtered to nothing: free');
    });

    it('the sandbox says in the notice that it cannot apply recency or language, never silently', async () => {
      const { key } = await sandbox.createFundedKey(10_000);
      const c = await client(sandbox, key);
      const result = structured(await call(c, 'web_search', { query: 'svc', recency: 'day', language: 'fa' }));
      assert.match(result.notice ?? '', /cannot apply "recency", "language"/);
    });

    it('maps radius_m keeps only places within the radius (neshan: after the search; nominatim: its search box too)', async () => {
      const { key } = await svcA.createFundedKey(10_000);
      const c = await client(svcA, key);
      const all = structured(await call(c, 'maps_search_places', { query: 'داروخانه' })).results;
      const distances = all.map((p) => p['distance_m'] as number);
      assert.ok(distances.length >= 2, 'the sample has places at several distances');
      const radius = Math.max(100, Math.floor(((distances[0] ?? 0) + (distances.at(-1) ?? 0)) / 2));
      const near = structured(await call(c, 'maps_search_places', { query: 'داروخانه', radius_m: radius })).results;
      assert.ok(near.length < all.length && near.every((p) => (p['distance_m'] as number) <= radius));

      const { key: keyB } = await svcB.createFundedKey(10_000);
      const cb = await client(svcB, keyB);
      const before = fakes.requestsTo('nominatim').length;
      await call(cb, 'maps_search_places', { query: 'داروخانه', radius_m: 1_113 });
      const box = (fakes.requestsTo('nominatim')[before]?.query.get('viewbox') ?? '').split(',').map(Number);
      // 1,113 m is 0.01 degrees of latitude around central Tehran.
      assert.ok(Math.abs((box[1] ?? 0) - (box[3] ?? 0) - 0.02) < 0.0005, `viewbox ${box.join(',')}`);
    });

    it('tools/list has icons and the server a description in 2025-11-25, neither in 2025-06-18; both validate', async () => {
      const { key } = await svcA.createFundedKey(0);
      const auth = { authorization: `Bearer ${key}` };
      const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
      const modern = await post(svcA.baseUrl, list, { ...auth, 'mcp-protocol-version': '2025-11-25' });
      assertMcpResponse(modern.message, 'ListToolsResult', '2025-11-25');
      const tools = (modern.message?.['result'] as { tools: Array<{ icons?: Array<{ src: string }> }> }).tools;
      assert.ok(tools.every((t) => t.icons?.[0]?.src.startsWith('data:image/svg+xml;base64,')));
      const old = await post(svcA.baseUrl, list, { ...auth, 'mcp-protocol-version': '2025-06-18' });
      assertMcpResponse(old.message, 'ListToolsResult', '2025-06-18');
      const oldTools = (old.message?.['result'] as { tools: Array<Record<string, unknown>> }).tools;
      assert.ok(oldTools.every((t) => !('icons' in t)));
    });

    it('a refusal reads the same through MCP as the core wrote it: text, code and details under svc/', async () => {
      const { key } = await svcA.createFundedKey(10);
      const c = await client(svcA, key);
      const refused = await call(c, 'maps_search_places', { query: 'داروخانه' });
      assert.equal(refused.isError, true);
      assert.deepEqual(
        Object.fromEntries(Object.entries(refused._meta ?? {}).filter(([k]) => k !== 'svc/request_id')),
        {
          'svc/cost': 0,
          'svc/provider': 'neshan',
          'svc/error_code': 'insufficient_credit',
          'svc/balance': 10,
          'svc/held': 0,
          'svc/available': 10,
          'svc/price': 460,
        },
      );
      assert.match(
        text(refused),
        /^Insufficient credit: maps_search_places needs 460 credits, but the wallet has 10 available/,
      );
    });
  });
});
