import type { Dispatcher } from 'undici';
import { haversineMetres } from '../../geo';
import { asNumber, asRecord, asString, createUpstream, tryJson, upstreamFailure, resultList } from '../../upstream';
import type { MapsProvider, Place, ToolConfig } from '../../types';
import type { SvcError } from '../../../errors';

/**
 * maps_search_places through Neshan's search API (`GET /v1/search?term&lat&lng`, `Api-Key`
 * header). Neshan gives no distance, so it is computed from the point. Shapes:
 * ../shared/ref/providers/neshan-search*.json and neshan-error-*.json.
 */
export function createNeshanProvider(config: ToolConfig, dispatcher: Dispatcher): MapsProvider {
  const upstream = createUpstream({
    provider: 'neshan',
    baseUrl: config.baseUrl,
    timeoutMs: config.timeoutMs,
    dispatcher,
  });
  return {
    name: 'neshan',
    sandbox: false,
    async run(args, signal) {
      const response = await upstream.request({
        path: '/v1/search',
        query: { term: args.query, lat: args.latitude, lng: args.longitude },
        headers: { 'api-key': config.apiKey ?? '' },
        signal,
      });
      const body = asRecord(response.status === 200 ? upstream.json(response) : tryJson(response.text));
      // Neshan's errors come as HTTP 470-485 with {status:"ERROR",code,message}; the same
      // envelope inside a 200 is treated alike.
      if (response.status !== 200 || body['status'] === 'ERROR') {
        throw neshanFailure(
          asNumber(body['code']) ?? response.status,
          asString(body['message']) || response.text.slice(0, 200),
        );
      }
      const places: Place[] = [];
      for (const raw of resultList('neshan', body['items'], 'items')) {
        const item = asRecord(raw);
        const location = asRecord(item['location']);
        const longitude = asNumber(location['x']);
        const latitude = asNumber(location['y']);
        if (latitude === undefined || longitude === undefined) continue;
        places.push({
          name: asString(item['title']),
          address: asString(item['address']) || asString(item['region']),
          // v1 gives a Persian `type` ("داروخانه"), v3 an English slug; either beats the coarse
          // `category` ("place", "municipal").
          category: asString(item['type']) || asString(item['category']),
          latitude,
          longitude,
          distance_m: haversineMetres(args.latitude, args.longitude, latitude, longitude),
        });
      }
      places.sort((a, b) => a.distance_m - b.distance_m);
      return { items: places.slice(0, args.limit) };
    },
  };
}

const MISCONFIGURED =
  'The maps service is misconfigured on this server (its API key was refused); place search is unavailable for now';

function neshanFailure(code: number, message: string): SvcError {
  const detail = `neshan: error ${code}: ${message}`;
  switch (code) {
    case 470:
      return upstreamFailure(
        'upstream_error',
        'The maps service could not read the search point; check latitude and longitude',
        detail,
      );
    case 480: // key not found or invalid
    case 483: // key type does not match the service
    case 484: // key scope (ip, domain, bundle) does not match
    case 485: // key not enabled for this service
      return upstreamFailure('upstream_error', MISCONFIGURED, detail);
    case 481: // quota used up
      return upstreamFailure(
        'upstream_unavailable',
        'The maps service quota of this server is used up; try again later',
        detail,
      );
    case 482: // rate limit
      return upstreamFailure(
        'upstream_unavailable',
        'The maps service is rate-limiting this server; try again in a minute',
        detail,
      );
    default:
      return upstreamFailure(
        code >= 500 ? 'upstream_unavailable' : 'upstream_error',
        'The maps service could not run this search; try again in a moment',
        detail,
      );
  }
}
