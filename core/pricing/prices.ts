import { dollarPrice, fullTariff, PRICE_KEYS, tariffKeys, unitPrice } from '../config/tariff';
import { Decimal } from '../config/decimal';
import type { MediaPrice, ModelConfig, ModelKind, SvcConfig, TokenPrice } from '../config/types';

/** The margin in force for a model priced from the dollar: the account's, else the model's, else the default. */
export function marginFor(model: ModelConfig, config: Pick<SvcConfig, 'pricing'>, accountMargin?: Decimal): Decimal {
  return accountMargin ?? model.dollar?.margin ?? config.pricing?.margin ?? Decimal.ZERO;
}

/**
 * The credit price a call of `model` is charged at (SPEC §15): a model priced in credits keeps its
 * price; one priced from the dollar is priced at `rate` (the rate in force; undefined: the file's,
 * as the configuration resolved it) and the margin in force.
 */
export function creditPriceAt(
  model: ModelConfig,
  config: Pick<SvcConfig, 'pricing'>,
  rate: bigint | undefined,
  accountMargin?: Decimal,
): TokenPrice {
  if (model.dollar === undefined || rate === undefined) return model.price;
  return dollarPrice(model.dollar, rate, marginFor(model, config, accountMargin));
}

/**
 * A media model's unit prices in force (SPEC §14, §15): priced from the dollar at `rate` and the
 * margin in force, or as configured; undefined for a model that is not a media model.
 */
export function mediaPriceAt(
  model: ModelConfig,
  config: Pick<SvcConfig, 'pricing'>,
  rate: bigint | undefined,
  accountMargin?: Decimal,
): MediaPrice | undefined {
  const unit = model.dollar?.unit;
  if (unit === undefined || rate === undefined) return model.mediaPrice;
  return unitPrice(unit, rate, marginFor(model, config, accountMargin));
}

/** `model` with the price a call admitted now pays: carried with the call to its settle. */
export function pricedModel(
  model: ModelConfig,
  config: Pick<SvcConfig, 'pricing'>,
  rate: bigint | undefined,
  accountMargin?: Decimal,
): ModelConfig {
  if (model.dollar === undefined || rate === undefined) return model;
  const margin = marginFor(model, config, accountMargin);
  const unit = model.dollar.unit;
  if (unit !== undefined) return { ...model, mediaPrice: unitPrice(unit, rate, margin), pricedAt: { rate, margin } };
  return { ...model, price: dollarPrice(model.dollar, rate, margin), pricedAt: { rate, margin } };
}

/** A price's JSON text: a number, or (per image) `{"SIZE/QUALITY": N, …}`. */
function jsonOf(value: bigint | Decimal | ReadonlyMap<string, bigint | Decimal>): string {
  if (typeof value === 'bigint' || value instanceof Decimal) return value.toString();
  return `{${[...value].map(([key, v]) => `${JSON.stringify(key)}:${v.toString()}`).join(',')}}`;
}

/** A media model's unit price as the YAML `price:` reads (`{"per_image": {…}}`, `{"per_minute": N}`, …); undefined for a token tariff. */
function unitJson(price: MediaPrice | undefined): string | undefined {
  if (price === undefined || price.form === 'tokens') return undefined;
  if (price.form === 'free') return '{}';
  return `{"${price.form}":${jsonOf(price.form === 'per_image' ? price.perImage : price.credits)}}`;
}

/**
 * What a call of `model` (as priced at its admission) is charged at, as its usage record keeps it:
 * `{"price": {credit prices, defaulted keys included}}`, and for a model priced from the dollar
 * also `"price_usd"`, `"rate"` and `"margin"` (SPEC §15).
 */
export function pricingJson(model: ModelConfig, imagePrice?: string): string {
  // A media model priced by its unit (SPEC §14): its unit prices, under the YAML's keys.
  const unit = unitJson(model.mediaPrice);
  const tariff = `{${Object.entries(fullTariff(model.price, model.kind))
    .map(([k, v]) => `"${k}":${v.toString()}`)
    .join(',')}}`;
  // An image call priced per image: the SIZE/QUALITY entry each image was charged at.
  const charged = imagePrice === undefined ? '' : `,"image_price":${JSON.stringify(imagePrice)}`;
  const price = `"price":${unit ?? tariff}`;
  if (model.dollar === undefined || model.pricedAt === undefined) return `{${price}${charged}}`;
  const dollars = model.dollar.unit;
  const usd =
    dollars !== undefined
      ? `"${dollars.form}":${jsonOf(dollars.form === 'per_image' ? dollars.usd : (dollars.usd.get(dollars.form) ?? Decimal.ZERO))}`
      : PRICE_KEYS.flatMap(([name, key]) => {
          const given = model.dollar?.usd[key];
          return given === undefined ? [] : [`"${name}":${given.toString()}`];
        }).join(',');
  return `{${price},"price_usd":{${usd}},"rate":${model.pricedAt.rate.toString()},"margin":${model.pricedAt.margin.toString()}${charged}}`;
}

