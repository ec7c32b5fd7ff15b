import { z } from 'zod';
import { invalidArgument, isSvcError } from '../errors';
import { liveProviders, outputSchema, svgIcon, type ToolProviderKind, type ToolSpec } from './definitions';
import { IRAN_BOUNDS, isInIran, TEHRAN } from './geo';
import { createNeshanProvider } from './providers/neshan';
import { createNominatimProvider } from './providers/nominatim';
import { createSandboxMaps } from './providers/sandbox-tools';
import { normalizeQuery, parseArguments, queryArgument } from './schema';
import type { MapsSearchArgs, Place } from './types';

type Kind = ToolProviderKind<MapsSearchArgs, Place>;

/** `tools.maps_search_places.provider`: the offline sandbox (the default), Neshan or Nominatim. */
const providers: { readonly sandbox: Kind } & Readonly<Record<string, Kind>> = {
  sandbox: { defaultBaseUrl: '', needsApiKey: false, create: createSandboxMaps },
  neshan: { defaultBaseUrl: 'https://api.neshan.org', needsApiKey: true, create: createNeshanProvider },
  nominatim: {
    defaultBaseUrl: 'https://nominatim.openstreetmap.org',
    needsApiKey: false,
    create: createNominatimProvider,
  },
};

const input = z.strictObject({
  query: queryArgument(200, 'What to look for, e.g. "داروخانه" or "pharmacy".'),
  latitude: z
    .number()
    .min(IRAN_BOUNDS.minLatitude)
    .max(IRAN_BOUNDS.maxLatitude)
    .default(TEHRAN.latitude)
    .describe('Latitude of the search point; must lie in Iran. Give latitude and longitude together.'),
  longitude: z
    .number()
    .min(IRAN_BOUNDS.minLongitude)
    .max(IRAN_BOUNDS.maxLongitude)
    .default(TEHRAN.longitude)
    .describe('Longitude of the search point; must lie in Iran.'),
  limit: z.int().min(1).max(30).default(10).describe('How many places to return (1-30, default 10).'),
  radius_m: z
    .int()
    .min(100)
    .max(100_000)
    .optional()
    .describe(
      'Only places within this many metres of the point (100-100000); default: whatever the provider finds nearby.',
    ),
});

const place = z.strictObject({
  name: z.string(),
  address: z.string(),
  category: z.string(),
  latitude: z.number(),
  longitude: z.number(),
  distance_m: z.int().min(0).describe('Straight-line distance from the search point, in metres.'),
});

function outsideIran(param: string): Error {
  return invalidArgument(
    param,
    `The search point must be a latitude/longitude pair inside Iran's borders (this tool searches places in Iran only); ` +
      `leave both out to search around central Tehran (${TEHRAN.latitude}, ${TEHRAN.longitude})`,
  );
}

/** maps_search_places: places in Iran near a point, nearest first. */
export const MAPS_SEARCH_PLACES: ToolSpec<'maps_search_places', MapsSearchArgs, Place> = {
  name: 'maps_search_places',
  title: 'Search places in Iran',
  summary: 'places in Iran, nearest first',
  labels: { en: 'Places search (maps)', fa: 'جست‌وجوی مکان‌ها (نقشه)' },
  description:
    'Finds places (shops, restaurants, pharmacies, streets, landmarks) in Iran near a point, nearest first, ' +
    'with address, category, coordinates and distance in metres. The point defaults to central Tehran ' +
    `(${TEHRAN.latitude}, ${TEHRAN.longitude}); radius_m keeps only places within that distance of it.`,
  input,
  output: outputSchema(liveProviders(providers), place, {
    center: z.strictObject({ latitude: z.number(), longitude: z.number() }),
  }),
  icons: [svgIcon('<path d="M21 10c0 7-9 13-9 13S3 17 3 10a9 9 0 0 1 18 0z"/><circle cx="12" cy="10" r="3"/>')],
  parse(raw) {
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
    let args: z.output<typeof input>;
    try {
      args = parseArguments('maps_search_places', input, raw);
    } catch (error) {
      const param = isSvcError(error) ? error.param : undefined;
      const value = param === undefined ? undefined : (raw as Record<string, unknown>)[param];
      // A finite number that failed the schema can only be out of the box; say so in words.
      if ((param === 'latitude' || param === 'longitude') && typeof value === 'number' && Number.isFinite(value))
        throw outsideIran(param);
      throw error;
    }
    if (!isInIran(args.latitude, args.longitude)) throw outsideIran('latitude');
    return {
      query: normalizeQuery(args.query),
      latitude: args.latitude,
      longitude: args.longitude,
      limit: args.limit,
      radiusM: args.radius_m,
    };
  },
  refine(items, args) {
    const radius = args.radiusM;
    return radius === undefined ? [...items] : items.filter((p) => p.distance_m <= radius);
  },
  extra: (args) => ({ center: { latitude: args.latitude, longitude: args.longitude } }),
  providers,
  sandboxPrice: { kind: 'flat', credits: 460n },
};
