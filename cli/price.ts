import os from 'node:os';
import {
  createAccountMargins,
  createRateStore,
  Decimal,
  isSvcError,
  listPrices,
  loadConfig,
  mediaPriceAt,
  mediaPriceLines,
  loadEnv,
  type RateStore,
  type SvcConfig,
} from '../core';
import { UsageError } from './args';
import { namingDatabase, openAdminStore } from './database';
import type { CommandContext } from './context';
import { record, table, toJson, type JsonOut } from './output';

/** Runs `work` with the configuration and the rate store of the configured database (closed after). */
async function withRates<T>(
  ctx: CommandContext,
  work: (config: SvcConfig, rates: RateStore) => Promise<T>,
): Promise<T> {
  const { configPath } = loadEnv(ctx.env);
  const config = loadConfig(configPath, ctx.env);
  const store = await openAdminStore(ctx.env, { create: false, poolSize: 1 });
  try {
    const rates = createRateStore({ store, now: () => Date.now() });
    // The file's rate is the first one when none is stored yet (SPEC §15), as svc serve does.
    await rates.seed(config.pricing?.rate);
    return await work(config, rates);
  } finally {
    await store.close();
  }
}

/** Who ran the command, for the rate history: `cli:USER`. */
function operator(): string {
  try {
    return `cli:${os.userInfo().username}`;
  } catch {
    return 'cli';
  }
}

/** `svc price rate set N [--force] [--json]`: the new rate in force from now on (SPEC §15). */
export async function priceRateSet(ctx: CommandContext): Promise<void> {
  const text = (ctx.args.positionals[0] ?? '').trim();
  if (!/^-?\d+$/.test(text))
    throw new UsageError(
      `the rate must be a whole number of toman per US dollar, e.g. 98000 (got ${JSON.stringify(text)})`,
    );
  const rate = BigInt(text);
  const force = ctx.args.flags.has('force');
  const set = await withRates(ctx, async (config, rates) => {
    try {
      return await rates.set(rate, operator(), { force, fileRate: config.pricing?.rate });
    } catch (error) {
      // A refusal changes nothing and exits 2 with its reason (SPEC §15).
      if (error instanceof Error && (error as { code?: unknown }).code === 'invalid_argument')
        throw new UsageError(`refused: ${error.message}`);
      throw error;
    }
  });
  const setAt = set.setAt.toISOString();
  ctx.out(
    ctx.json
      ? toJson({ rate: set.rate, previous: set.previous ?? null, set_at: setAt })
      : `rate ${set.rate} toman per US dollar from ${setAt} (was ${set.previous ?? 'none'})`,
  );
}

/** `svc price history [--json]`: every rate, newest first. */
export async function priceHistory(ctx: CommandContext): Promise<void> {
  const history = await withRates(ctx, (_config, rates) => rates.history());
  const rows = history.map((r) => ({ rate: r.rate, set_at: r.setAt.toISOString(), by: r.by }));
  ctx.out(
    ctx.json
      ? toJson({ rates: rows })
      : table(
          ['rate', 'set at', 'by'],
          rows.map((r) => [r.rate, r.set_at, r.by]),
        ),
  );
}

/** `svc price list [--json]`: every model's credit prices in force now, and what they come from. */
export async function priceList(ctx: CommandContext): Promise<void> {
  const { config, rate } = await withRates(ctx, async (config, rates) => ({
    config,
    rate: (await rates.current())?.rate,
  }));
  const models = listPrices(config, rate);
  const margin = config.pricing?.margin ?? null;
  if (ctx.json) {
    const json: JsonOut = {
      rate: rate ?? null,
      margin: margin?.toJSON() ?? null,
      models: models.map((m) => ({
        id: m.id,
        kind: m.kind,
        margin: m.margin?.toJSON() ?? null,
        price_usd: m.priceUsd === null ? null : usdOut(m.priceUsd),
        price: { ...m.price },
        ...unitPricesJson(config, m.id, rate),
      })),
    };
    ctx.out(toJson(json));
    return;
  }
  const head = record([
    ['rate', rate === undefined ? 'none (no pricing.rate, none set)' : `${rate} toman per US dollar`],
    ['margin', margin === null ? '0 (default)' : margin.toString()],
  ]);
  const rows = models.map((m) => [
    m.id,
    m.kind,
    unitPricesText(config, m.id, rate) ??
      Object.entries(m.price)
      .map(([k, v]) =>
        typeof v === 'bigint'
          ? m.kind === 'chat' || m.kind === 'embedding' || k.endsWith('_per_1m')
            ? v.toString()
            : `${k}=${v}`
          : Object.entries(v)
              .map(([size, n]) => `${size}=${n}`)
              .join(' '),
      )
      .join('/'),
    m.priceUsd === null
      ? '-'
      : Object.entries(m.priceUsd)
          .map(([k, v]) =>
            v instanceof Decimal
              ? `${k}=${v.toString()}`
              : Object.entries(v)
                  .map(([size, usd]) => `${size}=${usd.toString()}`)
                  .join(' '),
          )
          .join(' '),
    m.margin?.toString() ?? '-',
  ]);
  ctx.out(
    `${head}\n\n${table(['model', 'kind', 'credits (in/out/cached/write/write 1h[/image in] per 1M, or per unit)', 'usd', 'margin'], rows)}`,
  );
}

