import { haversineMetres } from '../../geo';
import { refineProducts } from '../../shopping';
import type { MapsProvider, Place, Product, ShoppingProvider, WebResult, WebSearchProvider } from '../../types';
import { SANDBOX_PAGES, SANDBOX_PLACES, SANDBOX_PRODUCTS } from './dataset';

/** How many query words a text contains (case-insensitive); 0 means "does not match". */
function score(query: string, text: string): number {
  const haystack = text.toLocaleLowerCase();
  return query
    .toLocaleLowerCase()
    .split(/[\s,.،؟?!]+/)
    .filter((word) => word.length >= 2 && haystack.includes(word)).length;
}

function ranked<T>(items: readonly T[], query: string, text: (item: T) => string): T[] {
  return items
    .map((item, index) => ({ item, index, score: score(query, text(item)) }))
    .filter((entry) => entry.score > 0)
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .map((entry) => entry.item);
}

// The sandbox answers from a small bundled dataset, offline and deterministically; a query that
// matches nothing in it is an honest empty result. Every result is labelled by the tools service.

export function createSandboxWebSearch(): WebSearchProvider {
  return {
    name: 'sandbox',
    sandbox: true,
    async run(args) {
      const pages = ranked(SANDBOX_PAGES, args.query, (p) => `${p.title} ${p.summary} ${p.keywords}`);
      const items: WebResult[] = pages
        .slice(0, args.maxResults)
        .map(({ title, url, summary }) => ({ title, url, summary, date: null }));
      // The bundled pages carry no dates or languages: those filters are reported as not applied.
      const unapplied = [
        ...(args.recency !== undefined ? ['recency'] : []),
        ...(args.language !== undefined ? ['language'] : []),
      ];
      // Token-billed like the real thing, so a sandbox web_search exercises the tariff path.
      return {
        items,
        usage: { inputTokens: [...args.query].length, outputTokens: items.length * 40 },
        ...(unapplied.length > 0 ? { unapplied } : {}),
      };
    },
  };
}

export function createSandboxMaps(): MapsProvider {
  return {
    name: 'sandbox',
    sandbox: true,
    async run(args) {
      const places: Place[] = ranked(
        SANDBOX_PLACES,
        args.query,
        ([name, address, category, , , words]) => `${name} ${address} ${category} ${words}`,
      ).map(([name, address, category, latitude, longitude]) => ({
        name,
        address,
        category,
        latitude,
        longitude,
        distance_m: haversineMetres(args.latitude, args.longitude, latitude, longitude),
      }));
      places.sort((a, b) => a.distance_m - b.distance_m);
      return { items: places.slice(0, args.limit) };
    },
  };
}

export function createSandboxShopping(): ShoppingProvider {
  return {
    name: 'sandbox',
    sandbox: true,
    async run(args) {
      const products: Product[] = ranked(SANDBOX_PRODUCTS, args.query, (p) => `${p.title} ${p.keywords}`).map(
        ({ title, price_toman, store, url, image_url }) => ({
          title,
          price_toman,
          store,
          url,
          image_url,
          offers: 1,
          price_is_lowest: false,
        }),
      );
      return { items: refineProducts(products, args) };
    },
  };
}
