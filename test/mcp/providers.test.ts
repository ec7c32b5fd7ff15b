import assert from 'node:assert/strict';
import type { Agent } from 'undici';
import type { ToolConfig } from '../../core/config/types';
import { isSvcError } from '../../core/errors';
import { createUpstreamAgent } from '../../core/providers/http';
import { createDigikalaProvider } from '../../core/tools/providers/digikala';
import { createNeshanProvider } from '../../core/tools/providers/neshan';
import { createNominatimProvider } from '../../core/tools/providers/nominatim';
import { createPerplexityProvider } from '../../core/tools/providers/perplexity';
import {
  createSandboxMaps,
  createSandboxShopping,
  createSandboxWebSearch,
} from '../../core/tools/providers/sandbox-tools';
import { createSearxngProvider } from '../../core/tools/providers/searxng';
import { createTorobProvider } from '../../core/tools/providers/torob';
import { TEHRAN } from '../../core/tools/geo';
import type { ShoppingSearchArgs } from '../../core/tools/types';
import { startFakeToolProviders, type FakeProvider, type FakeToolProviders } from '../fakes/providers';

function toolConfig(
  fakes: FakeToolProviders,
  provider: FakeProvider,
  name: ToolConfig['name'],
  extra: Partial<ToolConfig> = {},
): ToolConfig {
  return {
    name,
    provider,
    baseUrl: fakes.baseUrl(provider),
    apiKey: provider === 'perplexity' ? 'pplx-test-key' : provider === 'neshan' ? 'neshan-test-key' : undefined,
    model: provider === 'perplexity' ? 'sonar' : undefined,
    price: { kind: 'flat', credits: 1n },
    timeoutMs: 5000,
    ...extra,
  };
}

async function failure(promise: Promise<unknown>): Promise<{ code: string; message: string; detail: string }> {
  try {
    await promise;
  } catch (error) {
    assert.ok(isSvcError(error), `expected SvcError, got ${String(error)}`);
    return {
      code: error.code,
      message: error.message,
      detail: error.cause instanceof Error ? error.cause.message : '',
    };
  }
  assert.fail('expected the provider call to fail');
}

const signal = (): AbortSignal => new AbortController().signal;
const shopping = (over: Partial<ShoppingSearchArgs> = {}): ShoppingSearchArgs => ({
  query: 'گوشی سامسونگ',
  limit: 10,
  minPriceToman: undefined,
  maxPriceToman: undefined,
  sort: 'relevance',
  ...over,
});

