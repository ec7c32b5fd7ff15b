/** Where a search point defaults to: central Tehran. */
export const TEHRAN = { latitude: 35.6892, longitude: 51.389 } as const;

/**
 * Iran's bounding box, rounded outwards a little: only the schema's coarse first check (and what
 * clients see as the coordinates' ranges). The real test is the border polygon below.
 */
export const IRAN_BOUNDS = { minLatitude: 25, maxLatitude: 39.8, minLongitude: 44, maxLongitude: 63.4 } as const;

/**
 * Iran's borders, simplified to [latitude, longitude] vertices (a few kilometres of error), drawn
 * a little outside the land border so border towns stay in, and through the middle of the Persian
 * Gulf and the Strait of Hormuz so Iran's islands (Kish, Qeshm, Hormuz, Lavan) are in while the
 * Arab shore (Kuwait, Doha, Dubai, Ras al-Khaimah, Musandam) is out. The Caspian edge runs
 * offshore. Neighbouring cities close to the border (Basra, Sulaymaniyah, Herat, Ashgabat, Lankaran)
 * are outside.
 */
export const IRAN_BORDER: readonly (readonly [number, number])[] = [
  [39.78, 44.8],
  [39.4, 44.0],
  [38.3, 44.25],
  [37.15, 44.78],
  [36.6, 45.05],
  [35.95, 45.45],
  [35.55, 46.0],
  [35.1, 46.15],
  [34.6, 45.55],
  [34.4, 45.5],
  [33.6, 45.9],
  [33.0, 46.15],
  [32.45, 47.2],
  [31.95, 47.65],
  [31.0, 47.68],
  [30.45, 48.02],
  [29.95, 48.55],
  [29.1, 49.3],
  [27.9, 50.4],
  [27.0, 51.7],
  [26.6, 52.6],
  [26.2, 53.7],
  [25.75, 54.8],
  [25.7, 55.1],
  [26.3, 56.1],
  [26.55, 56.55],
  [25.4, 57.3],
  [25.1, 58.5],
  [25.0, 60.5],
  [25.05, 61.65],
  [26.2, 62.3],
  [26.65, 63.25],
  [27.2, 63.3],
  [27.9, 62.8],
  [28.5, 61.8],
  [29.0, 61.55],
  [29.86, 60.87],
  [31.0, 61.8],
  [31.4, 61.75],
  [31.6, 60.85],
  [33.0, 60.6],
  [34.5, 60.9],
  [35.6, 61.27],
  [36.65, 61.15],
  [37.05, 60.05],
  [37.55, 59.3],
  [37.7, 58.6],
  [37.75, 58.0],
  [38.1, 57.2],
  [37.52, 55.5],
  [37.5, 54.7],
  [37.35, 53.9],
  [38.0, 51.0],
  [38.45, 48.95],
  [38.42, 48.45],
  [38.85, 48.0],
  [39.35, 48.37],
  [39.7, 47.85],
  [39.15, 46.95],
  [38.87, 46.15],
  [38.95, 45.6],
  [39.3, 45.05],
];

/** True when the point lies inside Iran's border polygon (even-odd ray casting). */
export function isInIran(latitude: number, longitude: number): boolean {
  let inside = false;
  for (let i = 0, j = IRAN_BORDER.length - 1; i < IRAN_BORDER.length; j = i++) {
    const [latI, lonI] = IRAN_BORDER[i] as readonly [number, number];
    const [latJ, lonJ] = IRAN_BORDER[j] as readonly [number, number];
    if (latI > latitude !== latJ > latitude) {
      const crossing = lonI + ((latitude - latI) / (latJ - latI)) * (lonJ - lonI);
      if (longitude < crossing) inside = !inside;
    }
  }
  return inside;
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
