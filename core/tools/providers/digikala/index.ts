import type { Dispatcher } from 'undici';
import { refineProducts, tomanOrNull } from '../../shopping';
import {
  asArray,
  asNumber,
  asRecord,
  asString,
  createUpstream,
  tryJson,
  upstreamFailure,
  type UpstreamResponse,
  resultList,
} from '../../upstream';
import type { Product, ShoppingProvider, ShoppingSort, ToolConfig } from '../../types';

const WEB_ORIGIN = 'https://www.digikala.com';

// 22 ("most relevant") is in the sample's sort_options; 20/21 (cheapest / dearest) are a GUESS
// from Digikala's web client. The order is applied again locally either way.
const SORT: Record<ShoppingSort, number> = { relevance: 22, price_asc: 20, price_desc: 21 };

// Digikala's edge answers a first request with a 307 that sets a cookie and points back at the
// same URL; a client that returns the cookie gets the data. More rounds than this is a real block.
const MAX_COOKIE_ROUNDS = 2;

/**
 * shopping_search through Digikala's search API (`GET /v1/search/`). Prices are rial (÷10 for
 * toman); errors may come as HTTP 200 with an error `status` in the body. Shapes:
 * ../shared/ref/providers/digikala-*.json.
 */
export function createDigikalaProvider(config: ToolConfig, dispatcher: Dispatcher): ShoppingProvider {
  const upstream = createUpstream({
    provider: 'digikala',
    baseUrl: config.baseUrl,
    timeoutMs: config.timeoutMs,
    dispatcher,
  });
  return {
    name: 'digikala',
    sandbox: false,
    async run(args, signal) {
      let cookie: string | undefined;
      let response: UpstreamResponse | undefined;
      for (let round = 0; round <= MAX_COOKIE_ROUNDS; round++) {
        response = await upstream.request({
          path: '/v1/search/',
          query: { q: args.query, page: 1, sort: SORT[args.sort] },
          headers: cookie !== undefined ? { cookie } : {},
          signal,
        });
        if (response.status !== 307 && response.status !== 302) break;
        const set = cookiesFrom(response.headers['set-cookie']);
        if (set === undefined) break;
        cookie = cookie === undefined ? set : `${cookie}; ${set}`;
      }
      if (response === undefined) throw new Error('unreachable: the loop runs at least once');
      if (response.status === 307 || response.status === 302) {
        throw upstreamFailure(
          'upstream_unavailable',
          'The shopping search service is blocking this server for now; try again later',
          `digikala: HTTP ${response.status} cookie challenge not passed after ${MAX_COOKIE_ROUNDS} rounds`,
        );
      }
      const body = asRecord(response.status === 200 ? upstream.json(response) : tryJson(response.text));
      const status = asNumber(body['status']) ?? response.status;
      if (response.status !== 200 || status !== 200) throw digikalaFailure(status, asString(body['message']));
      const products: Product[] = [];
      for (const raw of resultList('digikala', asRecord(body['data'])['products'], 'data.products')) {
        const item = asRecord(raw);
        const id = asNumber(item['id']);
        // An unavailable product has `default_variant: []` instead of an object.
        const variant = asRecord(item['default_variant']);
        const rial = asNumber(asRecord(variant['price'])['selling_price']);
        const uri = asString(asRecord(item['url'])['uri']);
        if (uri === '' && id === undefined) continue;
        const images = asRecord(asRecord(item['images'])['main']);
        products.push({
          title: asString(item['title_fa']) || asString(item['title_en']),
          price_toman: tomanOrNull(rial === undefined ? undefined : rial / 10),
          store: asString(asRecord(variant['seller'])['title']) || 'دیجی‌کالا',
          url: uri !== '' ? new URL(uri, WEB_ORIGIN).toString() : `${WEB_ORIGIN}/product/dkp-${id}/`,
          image_url: asString(asArray(images['url'])[0]) || null,
          // The search card shows the default variant's one seller and price; others are not counted.
          offers: null,
          price_is_lowest: false,
        });
      }
      return { items: refineProducts(products, args) };
    },
  };
}

function cookiesFrom(header: string | string[] | undefined): string | undefined {
  const lines = header === undefined ? [] : Array.isArray(header) ? header : [header];
  const pairs = lines.map((line) => line.split(';')[0]?.trim() ?? '').filter((pair) => pair.includes('='));
  return pairs.length > 0 ? pairs.join('; ') : undefined;
}

function digikalaFailure(status: number, message: string) {
  const detail = `digikala: status ${status}${message !== '' ? `: ${message}` : ''}`;
  if (status === 429)
    return upstreamFailure(
      'upstream_unavailable',
      'The shopping search service is rate-limiting this server; try again in a minute',
      detail,
    );
  if (status >= 500)
    return upstreamFailure(
      'upstream_unavailable',
      'The shopping search service is having trouble; try again in a moment',
      detail,
    );
  return upstreamFailure(
    'upstream_error',
    'The shopping search service could not run this search; try a simpler product name',
    detail,
  );
}