/** Dollar prices as JSON numbers (or exact text where a number would not be exact), per image nested. */
function usdOut(usd: NonNullable<ReturnType<typeof listPrices>[number]['priceUsd']>): JsonOut {
  return Object.fromEntries(
    Object.entries(usd).map(([k, v]) => [
      k,
      v instanceof Decimal ? v.toJSON() : Object.fromEntries(Object.entries(v).map(([size, d]) => [size, d.toJSON()])),
    ]),
  );
}

/** A media model's unit prices in force (SPEC §14, §15), where it has them: its token prices are not its price. */
function unitPrices(config: SvcConfig, id: string, rate: bigint | undefined) {
  const model = config.models.get(id);
  const price = model === undefined ? undefined : mediaPriceAt(model, config, rate);
  if (price === undefined || price.form === 'tokens') return undefined;
  return { free: price.form === 'free', lines: mediaPriceLines(price) };
}

function unitPricesText(config: SvcConfig, id: string, rate: bigint | undefined): string | undefined {
  const units = unitPrices(config, id, rate);
  if (units === undefined) return undefined;
  return units.free ? 'free' : units.lines.map((l) => `${l.credits} ${l.unit}`).join('; ');
}

function unitPricesJson(config: SvcConfig, id: string, rate: bigint | undefined): { readonly [key: string]: JsonOut } {
  const units = unitPrices(config, id, rate);
  if (units === undefined) return {};
  return { price_units: units.lines.map((l) => ({ credits: l.credits, unit: l.unit })) };
}

/** `svc account update --account ID --margin M|none [--force] [--json]`: the account's own margin (SPEC §15). */
export async function accountUpdate(ctx: CommandContext): Promise<void> {
  const accountId = ctx.args.strings.get('account') ?? '';
  const text = ctx.args.strings.get('margin');
  if (text === undefined) throw new UsageError('nothing to change: give --margin M (e.g. 0.10) or --margin none');
  let margin: Decimal | null = null;
  if (text.trim() !== 'none') {
    margin = Decimal.parse(text) ?? null;
    if (margin === null || !/^[-+]?(\d+(\.\d*)?|\.\d+)$/.test(text.trim()))
      throw new UsageError(`--margin must be a decimal number such as 0.10, or none (got ${JSON.stringify(text)})`);
  }
  const force = ctx.args.flags.has('force');
  const store = await openAdminStore(ctx.env, { create: false, poolSize: 1 });
  try {
    await namingDatabase(store, async () => {
      try {
        // Audited on the account's list (margin_set) with the change, in one transaction.
        await createAccountMargins({ store }).set(accountId, margin, force, operator());
      } catch (error) {
        // A refusal changes nothing and exits 2 with its reason (SPEC §15).
        if (isSvcError(error) && error.code === 'invalid_argument') throw new UsageError(`refused: ${error.message}`);
        throw error;
      }
    });
  } finally {
    await store.close();
  }
  ctx.out(
    ctx.json
      ? toJson({ id: accountId, margin: margin === null ? null : margin.toJSON() })
      : `${accountId}: margin ${margin === null ? "none (the model's or the default)" : margin.toString()}`,
  );
}
