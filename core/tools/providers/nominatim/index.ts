import type { Dispatcher } from 'undici';
import { haversineMetres } from '../../geo';
import { asNumber, asRecord, asString, createUpstream, tryJson, upstreamFailure } from '../../upstream';
import type { MapsProvider, Place, ToolConfig } from '../../types';

// Half the side of the search box around the point, in degrees (about 28 km north-south).
const VIEWBOX_HALF_DEG = 0.25;
// Metres in a degree of latitude (and of longitude at the equator).
const METRES_PER_DEGREE = 111_320;

/**
 * maps_search_places through a (self-hosted) Nominatim: `GET /search?format=jsonv2`, limited to
 * Iran (`countrycodes=ir`) and to a box around the point (`viewbox`, `bounded=1`), nearest first.
 * Shapes: ../shared/ref/providers/nominatim-*.json.
 */
export function createNominatimProvider(config: ToolConfig, dispatcher: Dispatcher): MapsProvider {
  const upstream = createUpstream({
    provider: 'nominatim',
    baseUrl: config.baseUrl,
    timeoutMs: config.timeoutMs,
    dispatcher,
  });
  return {
    name: 'nominatim',
    sandbox: false,
    async run(args, signal) {
      const { latitude: lat, longitude: lon } = args;
      // The search box is the radius when one is given (the service then drops the box's corners).
      const halfLat = args.radiusM === undefined ? VIEWBOX_HALF_DEG : args.radiusM / METRES_PER_DEGREE;
      const halfLon =
        args.radiusM === undefined
          ? VIEWBOX_HALF_DEG
          : args.radiusM / (METRES_PER_DEGREE * Math.max(0.1, Math.cos((lat * Math.PI) / 180)));
      const response = await upstream.request({
        path: '/search',
        query: {
          q: args.query,
          format: 'jsonv2',
          countrycodes: 'ir',
          viewbox: [lon - halfLon, lat + halfLat, lon + halfLon, lat - halfLat].map((n) => n.toFixed(5)).join(','),
          bounded: 1,
          limit: args.limit,
          'accept-language': 'fa',
        },
        signal,
      });
      if (response.status !== 200) {
        const error = asRecord(tryJson(response.text))['error'];
        const message =
          typeof error === 'string' ? error : asString(asRecord(error)['message']) || response.text.slice(0, 200);
        throw upstreamFailure(
          response.status === 429 || response.status >= 500 ? 'upstream_unavailable' : 'upstream_error',
          response.status === 429
            ? 'The maps service is rate-limiting this server; try again in a minute'
            : 'The maps service could not run this search; try again in a moment',
          `nominatim: HTTP ${response.status}: ${message}`,
        );
      }
      const places: Place[] = [];
      const body = upstream.json(response);
      // Search answers an array; an object here is an error envelope (nominatim-reverse-error.json).
      if (!Array.isArray(body)) {
        const error = asRecord(body)['error'];
        throw upstreamFailure(
          'upstream_error',
          'The maps service could not run this search; try again in a moment',
          `nominatim: HTTP 200 without a result list: ${typeof error === 'string' ? error : JSON.stringify(body).slice(0, 200)}`,
        );
      }
      for (const raw of body) {
        const item = asRecord(raw);
        const latitude = asNumber(item['lat']);
        const longitude = asNumber(item['lon']);
        if (latitude === undefined || longitude === undefined) continue;
        const displayName = asString(item['display_name']);
        places.push({
          name: asString(item['name']) || displayName.split(',')[0]?.trim() || displayName,
          address: displayName,
          category: asString(item['type']) || asString(item['category']),
          latitude,
          longitude,
          distance_m: haversineMetres(lat, lon, latitude, longitude),
        });
      }
      places.sort((a, b) => a.distance_m - b.distance_m);
      return { items: places.slice(0, args.limit) };
    },
  };
}
