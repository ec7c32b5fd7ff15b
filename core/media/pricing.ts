import type { MediaPrice, ModelConfig } from '../config/types';
import { invalidArgument } from '../errors';

/*
 * The price forms of SPEC §14 in integer credits. Every rate rounds up to a whole credit per call
 * (as chat does), and a priced call that did any work costs at least 1.
 */

/** ceil(units × rate / per), at least 1 when both are positive. */
export function ratedCost(units: bigint, rate: bigint, per: bigint): bigint {
  if (units <= 0n || rate <= 0n) return 0n;
  return (units * rate + per - 1n) / per;
}

/** A search is up to 100 documents per query (Cohere's unit). */
export const DOCUMENTS_PER_SEARCH = 100;

export function searchesOf(documents: number): number {
  return Math.max(1, Math.ceil(documents / DOCUMENTS_PER_SEARCH));
}

/** Unicode code points of `text` (what speech is priced by). */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

/** Seconds billed for a duration: whole seconds, rounded up. */
export function billedSeconds(seconds: number): bigint {
  return BigInt(Math.ceil(Math.max(0, seconds) - 1e-9));
}

function split(key: string): [string, string] {
  const at = key.indexOf('/');
  return [key.slice(0, at), key.slice(at + 1)];
}

const open = (value: string | undefined): boolean => value === undefined || value === '' || value === 'auto';

/**
 * The per-image prices a request may be charged: the entries matching the requested size and
 * quality (absent or `auto` matches every entry; an entry's own `auto` matches every request).
 * None is a 400 naming the parameter the model does not offer.
 */
export function imagePrices(
  model: Pick<ModelConfig, 'id'>,
  perImage: ReadonlyMap<string, bigint>,
  size: string | undefined,
  quality: string | undefined,
): bigint[] {
  return imagePriceEntries(model, perImage, size, quality).map(([, credits]) => credits);
}

/** `imagePrices` with each price's `SIZE/QUALITY` entry. */
export function imagePriceEntries(
  model: Pick<ModelConfig, 'id'>,
  perImage: ReadonlyMap<string, bigint>,
  size: string | undefined,
  quality: string | undefined,
): [string, bigint][] {
  const entries = [...perImage].map(([key, credits]) => ({ key, credits, parts: split(key) }));
  const sized = entries.filter(({ parts: [s] }) => open(size) || s === 'auto' || s === size);
  if (sized.length === 0) {
    const offered = [...new Set(entries.map(({ parts: [s] }) => s))].join(', ');
    throw invalidArgument(
      'size',
      `Invalid 'size': the model '${model.id}' does not offer ${size}; it offers ${offered}.`,
    );
  }
  const both = sized.filter(({ parts: [, q] }) => open(quality) || q === 'auto' || q === quality);
  if (both.length === 0) {
    const offered = [...new Set(sized.map(({ parts: [, q] }) => q))].join(', ');
    throw invalidArgument(
      'quality',
      `Invalid 'quality': the model '${model.id}' does not offer ${quality}${open(size) ? '' : ` at ${size}`}; it offers ${offered}.`,
    );
  }
  return both.map(({ key, credits }) => [key, credits]);
}

/** The dearest of `prices`. */
export function dearest(prices: readonly bigint[]): bigint {
  return prices.reduce((a, b) => (b > a ? b : a), 0n);
}

/** The dearest of `entries` (the first of equals), with its `SIZE/QUALITY`. */
export function dearestEntry(entries: readonly [string, bigint][]): { key: string; credits: bigint } {
  let best = { key: '', credits: 0n };
  for (const [key, credits] of entries) if (best.key === '' || credits > best.credits) best = { key, credits };
  return best;
}

/** How a price form reads in words (logs, `svc config check`). */
export function describeMediaPrice(price: MediaPrice): string {
  switch (price.form) {
    case 'per_image':
      return [...price.perImage].map(([key, credits]) => `${credits} per image ${key}`).join(', ');
    case 'per_1m_characters':
      return `${price.credits} per 1M characters`;
    case 'per_minute':
      return `${price.credits} per minute (by the second)`;
    case 'per_search':
      return `${price.credits} per search`;
    case 'free':
      return 'free';
    case 'tokens':
      return 'by tokens';
  }
}

/** One price of a media model in its user's words: the credits and what they buy. */
export interface MediaPriceLine {
  readonly credits: bigint;
  /** "per image, 1024×1024 high", "per minute", "per 1M characters", "per search". */
  readonly unit: string;
}

/**
 * A media model's unit prices as a price list shows them (the console's Prices page, `svc price
 * list`); empty for a token-priced model (its token prices say it) and a free one.
 */
export function mediaPriceLines(price: MediaPrice): MediaPriceLine[] {
  switch (price.form) {
    case 'per_image':
      return [...price.perImage].map(([key, credits]) => {
        const [size, quality] = split(key);
        const words = [size === 'auto' ? 'any size' : size.replace('x', '×'), quality === 'auto' ? '' : quality];
        return { credits, unit: `per image, ${words.filter((w) => w !== '').join(' ')}` };
      });
    case 'per_1m_characters':
      return [{ credits: price.credits, unit: 'per 1M characters' }];
    case 'per_minute':
      return [{ credits: price.credits, unit: 'per minute' }];
    case 'per_search':
      return [{ credits: price.credits, unit: 'per search' }];
    case 'free':
    case 'tokens':
      return [];
  }
}
