import { dollarPrice, fullTariff, PRICE_KEYS } from '../config/tariff';
import { Decimal } from '../config/decimal';
import type { ModelConfig, ModelKind, SvcConfig, TokenPrice } from '../config/types';

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

/** `model` with the price a call admitted now pays: carried with the call to its settle. */
export function pricedModel(
  model: ModelConfig,
  config: Pick<SvcConfig, 'pricing'>,
  rate: bigint | undefined,
  accountMargin?: Decimal,
): ModelConfig {
  if (model.dollar === undefined || rate === undefined) return model;
  const margin = marginFor(model, config, accountMargin);
  return { ...model, price: dollarPrice(model.dollar, rate, margin), pricedAt: { rate, margin } };
}

/**
 * What a call of `model` (as priced at its admission) is charged at, as its usage record keeps it:
 * `{"price": {credit prices, defaulted keys included}}`, and for a model priced from the dollar
 * also `"price_usd"`, `"rate"` and `"margin"` (SPEC §15).
 */
export function pricingJson(model: ModelConfig): string {
  const price = Object.entries(fullTariff(model.price))
    .map(([k, v]) => `"${k}":${v.toString()}`)
    .join(',');
  if (model.dollar === undefined || model.pricedAt === undefined) return `{"price":{${price}}}`;
  const usd = PRICE_KEYS.flatMap(([name, key]) => {
    const given = model.dollar?.usd[key];
    return given === undefined ? [] : [`"${name}":${given.toString()}`];
  }).join(',');
  return `{"price":{${price}},"price_usd":{${usd}},"rate":${model.pricedAt.rate.toString()},"margin":${model.pricedAt.margin.toString()}}`;
}

export interface ModelPrices {
  readonly id: string;
  readonly kind: ModelKind;
  /** The margin in force (the model's own or the default); null for a model priced in credits. */
  readonly margin: Decimal | null;
  /** The dollar prices as configured, by YAML key; null: priced in credits. */
  readonly priceUsd: Readonly<Record<string, Decimal>> | null;
  /** The credit prices in force, by YAML key, defaulted keys included. */
  readonly price: Readonly<Record<string, bigint>>;
}

/** Every model's prices at `rate` (`svc price list`, SPEC §15). */
export function listPrices(config: Pick<SvcConfig, 'models' | 'pricing'>, rate: bigint | undefined): ModelPrices[] {
  return [...config.models.values()].map((model) => {
    const usd: Record<string, Decimal> = {};
    if (model.dollar !== undefined)
      for (const [name, key] of PRICE_KEYS) {
        const given = model.dollar.usd[key];
        if (given !== undefined) usd[name] = given;
      }
    return {
      id: model.id,
      kind: model.kind ?? 'chat',
      margin: model.dollar === undefined ? null : marginFor(model, config),
      priceUsd: model.dollar === undefined ? null : usd,
      price: fullTariff(creditPriceAt(model, config, rate)),
    };
  });
}
