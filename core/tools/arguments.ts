import { invalidArgument } from '../errors';
import { MAPS_SEARCH_PLACES, SHOPPING_SEARCH, WEB_SEARCH } from './definitions';
import { isInIran, TEHRAN } from './geo';
import type { MapsSearchArgs, ShoppingSearchArgs, ShoppingSort, WebSearchArgs } from './types';
import { validateArguments } from './validate';

// Arabic yeh, alef maksura and kaf, as Arabic keyboard layouts type them: Iranian maps and shops
// index the Persian ی and ک, so the Arabic letters miss most matches. web_search keeps the query
// as typed: the web holds Arabic text too, where the Arabic letters are right.
const ARABIC_TO_PERSIAN: Readonly<Record<string, string>> = { ي: 'ی', ى: 'ی', ك: 'ک' };

/** Trims a query and writes Arabic yeh/kaf as the Persian letters every Iranian source uses. */
export function normalizeQuery(query: string): string {
  return query.trim().replace(/[يىك]/g, (c) => ARABIC_TO_PERSIAN[c] ?? c);
}

export function parseWebSearchArgs(raw: unknown): WebSearchArgs {
  const args = validateArguments(WEB_SEARCH, raw);
  return { query: (args['query'] as string).trim(), maxResults: args['max_results'] as number };
}

export function parseMapsArgs(raw: unknown): MapsSearchArgs {
  // Given alone, one coordinate would be paired with Tehran's other one: a point nobody meant.
  if (raw !== null && typeof raw === 'object' && !Array.isArray(raw)) {
    const given = raw as Record<string, unknown>;
    if ((given['latitude'] === undefined) !== (given['longitude'] === undefined)) {
      const missing = given['latitude'] === undefined ? 'latitude' : 'longitude';
      throw invalidArgument(
        missing,
        'Arguments "latitude" and "longitude" must be given together (or both left out for central Tehran)',
      );
    }
  }
  let args: Record<string, unknown>;
  try {
    args = validateArguments(MAPS_SEARCH_PLACES, raw);
  } catch (error) {
    const param = (error as { param?: string }).param;
    const value = param === undefined ? undefined : (raw as Record<string, unknown>)[param];
    // A finite number that failed the schema can only be out of the box; say so in words.
    if ((param === 'latitude' || param === 'longitude') && typeof value === 'number' && Number.isFinite(value))
      throw outsideIran(param);
    throw error;
  }
  const latitude = args['latitude'] as number;
  const longitude = args['longitude'] as number;
  if (!isInIran(latitude, longitude)) throw outsideIran('latitude');
  return { query: normalizeQuery(args['query'] as string), latitude, longitude, limit: args['limit'] as number };
}

function outsideIran(param: string): Error {
  return invalidArgument(
    param,
    `The search point must be a latitude/longitude pair inside Iran's borders (this tool searches places in Iran only); ` +
      `leave both out to search around central Tehran (${TEHRAN.latitude}, ${TEHRAN.longitude})`,
  );
}

export function parseShoppingArgs(raw: unknown): ShoppingSearchArgs {
  const args = validateArguments(SHOPPING_SEARCH, raw);
  const minPriceToman = args['min_price_toman'] as number | undefined;
  const maxPriceToman = args['max_price_toman'] as number | undefined;
  if (minPriceToman !== undefined && maxPriceToman !== undefined && minPriceToman > maxPriceToman) {
    throw invalidArgument(
      'min_price_toman',
      `Argument "min_price_toman" (${minPriceToman}) must not exceed "max_price_toman" (${maxPriceToman})`,
    );
  }
  return {
    query: normalizeQuery(args['query'] as string),
    limit: args['limit'] as number,
    minPriceToman,
    maxPriceToman,
    sort: args['sort'] as ShoppingSort,
  };
}