export interface ModelPrices {
  readonly id: string;
  readonly kind: ModelKind;
  /** The margin in force (the model's own or the default); null for a model priced in credits. */
  readonly margin: Decimal | null;
  /**
   * The dollar prices as configured, by YAML key (a media model's per image as
   * `{"per_image": {"SIZE/QUALITY": USD}}`); null: priced in credits.
   */
  readonly priceUsd: Readonly<Record<string, Decimal | Readonly<Record<string, Decimal>>>> | null;
  /**
   * The credit prices in force, by YAML key, defaulted keys included; a media model priced per
   * image, character, minute or search as its `price:` reads (`{"per_image": {"SIZE/QUALITY": N}}`,
   * `{"per_minute": N}`, …; `{}` for a free one).
   */
  readonly price: Readonly<Record<string, bigint | Readonly<Record<string, bigint>>>>;
}

/** A media model's own price form as the YAML `price:` reads; undefined for a token tariff. */
function mediaPriceJson(media: MediaPrice | undefined): Record<string, bigint | Record<string, bigint>> | undefined {
  if (media === undefined || media.form === 'tokens') return undefined;
  if (media.form === 'free') return {};
  if (media.form === 'per_image') return { per_image: Object.fromEntries(media.perImage) };
  return { [media.form]: media.credits };
}

/** The dollar prices of `model` as configured, by YAML key; null: priced in credits. */
function usdJson(model: ModelConfig): Record<string, Decimal | Record<string, Decimal>> | null {
  const dollar = model.dollar;
  if (dollar === undefined) return null;
  const unit = dollar.unit;
  if (unit !== undefined)
    return unit.form === 'per_image'
      ? { per_image: Object.fromEntries(unit.usd) }
      : { [unit.form]: unit.usd.get(unit.form) ?? Decimal.ZERO };
  const usd: Record<string, Decimal> = {};
  for (const [name, key] of PRICE_KEYS) {
    const given = dollar.usd[key];
    if (given !== undefined) usd[name] = given;
  }
  return usd;
}

/** Every model's prices at `rate` (`svc price list`, SPEC §15). */
export function listPrices(config: Pick<SvcConfig, 'models' | 'pricing'>, rate: bigint | undefined): ModelPrices[] {
  return [...config.models.values()].map((model) => ({
    id: model.id,
    kind: model.kind ?? 'chat',
    margin: model.dollar === undefined ? null : marginFor(model, config),
    priceUsd: usdJson(model),
    price:
      mediaPriceJson(mediaPriceAt(model, config, rate)) ?? fullTariff(creditPriceAt(model, config, rate), model.kind),
  }));
}

/** One price of a model as a page or `svc price list` shows it: the YAML key, credits, and the dollar price behind it. */
export interface PriceLine {
  readonly key: string;
  readonly credits: bigint;
  /** The dollar price it is computed from; undefined: priced in credits. */
  readonly usd?: Decimal;
}

/** A model's prices in force, every kind (SPEC §6, §13, §14): what the console's pages show. */
export interface ModelPriceLines {
  readonly id: string;
  readonly kind: ModelKind;
  /** The margin in force; undefined for a model priced in credits. */
  readonly margin?: Decimal;
  readonly lines: readonly PriceLine[];
}

/**
 * Every model's prices in force at `rate` with `accountMargin` (an account's own, replacing the
 * model's and the default for dollar-priced models): a token tariff's every key (defaults filled
 * in), a media model's price form (per image by SIZE/QUALITY, per 1M characters, per minute, per
 * search; a free model has none).
 */
export function priceLines(
  config: Pick<SvcConfig, 'models' | 'pricing'>,
  rate: bigint | undefined,
  accountMargin?: Decimal,
): ModelPriceLines[] {
  return [...config.models.values()].map((model) => {
    const kind = model.kind ?? 'chat';
    const media = mediaPriceAt(model, config, rate, accountMargin);
    const margin =
      model.dollar === undefined || rate === undefined ? {} : { margin: marginFor(model, config, accountMargin) };
    if (media !== undefined && media.form !== 'tokens') {
      // Each unit price and (priced from the dollar, not given in credits) the dollar price behind it.
      const unit = model.dollar?.unit;
      const usdOf = (key: string): { usd?: Decimal } => {
        const usd = unit?.credits.has(key) === false ? unit.usd.get(key) : undefined;
        return usd === undefined ? {} : { usd };
      };
      const lines: PriceLine[] =
        media.form === 'per_image'
          ? [...media.perImage].map(([size, credits]) => ({ key: `per_image ${size}`, credits, ...usdOf(size) }))
          : media.form === 'free'
            ? []
            : [{ key: media.form, credits: media.credits, ...usdOf(media.form) }];
      return { id: model.id, kind, ...margin, lines };
    }
    const tariff = fullTariff(creditPriceAt(model, config, rate, accountMargin), kind);
    const lines = tariffKeys(kind).map(([name, key]) => {
      const usd = model.dollar?.credits[key] === undefined ? model.dollar?.usd[key] : undefined;
      return { key: name, credits: tariff[name] ?? 0n, ...(usd === undefined ? {} : { usd }) };
    });
    return { id: model.id, kind, ...margin, lines };
  });
}
