import type { Dispatcher } from 'undici';
import { refineProducts, tomanOrNull } from '../../shopping';
import { asNumber, asRecord, asString, createUpstream, upstreamFailure, resultList } from '../../upstream';
import type { Product, ShoppingProvider, ShoppingSort, ToolConfig } from '../../types';

// Product pages live on the public site, not on the API host.
const WEB_ORIGIN = 'https://torob.com';

// GUESS: "popularity" is what Torob's own web client sends (see `next` in torob-search.json);
// the price orders are not in any sample. The order is applied again locally either way.
const SORT: Record<ShoppingSort, string> = { relevance: 'popularity', price_asc: 'price', price_desc: '-price' };

const PERSIAN_DIGITS = '۰۱۲۳۴۵۶۷۸۹';

/**
 * Reads Torob's wording: `shop_text` is either one shop ("در موبایلت باما", "at Mobilet Bama") or a
 * count ("در ۱۹۰ فروشگاه", "in 190 shops"), and a `price_text` starting "از" ("from") is the lowest
 * of several offers. A counted product has no one shop: its store is Torob, which compares them.
 */
export function offerOf(
  shopText: string,
  priceText: string,
): { store: string; offers: number | null; price_is_lowest: boolean } {
  const text = shopText.trim().replace(/^در\s+/, '');
  const fromPrice = /^از\s/.test(priceText.trim());
  const count = /^([0-9۰-۹٬,]+)\s+فروشگاه$/.exec(text);
  if (count !== null) {
    const digits = (count[1] ?? '').replace(/[٬,]/g, '').replace(/[۰-۹]/g, (d) => String(PERSIAN_DIGITS.indexOf(d)));
    const offers = Number.parseInt(digits, 10);
    return { store: 'ترب', offers: offers >= 1 ? offers : null, price_is_lowest: fromPrice || offers > 1 };
  }
  return { store: text || 'ترب', offers: text === '' ? null : 1, price_is_lowest: fromPrice };
}

/**
 * shopping_search through Torob's search API (`GET /v4/base-product/search/`). Torob prices are
 * already toman. A bot challenge comes back as HTTP 490 with an HTML captcha page. Shapes:
 * ../shared/ref/providers/torob-*.
 */
export function createTorobProvider(config: ToolConfig, dispatcher: Dispatcher): ShoppingProvider {
  const upstream = createUpstream({
    provider: 'torob',
    baseUrl: config.baseUrl,
    timeoutMs: config.timeoutMs,
    dispatcher,
  });
  return {
    name: 'torob',
    sandbox: false,
    async run(args, signal) {
      const response = await upstream.request({
        path: '/v4/base-product/search/',
        query: { q: args.query, page: 0, size: 24, sort: SORT[args.sort], source: 'next_desktop' },
        signal,
      });
      if (response.status === 490 || /<html/i.test(response.text.slice(0, 200))) {
        throw upstreamFailure(
          'upstream_unavailable',
          'The shopping search service is asking this server to solve a captcha; try again later',
          `torob: HTTP ${response.status}: bot challenge page`,
        );
      }
      if (response.status !== 200) {
        throw upstreamFailure(
          response.status === 429 || response.status >= 500 ? 'upstream_unavailable' : 'upstream_error',
          'The shopping search service could not run this search; try again in a moment',
          `torob: HTTP ${response.status}: ${response.text.slice(0, 200)}`,
        );
      }
      const products: Product[] = [];
      for (const raw of resultList('torob', asRecord(upstream.json(response))['results'], 'results')) {
        const item = asRecord(raw);
        const path = asString(item['web_client_absolute_url']);
        const key = asString(item['random_key']);
        if (path === '' && key === '') continue;
        products.push({
          title: asString(item['name1']) || asString(item['name2']),
          price_toman: tomanOrNull(asNumber(item['price'])),
          ...offerOf(asString(item['shop_text']), asString(item['price_text'])),
          url: path !== '' ? new URL(path, WEB_ORIGIN).toString() : `${WEB_ORIGIN}/p/${encodeURIComponent(key)}/`,
          image_url: asString(item['image_url']) || null,
        });
      }
      return { items: refineProducts(products, args) };
    },
  };
}
