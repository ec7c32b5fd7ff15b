import { IRAN_BOUNDS, TEHRAN } from './geo';
import type { ToolName } from './types';

/** A JSON Schema object, as sent to clients in `tools/list`. */
export type JsonSchema = { readonly [key: string]: unknown };

export interface ToolDefinitionSpec {
  readonly name: ToolName;
  readonly title: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
}

// Fields every tool's structured content carries, so a model (and an operator) can always tell
// which upstream answered and whether the data is the offline sandbox set.
function envelope(providers: readonly string[]): Record<string, unknown> {
  return {
    query: { type: 'string', description: 'The query as searched.' },
    provider: {
      type: 'string',
      description: `The upstream that answered: ${providers.map((p) => `"${p}"`).join(', ')}, or "sandbox".`,
    },
    sandbox: {
      type: 'boolean',
      description: 'True when the results come from the offline sandbox dataset, not a live source.',
    },
    notice: { type: 'string', description: 'Present on sandbox results and when nothing was found.' },
  };
}

function output(
  providers: readonly string[],
  itemProperties: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): JsonSchema {
  return {
    type: 'object',
    properties: {
      ...envelope(providers),
      ...extra,
      results: {
        type: 'array',
        items: {
          type: 'object',
          properties: itemProperties,
          required: Object.keys(itemProperties),
          additionalProperties: false,
        },
      },
    },
    required: ['query', 'provider', 'sandbox', 'results'],
    additionalProperties: false,
  };
}

const query = (max: number, what: string): JsonSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: max,
  description: what,
});

export const WEB_SEARCH: ToolDefinitionSpec = {
  name: 'web_search',
  title: 'Web search',
  description: 'Searches the web and returns the most relevant pages as title, URL and a short summary.',
  inputSchema: {
    type: 'object',
    properties: {
      query: query(400, 'What to search for, in any language.'),
      max_results: {
        type: 'integer',
        minimum: 1,
        maximum: 20,
        default: 5,
        description: 'How many results to return at most (1-20, default 5); a provider may find fewer.',
      },
    },
    required: ['query'],
    additionalProperties: false,
  },
  outputSchema: output(['perplexity', 'searxng'], {
    title: { type: 'string' },
    url: { type: 'string' },
    summary: { type: 'string' },
    date: {
      type: ['string', 'null'],
      description: "The page's publication date (YYYY-MM-DD) when the search provider gives one, else null.",
    },
  }),
};

export const MAPS_SEARCH_PLACES: ToolDefinitionSpec = {
  name: 'maps_search_places',
  title: 'Search places in Iran',
  description:
    'Finds places (shops, restaurants, pharmacies, streets, landmarks) in Iran near a point, nearest first, ' +
    `with address, category, coordinates and distance in metres. The point defaults to central Tehran (${TEHRAN.latitude}, ${TEHRAN.longitude}).`,
  inputSchema: {
    type: 'object',
    properties: {
      query: query(200, 'What to look for, e.g. "داروخانه" or "pharmacy".'),
      latitude: {
        type: 'number',
        minimum: IRAN_BOUNDS.minLatitude,
        maximum: IRAN_BOUNDS.maxLatitude,
        default: TEHRAN.latitude,
        description: 'Latitude of the search point; must lie in Iran. Give latitude and longitude together.',
      },
      longitude: {
        type: 'number',
        minimum: IRAN_BOUNDS.minLongitude,
        maximum: IRAN_BOUNDS.maxLongitude,
        default: TEHRAN.longitude,
        description: 'Longitude of the search point; must lie in Iran.',
      },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 30,
        default: 10,
        description: 'How many places to return (1-30, default 10).',
      },
    },
    required: ['query'],
    additionalProperties: false,
  },
  outputSchema: output(
    ['neshan', 'nominatim'],
    {
      name: { type: 'string' },
      address: { type: 'string' },
      category: { type: 'string' },
      latitude: { type: 'number' },
      longitude: { type: 'number' },
      distance_m: {
        type: 'integer',
        minimum: 0,
        description: 'Straight-line distance from the search point, in metres.',
      },
    },
    {
      center: {
        type: 'object',
        properties: { latitude: { type: 'number' }, longitude: { type: 'number' } },
        required: ['latitude', 'longitude'],
        additionalProperties: false,
      },
    },
  ),
};

export const SHOPPING_SEARCH: ToolDefinitionSpec = {
  name: 'shopping_search',
  title: 'Shopping search (Iran)',
  description:
    'Searches Iranian online shops for products and returns title, price in toman, store, product URL and image. ' +
    'price_toman is null when the shop shows no price; when several shops offer a product, price_is_lowest says ' +
    'the price is the lowest of them and offers how many there are.',
  inputSchema: {
    type: 'object',
    properties: {
      query: query(200, 'The product to look for, e.g. "گوشی سامسونگ A55".'),
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: 24,
        default: 10,
        description: 'How many products to return (1-24, default 10).',
      },
      min_price_toman: { type: 'integer', minimum: 0, description: 'Lowest price, in toman.' },
      max_price_toman: { type: 'integer', minimum: 1, description: 'Highest price, in toman.' },
      sort: {
        type: 'string',
        enum: ['relevance', 'price_asc', 'price_desc'],
        default: 'relevance',
        description: 'Result order.',
      },
    },
    required: ['query'],
    additionalProperties: false,
  },
  outputSchema: output(['torob', 'digikala'], {
    title: { type: 'string' },
    price_toman: {
      type: ['integer', 'null'],
      minimum: 1,
      description: 'Price in toman; null when unavailable, never 0.',
    },
    store: {
      type: 'string',
      description: 'The shop; for a product compared across several shops (offers > 1), the comparison site.',
    },
    url: { type: 'string' },
    image_url: { type: ['string', 'null'] },
    offers: {
      type: ['integer', 'null'],
      minimum: 1,
      description: 'How many shops offer the product; null when the source does not say.',
    },
    price_is_lowest: {
      type: 'boolean',
      description: 'True when price_toman is the lowest of several offers ("from …"), not one shop\'s price.',
    },
  }),
};

/** The three tools, in the order `tools/list` shows them. */
export const TOOL_DEFINITIONS: readonly ToolDefinitionSpec[] = [WEB_SEARCH, MAPS_SEARCH_PLACES, SHOPPING_SEARCH];
