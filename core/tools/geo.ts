/** Where a search point defaults to: central Tehran. */
export const TEHRAN = { latitude: 35.6892, longitude: 51.389 } as const;

/**
 * Iran's bounding box, rounded outwards a little so border towns stay inside. A box is a coarse
 * test (it also covers slivers of neighbouring countries), which is all a search point needs.
 */
export const IRAN_BOUNDS = { minLatitude: 25, maxLatitude: 39.8, minLongitude: 44, maxLongitude: 63.4 } as const;

export function isInIran(latitude: number, longitude: number): boolean {
  return (
    latitude >= IRAN_BOUNDS.minLatitude &&
    latitude <= IRAN_BOUNDS.maxLatitude &&
    longitude >= IRAN_BOUNDS.minLongitude &&
    longitude <= IRAN_BOUNDS.maxLongitude
  );
}

const EARTH_RADIUS_M = 6_371_008.8;

/** Great-circle distance in metres (haversine), rounded to the metre. */
export function haversineMetres(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const rad = Math.PI / 180;
  const dLat = (lat2 - lat1) * rad;
  const dLon = (lon2 - lon1) * rad;
  const a = Math.sin(dLat / 2) ** 2 + Math.cos(lat1 * rad) * Math.cos(lat2 * rad) * Math.sin(dLon / 2) ** 2;
  return Math.round(2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(a))));
}
