import type { Product, ShoppingSearchArgs } from './types';

/** A price as the tool reports it: a positive integer number of toman, or null. Never 0. */
export function tomanOrNull(value: number | undefined): number | null {
  if (value === undefined || !Number.isFinite(value)) return null;
  const toman = Math.round(value);
  return toman >= 1 ? toman : null;
}

/**
 * Applies the price bounds and the order locally, on top of whatever the shop did, so every
 * provider honours them the same way. With a bound set, products without a price are left out.
 */
export function refineProducts(products: readonly Product[], args: ShoppingSearchArgs): Product[] {
  const { minPriceToman: min, maxPriceToman: max } = args;
  let result = products.filter((p) => {
    if (min === undefined && max === undefined) return true;
    if (p.price_toman === null) return false;
    return (min === undefined || p.price_toman >= min) && (max === undefined || p.price_toman <= max);
  });
  if (args.sort !== 'relevance') {
    const sign = args.sort === 'price_asc' ? 1 : -1;
    // Unpriced products go last either way: they answer neither "cheapest" nor "dearest".
    result = [...result].sort((a, b) => {
      if (a.price_toman === null || b.price_toman === null)
        return (a.price_toman === null ? 1 : 0) - (b.price_toman === null ? 1 : 0);
      return sign * (a.price_toman - b.price_toman);
    });
  }
  return result.slice(0, args.limit);
}
