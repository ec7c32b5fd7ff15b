import { dollarPrice, fullTariff, PRICE_KEYS } from '../chat/pricing';
import { Decimal } from '../config/decimal';
import type { ModelConfig, SvcConfig, TokenPrice } from '../config/types';

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
  if (model.dollar === undefined) return model;
  const price = creditPriceAt(model, config, rate, accountMargin);
  return price === model.price ? model : { ...model, price };
}

export interface ModelPrices {
  readonly id: string;
  readonly kind: 'chat' | 'embedding';
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
