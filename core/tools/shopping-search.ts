import { z } from 'zod';
import { invalidArgument } from '../errors';
import { liveProviders, outputSchema, svgIcon, type ToolProviderKind, type ToolSpec } from './definitions';
import { createDigikalaProvider } from './providers/digikala';
import { createSandboxShopping } from './providers/sandbox-tools';
import { createTorobProvider } from './providers/torob';
import { normalizeQuery, parseArguments, queryArgument } from './schema';
import type { Product, ShoppingSearchArgs } from './types';

type Kind = ToolProviderKind<ShoppingSearchArgs, Product>;

/** `tools.shopping_search.provider`: the offline sandbox (the default), Torob or Digikala. */
const providers: { readonly sandbox: Kind } & Readonly<Record<string, Kind>> = {
  sandbox: { defaultBaseUrl: '', needsApiKey: false, create: createSandboxShopping },
  torob: { defaultBaseUrl: 'https://api.torob.com', needsApiKey: false, create: createTorobProvider },
  digikala: { defaultBaseUrl: 'https://api.digikala.com', needsApiKey: false, create: createDigikalaProvider },
};

const input = z.strictObject({
  query: queryArgument(200, 'The product to look for, e.g. "گوشی سامسونگ A55".'),
  limit: z.int().min(1).max(24).default(10).describe('How many products to return (1-24, default 10).'),
  min_price_toman: z.int().min(0).optional().describe('Lowest price, in toman.'),
  max_price_toman: z.int().min(1).optional().describe('Highest price, in toman.'),
  sort: z.enum(['relevance', 'price_asc', 'price_desc']).default('relevance').describe('Result order.'),
});

const product = z.strictObject({
  title: z.string(),
  price_toman: z.int().min(1).nullable().describe('Price in toman; null when unavailable, never 0.'),
  store: z
    .string()
    .describe('The shop; for a product compared across several shops (offers > 1), the comparison site.'),
  url: z.string(),
  image_url: z.string().nullable(),
  offers: z.int().min(1).nullable().describe('How many shops offer the product; null when the source does not say.'),
  price_is_lowest: z
    .boolean()
    .describe('True when price_toman is the lowest of several offers ("from …"), not one shop\'s price.'),
});

/** shopping_search: products and prices from Iranian shops. */
export const SHOPPING_SEARCH: ToolSpec<'shopping_search', ShoppingSearchArgs, Product> = {
  name: 'shopping_search',
  title: 'Shopping search (Iran)',
  summary: 'Iranian shops, prices in toman',
  labels: { en: 'Shopping search', fa: 'جست‌وجوی خرید' },
  description:
    'Searches Iranian online shops for products and returns title, price in toman, store, product URL and image. ' +
    'price_toman is null when the shop shows no price; when several shops offer a product, price_is_lowest says ' +
    'the price is the lowest of them and offers how many there are.',
  input,
  output: outputSchema(liveProviders(providers), product, {}),
  icons: [
    svgIcon(
      '<circle cx="9" cy="21" r="1"/><circle cx="20" cy="21" r="1"/><path d="M1 1h4l2.7 13.4a2 2 0 0 0 2 1.6h9.7a2 2 0 0 0 2-1.6L23 6H6"/>',
    ),
  ],
  parse(raw) {
    const args = parseArguments('shopping_search', input, raw);
    const { min_price_toman: minPriceToman, max_price_toman: maxPriceToman } = args;
    if (minPriceToman !== undefined && maxPriceToman !== undefined && minPriceToman > maxPriceToman) {
      throw invalidArgument(
        'min_price_toman',
        `Argument "min_price_toman" (${minPriceToman}) must not exceed "max_price_toman" (${maxPriceToman})`,
      );
    }
    return { query: normalizeQuery(args.query), limit: args.limit, minPriceToman, maxPriceToman, sort: args.sort };
  },
  providers,
  sandboxPrice: { kind: 'flat', credits: 230n },
};