describe('tool providers against fakes replaying the recorded wire samples', () => {
  let fakes: FakeToolProviders;
  // The providers' connections live in the dispatcher they are given, closed once at the end.
  let agent: Agent;

  before(async () => {
    fakes = await startFakeToolProviders();
    agent = createUpstreamAgent();
  });
  after(async () => {
    await agent.close();
    await fakes.close();
  });

  describe('perplexity (Agent API)', () => {
    it('maps search_results to title/url/summary/date and reports token usage', async () => {
      fakes.set('perplexity', 'ok');
      const p = createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search'), agent);
      const result = await p.run({ query: 'FastAPI latest release', maxResults: 5 }, signal());
      assert.deepEqual(result.items[0], {
        title: 'Release Notes - FastAPI',
        url: 'https://fastapi.tiangolo.com/release-notes/',
        summary: 'Latest Changes. Features: Add support for ...',
        date: '2026-10-20',
      });
      assert.equal(result.items.length, 2);
      assert.deepEqual(result.usage, { inputTokens: 12, outputTokens: 215 });
      const sent = fakes.requestsTo('perplexity').at(-1);
      assert.equal(sent?.method, 'POST');
      assert.deepEqual(JSON.parse(sent?.body ?? '{}'), {
        model: 'sonar',
        input: 'FastAPI latest release',
        tools: [{ type: 'web_search' }],
      });
    });

    it('honours max_results', async () => {
      fakes.set('perplexity', 'ok');
      const p = createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search'), agent);
      assert.equal((await p.run({ query: 'x', maxResults: 1 }, signal())).items.length, 1);
    });

    it('treats HTTP 200 with status "failed" as a failure', async () => {
      fakes.set('perplexity', 'failed-200');
      const p = createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search'), agent);
      const f = await failure(p.run({ query: 'x', maxResults: 5 }, signal()));
      assert.equal(f.code, 'upstream_error');
      assert.match(f.detail, /upstream model error/);
    });

    it('maps 429 to upstream_unavailable and 401 to a configuration failure without leaking the key', async () => {
      fakes.set('perplexity', 'error-429');
      const p = createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search'), agent);
      assert.equal((await failure(p.run({ query: 'x', maxResults: 5 }, signal()))).code, 'upstream_unavailable');
      const wrongKey = createPerplexityProvider(
        toolConfig(fakes, 'perplexity', 'web_search', { apiKey: 'pplx-wrong' }),
        agent,
      );
      const f = await failure(wrongKey.run({ query: 'x', maxResults: 5 }, signal()));
      assert.equal(f.code, 'upstream_error');
      assert.match(f.detail, /HTTP 401: Invalid API key/);
      assert.doesNotMatch(`${f.message} ${f.detail}`, /pplx-wrong/);
    });

    it('turns a provider that never answers into upstream_timeout', async () => {
      fakes.set('perplexity', 'hang');
      const p = createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search', { timeoutMs: 200 }), agent);
      assert.equal((await failure(p.run({ query: 'x', maxResults: 5 }, signal()))).code, 'upstream_timeout');
    });

    it('turns a caller that goes away into cancelled', async () => {
      fakes.set('perplexity', 'hang');
      const p = createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search'), agent);
      const controller = new AbortController();
      const pending = p.run({ query: 'x', maxResults: 5 }, controller.signal);
      controller.abort();
      assert.equal((await failure(pending)).code, 'cancelled');
    });
  });

  describe('searxng', () => {
    it('maps results and asks for format=json', async () => {
      fakes.set('searxng', 'ok');
      const p = createSearxngProvider(toolConfig(fakes, 'searxng', 'web_search'), agent);
      const result = await p.run({ query: 'fastapi release notes', maxResults: 5 }, signal());
      assert.deepEqual(result.items[1], {
        title: 'Releases · fastapi/fastapi',
        url: 'https://github.com/fastapi/fastapi/releases',
        summary: '0.120.0 Features ...',
        date: '2026-10-20',
      });
      // The first result has no publishedDate: no date is made up.
      assert.equal(result.items[0]?.date, null);
      assert.equal(fakes.requestsTo('searxng').at(-1)?.query.get('format'), 'json');
    });

    it('explains a 403 as JSON output being disabled', async () => {
      fakes.set('searxng', 'forbidden');
      const p = createSearxngProvider(toolConfig(fakes, 'searxng', 'web_search'), agent);
      const f = await failure(p.run({ query: 'x', maxResults: 5 }, signal()));
      assert.equal(f.code, 'upstream_error');
      assert.match(f.detail, /format=json.*search\.formats/);
    });

    it('reports an empty result as no items', async () => {
      fakes.set('searxng', 'empty');
      const p = createSearxngProvider(toolConfig(fakes, 'searxng', 'web_search'), agent);
      assert.deepEqual((await p.run({ query: 'nothing', maxResults: 5 }, signal())).items, []);
    });
  });

  describe('neshan', () => {
    it('maps items, computes distance from the point and sorts nearest first', async () => {
      fakes.set('neshan', 'ok');
      const p = createNeshanProvider(toolConfig(fakes, 'neshan', 'maps_search_places'), agent);
      const point = { latitude: 35.7117, longitude: 51.406 };
      const result = await p.run({ query: 'ولیعصر', ...point, limit: 10 }, signal());
      assert.equal(result.items.length, 3);
      assert.equal(result.items[0]?.name, 'میدان ولیعصر');
      assert.equal(result.items[0]?.category, 'میدان');
      assert.ok((result.items[0]?.distance_m ?? -1) < 20);
      const distances = result.items.map((i) => i.distance_m);
      assert.deepEqual(
        distances,
        [...distances].sort((a, b) => a - b),
      );
      const sent = fakes.requestsTo('neshan').at(-1);
      assert.equal(sent?.query.get('lat'), '35.7117');
      assert.equal(sent?.headers['api-key'], 'neshan-test-key');
    });

    it('a connection closed under the request before any answer is sent once more', async () => {
      fakes.set('neshan', 'reset-once');
      const p = createNeshanProvider(toolConfig(fakes, 'neshan', 'maps_search_places'), agent);
      const before = fakes.requestsTo('neshan').length;
      const result = await p.run({ query: 'ولیعصر', ...TEHRAN, limit: 10 }, signal());
      assert.equal(result.items.length, 3);
      assert.equal(fakes.requestsTo('neshan').length, before + 2, 'sent twice');
    });

    it('reads the v3 shape too', async () => {
      fakes.set('neshan', 'v3');
      const p = createNeshanProvider(toolConfig(fakes, 'neshan', 'maps_search_places'), agent);
      const result = await p.run({ query: 'داروخانه', ...TEHRAN, limit: 1 }, signal());
      assert.equal(result.items.length, 1);
      assert.equal(result.items[0]?.category, 'town_square');
    });

    for (const [scenario, code] of [
      ['error-480', 'upstream_error'],
      ['error-481', 'upstream_unavailable'],
      ['error-482', 'upstream_unavailable'],
      ['error-484', 'upstream_error'],
      ['error-485', 'upstream_error'],
    ] as const) {
      it(`maps Neshan ${scenario} to ${code}`, async () => {
        fakes.set('neshan', scenario);
        const p = createNeshanProvider(toolConfig(fakes, 'neshan', 'maps_search_places'), agent);
        const f = await failure(p.run({ query: 'x', ...TEHRAN, limit: 10 }, signal()));
        assert.equal(f.code, code);
        assert.match(f.detail, new RegExp(`neshan: error ${scenario.slice(-3)}`));
      });
    }
  });

  describe('nominatim', () => {
    it('limits to Iran and a box around the point, and computes distances', async () => {
      fakes.set('nominatim', 'ok');
      const p = createNominatimProvider(toolConfig(fakes, 'nominatim', 'maps_search_places'), agent);
      const result = await p.run({ query: 'داروخانه', ...TEHRAN, limit: 5 }, signal());
      assert.equal(result.items.length, 2);
      assert.equal(result.items[0]?.name, 'داروخانه ولیعصر');
      assert.equal(result.items[0]?.category, 'pharmacy');
      assert.equal(result.items[0]?.latitude, 35.71173);
      const sent = fakes.requestsTo('nominatim').at(-1);
      assert.equal(sent?.query.get('countrycodes'), 'ir');
      assert.equal(sent?.query.get('bounded'), '1');
      const [left, top, right, bottom] = (sent?.query.get('viewbox') ?? '').split(',').map(Number);
      assert.ok(
        (left ?? 99) < TEHRAN.longitude &&
          (right ?? 0) > TEHRAN.longitude &&
          (bottom ?? 99) < TEHRAN.latitude &&
          (top ?? 0) > TEHRAN.latitude,
      );
    });

    it('reports [] as empty and a 400 as a failure', async () => {
      fakes.set('nominatim', 'empty');
      const p = createNominatimProvider(toolConfig(fakes, 'nominatim', 'maps_search_places'), agent);
      assert.deepEqual((await p.run({ query: 'x', ...TEHRAN, limit: 5 }, signal())).items, []);
      fakes.set('nominatim', 'error-400');
      const f = await failure(p.run({ query: 'x', ...TEHRAN, limit: 5 }, signal()));
      assert.equal(f.code, 'upstream_error');
      assert.match(f.detail, /Bounding box/);
      fakes.set('nominatim', 'error-400-in-200');
      const g = await failure(p.run({ query: 'x', ...TEHRAN, limit: 5 }, signal()));
      assert.equal(g.code, 'upstream_error');
      assert.match(g.detail, /Unable to geocode/);
    });
  });

  describe('torob', () => {
    it('keeps toman prices and builds product URLs on torob.com', async () => {
      fakes.set('torob', 'ok');
      const p = createTorobProvider(toolConfig(fakes, 'torob', 'shopping_search'), agent);
      const result = await p.run(shopping(), signal());
      assert.equal(result.items.length, 2);
      assert.equal(result.items[0]?.price_toman, 25_500_000);
      assert.match(result.items[0]?.url ?? '', /^https:\/\/torob\.com\/p\/1d271685-/);
      assert.equal(result.items[0]?.image_url, 'https://image.torob.com/base/images/aa/bb/example-a55.jpg');
    });

    it('reads "in 190 shops" as an offer count and "from …" as a lowest price, and a named shop as the store', async () => {
      fakes.set('torob', 'ok');
      const p = createTorobProvider(toolConfig(fakes, 'torob', 'shopping_search'), agent);
      const result = await p.run(shopping(), signal());
      // torob-search.json: "در ۱۹۰ فروشگاه" / "از ۲۵٫۵۰۰٫۰۰۰ تومان", then "در موبایلت باما" / "۱۷٫۳۹۹٫۰۰۰ تومان".
      assert.deepEqual(
        result.items.map((i) => [i.store, i.offers, i.price_is_lowest]),
        [
          ['ترب', 190, true],
          ['موبایلت باما', 1, false],
        ],
      );
    });

    it('filters and sorts by price locally', async () => {
      fakes.set('torob', 'ok');
      const p = createTorobProvider(toolConfig(fakes, 'torob', 'shopping_search'), agent);
      const asc = await p.run(shopping({ sort: 'price_asc' }), signal());
      assert.deepEqual(
        asc.items.map((i) => i.price_toman),
        [17_399_000, 25_500_000],
      );
      const bounded = await p.run(shopping({ maxPriceToman: 20_000_000 }), signal());
      assert.deepEqual(
        bounded.items.map((i) => i.price_toman),
        [17_399_000],
      );
    });

    it('reports the 490 captcha page as upstream_unavailable', async () => {
      fakes.set('torob', 'captcha');
      const p = createTorobProvider(toolConfig(fakes, 'torob', 'shopping_search'), agent);
      const f = await failure(p.run(shopping(), signal()));
      assert.equal(f.code, 'upstream_unavailable');
      assert.match(f.message, /captcha/);
    });
  });

  describe('digikala', () => {
    it('divides rial by 10 and names the seller', async () => {
      fakes.set('digikala', 'ok');
      const p = createDigikalaProvider(toolConfig(fakes, 'digikala', 'shopping_search'), agent);
      const result = await p.run(shopping({ limit: 24 }), signal());
      assert.equal(result.items.length, 12);
      assert.equal(result.items[0]?.price_toman, 42_503_600);
      assert.equal(result.items[0]?.store, 'دیجی‌کالا');
      assert.equal(result.items[0]?.url, 'https://www.digikala.com/product/dkp-20109389/');
      assert.ok(
        result.items.every((i) => i.price_toman === null || (Number.isInteger(i.price_toman) && i.price_toman > 0)),
      );
    });

    it('reads url and image from a full card', async () => {
      fakes.set('digikala', 'full-card');
      const p = createDigikalaProvider(toolConfig(fakes, 'digikala', 'shopping_search'), agent);
      const [item] = (await p.run(shopping(), signal())).items;
      assert.match(item?.url ?? '', /^https:\/\/www\.digikala\.com\/product\/dkp-20109389\//);
      assert.match(item?.image_url ?? '', /^https:\/\/dkstatics-public\.digikala\.com\//);
    });

    it('treats an error status inside an HTTP 200 body as a failure', async () => {
      const p = createDigikalaProvider(toolConfig(fakes, 'digikala', 'shopping_search'), agent);
      fakes.set('digikala', 'error-400-in-200');
      const f = await failure(p.run(shopping(), signal()));
      assert.equal(f.code, 'upstream_error');
      assert.match(f.detail, /status 400: not main category/);
      fakes.set('digikala', 'error-429-in-200');
      assert.equal((await failure(p.run(shopping(), signal()))).code, 'upstream_unavailable');
    });

    it('passes the 307 cookie challenge by returning the cookie', async () => {
      fakes.set('digikala', 'cookie-challenge');
      const p = createDigikalaProvider(toolConfig(fakes, 'digikala', 'shopping_search'), agent);
      const before = fakes.requestsTo('digikala').length;
      assert.equal((await p.run(shopping(), signal())).items.length, 10);
      const sent = fakes.requestsTo('digikala').slice(before);
      assert.equal(sent.length, 2);
      assert.match(String(sent[1]?.headers['cookie']), /tracker_glob_new=fake-challenge-cookie/);
    });

    it('gives up on a challenge that never clears', async () => {
      fakes.set('digikala', 'cookie-challenge-forever');
      const p = createDigikalaProvider(toolConfig(fakes, 'digikala', 'shopping_search'), agent);
      assert.equal((await failure(p.run(shopping(), signal()))).code, 'upstream_unavailable');
    });
  });

  it('a 200 answer without a result list is a failure, never an empty (free) result', async () => {
    const providers = [
      createPerplexityProvider(toolConfig(fakes, 'perplexity', 'web_search'), agent),
      createSearxngProvider(toolConfig(fakes, 'searxng', 'web_search'), agent),
    ];
    for (const name of ['perplexity', 'searxng', 'neshan', 'nominatim', 'torob', 'digikala'] as const)
      fakes.set(name, 'shape-changed');
    try {
      for (const p of providers)
        assert.equal((await failure(p.run({ query: 'x', maxResults: 5 }, signal()))).code, 'upstream_error');
      for (const p of [
        createNeshanProvider(toolConfig(fakes, 'neshan', 'maps_search_places'), agent),
        createNominatimProvider(toolConfig(fakes, 'nominatim', 'maps_search_places'), agent),
      ]) {
        assert.equal((await failure(p.run({ query: 'x', ...TEHRAN, limit: 5 }, signal()))).code, 'upstream_error');
      }
      for (const p of [
        createTorobProvider(toolConfig(fakes, 'torob', 'shopping_search'), agent),
        createDigikalaProvider(toolConfig(fakes, 'digikala', 'shopping_search'), agent),
      ]) {
        assert.equal((await failure(p.run(shopping(), signal()))).code, 'upstream_error');
      }
    } finally {
      for (const name of ['perplexity', 'searxng', 'neshan', 'nominatim', 'torob', 'digikala'] as const)
        fakes.set(name, 'ok');
    }
  });

  describe('sandbox', () => {
    it('answers offline, deterministically, and empty when nothing matches', async () => {
      const web = createSandboxWebSearch();
      const first = await web.run({ query: 'typescript strict', maxResults: 5 }, signal());
      assert.deepEqual(await web.run({ query: 'typescript strict', maxResults: 5 }, signal()), first);
      assert.ok(first.items.length > 0);
      assert.deepEqual((await web.run({ query: 'zzzqqq', maxResults: 5 }, signal())).items, []);
      const maps = await createSandboxMaps().run({ query: 'داروخانه', ...TEHRAN, limit: 30 }, signal());
      assert.ok(maps.items.length >= 2);
      assert.ok(maps.items.every((p, i, all) => i === 0 || (all[i - 1]?.distance_m ?? 0) <= p.distance_m));
      const shop = await createSandboxShopping().run(shopping({ query: 'گوشی', sort: 'price_desc' }), signal());
      assert.equal(shop.items.at(-1)?.price_toman, null);
    });
  });
});
