import { creditsFromUsd, type Decimal } from './decimal';
import type { DollarPricing, MediaPrice, ModelKind, TokenPrice, UnitDollars, UsdPrice } from './types';

// A tariff's keys, defaults and dollar pricing: read by the configuration (price_usd), by
// core/chat/pricing.ts (what a call costs) and by core/pricing/ (svc price list), so it lives
// below all three.

/** The cache-read rate; absent: the input rate. */
export const readRate = (price: TokenPrice): bigint => price.cachedInputPer1m ?? price.inputPer1m;
/** The five-minute (and OpenAI-family) write rate; absent: the input rate. */
export const writeRate = (price: TokenPrice): bigint => price.cacheWritePer1m ?? price.inputPer1m;
/** The one-hour write rate; absent: the five-minute write rate. */
export const write1hRate = (price: TokenPrice): bigint => price.cacheWrite1hPer1m ?? writeRate(price);

/** A token-billed image model's input image tokens (SPEC §14); absent: the input rate. */
export const imageInputRate = (price: TokenPrice): bigint => price.imageInputPer1m ?? price.inputPer1m;

/** The price keys of a token tariff, in the order the file and `svc price list` show them. */
export const PRICE_KEYS = [
  ['input_per_1m', 'inputPer1m'],
  ['output_per_1m', 'outputPer1m'],
  ['cached_input_per_1m', 'cachedInputPer1m'],
  ['cache_write_per_1m', 'cacheWritePer1m'],
  ['cache_write_1h_per_1m', 'cacheWrite1hPer1m'],
  // Image models only (SPEC §14): the input images of a token-billed image model.
  ['image_input_per_1m', 'imageInputPer1m'],
] as const satisfies readonly (readonly [string, keyof TokenPrice & keyof UsdPrice])[];

/**
 * The credit price of a model priced from the dollar (SPEC §15): each key its `price:` gives in
 * credits, else ceil(dollar price × rate × (1 + margin)); keys given in neither stay absent (and
 * default as §6 says). `output_per_1m` absent everywhere (an embedding model) is 0.
 */
export function dollarPrice(dollar: DollarPricing, rate: bigint, margin: Decimal): TokenPrice {
  const out: { -readonly [K in keyof TokenPrice]?: bigint } = {};
  for (const [, key] of PRICE_KEYS) {
    const credits = dollar.credits[key];
    const usd = dollar.usd[key];
    if (credits !== undefined) out[key] = credits;
    else if (usd !== undefined) out[key] = creditsFromUsd(usd, rate, margin);
  }
  return { ...out, inputPer1m: out.inputPer1m ?? 0n, outputPer1m: out.outputPer1m ?? 0n };
}

/**
 * A media model's unit price from the dollar (SPEC §14, §15): each entry `price:` gives in credits
 * as given, the others ceil(usd × rate × (1 + margin)) per image, per 1M characters, per minute or
 * per search. Per image, the entries in the file's order: price_usd's, then those in credits only.
 */
export function unitPrice(unit: UnitDollars, rate: bigint, margin: Decimal): MediaPrice {
  const prices = new Map<string, bigint>();
  for (const [key, usd] of unit.usd) prices.set(key, unit.credits.get(key) ?? creditsFromUsd(usd, rate, margin));
  for (const [key, credits] of unit.credits) if (!prices.has(key)) prices.set(key, credits);
  if (unit.form === 'per_image') return { form: 'per_image', perImage: prices };
  return { form: unit.form, credits: prices.get(unit.form) ?? 0n };
}

/** A tariff's YAML key. */
export type TariffKey = (typeof PRICE_KEYS)[number][0];

/** The key only an image model's tariff has (SPEC §14). */
export const IMAGE_INPUT_KEY = 'image_input_per_1m';

/** The price keys a model of `kind` takes: every kind the cache keys, image models also `image_input_per_1m`. */
export function tariffKeys(kind: ModelKind = 'chat'): readonly (typeof PRICE_KEYS)[number][] {
  return kind === 'image' ? PRICE_KEYS : PRICE_KEYS.filter(([name]) => name !== IMAGE_INPUT_KEY);
}

/**
 * Every key of a `kind` model's tariff with its §6/§13/§14 default filled in (what `svc price
 * list` and `svc config check` show): `image_input_per_1m` on image models only.
 */
export function fullTariff(price: TokenPrice, kind: ModelKind = 'chat'): Partial<Record<TariffKey, bigint>> {
  return {
    input_per_1m: price.inputPer1m,
    output_per_1m: price.outputPer1m,
    cached_input_per_1m: readRate(price),
    cache_write_per_1m: writeRate(price),
    cache_write_1h_per_1m: write1hRate(price),
    ...(kind === 'image' ? { image_input_per_1m: imageInputRate(price) } : {}),
  };
}
