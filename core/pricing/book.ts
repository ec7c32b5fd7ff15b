import type { Logger } from 'pino';
import type { ModelConfig, SvcConfig } from '../config/types';
import type { Store } from '../store/db';
import { pricedModel } from './prices';
import { createRateStore, DEPLOYMENT_AUDIT } from './rates';
import type { AuditTables } from '../accounts/audit';
import { createAccountMargins } from './margins';
import type { Decimal } from '../config/decimal';

/** How long a replica trusts the rate it read: a rate change reaches every replica within this (SPEC §15 allows 5 s). */
export const DEFAULT_RATE_CACHE_MS = 2_000;

/**
 * Prices a call at its admission (DESIGN point 8): a model priced in credits as configured; one
 * priced from the dollar at the rate in force, read from the database at most every `cacheMs`
 * (as the key cache bounds how late a revocation is seen). The model it returns carries its price
 * to the call's settle; nothing after admission reads the rate again.
 */
export function createPriceBook(deps: {
  store: Store;
  config: Pick<SvcConfig, 'models' | 'pricing'>;
  now: () => number;
  logger: Logger;
  cacheMs?: number;
}) {
  const rates = createRateStore({ store: deps.store, now: deps.now });
  const cacheMs = deps.cacheMs ?? DEFAULT_RATE_CACHE_MS;
  const anyDollar = [...deps.config.models.values()].some((model) => model.dollar !== undefined);
  let cached: { rate: bigint | undefined; readAt: number } | undefined;
  let seeded = false;
  let reading: Promise<bigint | undefined> | undefined;
  const margins = createAccountMargins({ store: deps.store });
  // Each account's own margin as last read, trusted for cacheMs like the rate (bounded: oldest dropped).
  const accountMargins = new Map<string, { margin: Decimal | undefined; readAt: number }>();
  const MAX_ACCOUNTS = 10_000;

  async function accountMargin(accountId: string): Promise<Decimal | undefined> {
    const at = deps.now();
    const known = accountMargins.get(accountId);
    if (known !== undefined && at - known.readAt < cacheMs) return known.margin;
    const margin = await margins.get(accountId);
    accountMargins.delete(accountId);
    if (accountMargins.size >= MAX_ACCOUNTS) accountMargins.delete(accountMargins.keys().next().value as string);
    accountMargins.set(accountId, { margin, readAt: at });
    return margin;
  }

  async function read(): Promise<bigint | undefined> {
    // The file's rate is the first one when none is stored yet (SPEC §15).
    const view = seeded ? await rates.current() : await rates.seed(deps.config.pricing?.rate);
    seeded = true;
    return view?.rate ?? deps.config.pricing?.rate;
  }

  async function rate(): Promise<bigint | undefined> {
    const at = deps.now();
    if (cached !== undefined && at - cached.readAt < cacheMs) return cached.rate;
    reading ??= read()
      .then((value) => {
        cached = { rate: value, readAt: at };
        return value;
      })
      .catch((error: unknown) => {
        // The database will refuse the hold too; until then the last rate read stands.
        if (cached === undefined) throw error;
        deps.logger.warn({ err: error }, 'reading the exchange rate failed; using the last one read');
        return cached.rate;
      })
      .finally(() => {
        reading = undefined;
      });
    return reading;
  }

  return {
    /** The rate in force (toman per US dollar), at most `cacheMs` old; the file's until one is stored. */
    rate,

    /** `model` as a call admitted now pays for it; `accountId`'s own margin, if it has one, in force. */
    async price(model: ModelConfig, accountId?: string): Promise<ModelConfig> {
      if (model.dollar === undefined) return model;
      const [current, margin] = await Promise.all([
        rate(),
        accountId === undefined ? undefined : accountMargin(accountId),
      ]);
      return pricedModel(model, deps.config, current, margin);
    },

    /**
     * Writes the file's rate when none is stored (at start, so that `svc price history` shows it),
     * and the file's margins to the audit log when they differ from the last ones recorded: a
     * margin changed in the file is seen by the operator as a change, with its time.
     */
    async start(): Promise<void> {
      if (anyDollar || deps.config.pricing?.rate !== undefined) await rate();
      if (anyDollar) await recordFileMargins(deps.store, deps.config, deps.now);
    },
  };
}

export type PriceBook = ReturnType<typeof createPriceBook>;

/** The file's margins in words: the default, then each dollar-priced model's own. */
export function fileMargins(config: Pick<SvcConfig, 'models' | 'pricing'>): string {
  const own = [...config.models.values()]
    .filter((model) => model.dollar?.margin !== undefined)
    .map((model) => `${model.id} ${model.dollar?.margin?.toString() ?? ''}`);
  return [`default ${config.pricing?.margin?.toString() ?? '0'}`, ...own].join('; ');
}

/** Records `margins_loaded` (the file's margins) unless the last one recorded says the same. */
async function recordFileMargins(
  store: Store,
  config: Pick<SvcConfig, 'models' | 'pricing'>,
  now: () => number,
): Promise<void> {
  const db = store.db.withTables<AuditTables>();
  const detail = `margins from the configuration: ${fileMargins(config)}`.slice(0, 400);
  const last = await db
    .selectFrom('console_audit')
    .select('detail')
    .where('account_id', '=', DEPLOYMENT_AUDIT)
    .where('action', '=', 'margins_loaded')
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (last?.detail === detail) return;
  await db
    .insertInto('console_audit')
    .values({ account_id: DEPLOYMENT_AUDIT, action: 'margins_loaded', detail, created_at: BigInt(now()) })
    .execute();
}
