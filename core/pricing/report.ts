import { sql } from 'kysely';
import { Decimal } from '../config/decimal';
import { invalidArgument } from '../errors';
import type { Store } from '../store/db';

const DAY_MS = 86_400_000;
/** The longest report: a year and a day. */
export const MAX_REPORT_DAYS = 366;

/** One row of the margin report (SPEC §15): a UTC day and a model (or tool). */
export interface MarginRow {
  /** YYYY-MM-DD, UTC. */
  readonly day: string;
  /** The model id or tool name the usage record names. */
  readonly model: string;
  /** Charged calls (ledger charges). */
  readonly calls: bigint;
  /** The ledger's charges, credits. */
  readonly revenue: bigint;
  /**
   * The upstream's cost in US dollars: each call's usage × the dollar prices its record keeps
   * (tokens × a tariff; a media call's images, characters, seconds or searches × its unit price).
   */
  readonly costUsd: Decimal;
  /** That cost in credits, at the rate each call was charged at, rounded up once per row. */
  readonly cost: bigint;
  /** revenue − cost. */
  readonly margin: bigint;
  /** Calls with no dollar price on their record (priced in credits): their upstream cost is unknown. */
  readonly unpricedCalls: bigint;
}

/** What a usage record's `pricing` JSON says of the dollar: prices, the rate, an image call's size. */
export interface RecordDollars {
  /** Dollars by YAML key: a token tariff's per 1M tokens, or per_1m_characters, per_minute, per_search. */
  readonly usd: Map<string, Decimal>;
  /** A media model priced per image: dollars per image by `SIZE/QUALITY`. */
  readonly perImage?: Map<string, Decimal>;
  /** The `SIZE/QUALITY` entry an image call was charged at. */
  readonly imagePrice?: string;
  readonly rate: bigint;
}

/** `"key":number` pairs of a JSON object's text, as exact decimals. */
function decimalPairs(text: string, key: RegExp): Map<string, Decimal> {
  const out = new Map<string, Decimal>();
  for (const [, name = '', value = ''] of text.matchAll(new RegExp(`"(${key.source})":([-0-9.eE+]+)`, 'g'))) {
    const parsed = Decimal.parse(value);
    if (parsed !== undefined) out.set(name, parsed);
  }
  return out;
}

/** The dollar prices and rate a usage record's `pricing` JSON keeps; undefined: priced in credits. */
export function dollarsOf(pricing: string | null): RecordDollars | undefined {
  if (pricing === null) return undefined;
  // Read from the text, not through JSON.parse: the prices stay exact decimals. One level of
  // nesting: a per-image price map.
  const usdText = /"price_usd":\{((?:[^{}]|\{[^{}]*\})*)\}/.exec(pricing)?.[1];
  const rateText = /"rate":(\d+)/.exec(pricing)?.[1];
  if (usdText === undefined || rateText === undefined) return undefined;
  const imageText = /"per_image":\{([^{}]*)\}/.exec(usdText)?.[1];
  const imagePrice = /"image_price":("(?:[^"\\]|\\.)*")/.exec(pricing)?.[1];
  return {
    usd: decimalPairs(usdText.replace(/"per_image":\{[^{}]*\}/, ''), /[a-z0-9_]+/),
    ...(imageText === undefined ? {} : { perImage: decimalPairs(imageText, /[^"]+/) }),
    ...(imagePrice === undefined ? {} : { imagePrice: JSON.parse(imagePrice) as string }),
    rate: BigInt(rateText),
  };
}

/**
 * What a media call billed by its unit cost upstream, in sixtieths of a dollar (a per-minute price
 * is charged by the second, so a sixtieth keeps it exact): `units` images × the per-image price it
 * was charged at, characters × per_1m_characters / 1e6, seconds × per_minute / 60, searches ×
 * per_search. Undefined for a token-priced record.
 */
export function unitUsd60(dollars: RecordDollars, units: bigint): Decimal | undefined {
  const n = Decimal.of(units);
  const sixty = Decimal.of(60n);
  if (dollars.perImage !== undefined) {
    const charged = dollars.imagePrice === undefined ? undefined : dollars.perImage.get(dollars.imagePrice);
    // A record without its size (none is written so): the dearest, as the hold was.
    const each = charged ?? [...dollars.perImage.values()].reduce((a, b) => (b.compare(a) > 0 ? b : a), Decimal.ZERO);
    return n.times(each).times(sixty);
  }
  const characters = dollars.usd.get('per_1m_characters');
  if (characters !== undefined) return n.times(characters).times(sixty).times(Decimal.of(1n, 6));
  const minute = dollars.usd.get('per_minute');
  if (minute !== undefined) return n.times(minute);
  const search = dollars.usd.get('per_search');
  if (search !== undefined) return n.times(search).times(sixty);
  return undefined;
}

/** Token counts summed over calls charged at one set of prices (SPEC §13: five counts apart). */
export interface TokenSums {
  readonly input: bigint;
  readonly output: bigint;
  readonly cached: bigint;
  readonly cacheWrite: bigint;
  readonly cacheWrite1h: bigint;
  /** A token-billed image model's input image tokens among `input` (SPEC §14); absent: none. */
  readonly imageInput?: bigint;
}

/**
 * What `tokens` cost the operator upstream at the dollar prices `usd` (per 1M tokens), exact:
 * a key absent defaults as §6/§13/§14 say (cache reads and writes and input images at the input
 * price, one-hour writes at the five-minute write price).
 */
export function upstreamUsd(usd: ReadonlyMap<string, Decimal>, tokens: TokenSums): Decimal {
  const input = usd.get('input_per_1m') ?? Decimal.ZERO;
  const read = usd.get('cached_input_per_1m') ?? input;
  const write = usd.get('cache_write_per_1m') ?? input;
  const write1h = usd.get('cache_write_1h_per_1m') ?? write;
  const output = usd.get('output_per_1m') ?? Decimal.ZERO;
  const image = usd.get('image_input_per_1m') ?? input;
  const images = tokens.imageInput ?? 0n;
  const uncached = tokens.input - tokens.cached - tokens.cacheWrite - images;
  const parts: [bigint, Decimal][] = [
    [uncached, input],
    [images, image],
    [tokens.cached, read],
    [tokens.cacheWrite - tokens.cacheWrite1h, write],
    [tokens.cacheWrite1h, write1h],
    [tokens.output, output],
  ];
  const perMillion = parts.reduce((sum, [n, price]) => sum.plus(price.times(Decimal.of(n))), Decimal.ZERO);
  return perMillion.times(Decimal.parse('0.000001') as Decimal);
}

/** A UTC day (YYYY-MM-DD) as its first millisecond; refused naming `param` otherwise. */
function dayStart(day: string, param: string): number {
  const at = /^\d{4}-\d\d-\d\d$/.test(day) ? Date.parse(`${day}T00:00:00Z`) : Number.NaN;
  if (!Number.isFinite(at) || new Date(at).toISOString().slice(0, 10) !== day)
    throw invalidArgument(param, `${param} must be a day as YYYY-MM-DD (got ${JSON.stringify(day)})`);
  return at;
}

const big = (v: unknown): bigint => (v === null || v === undefined ? 0n : BigInt(v as string | number | bigint));

/**
 * The margin report (SPEC §15) for the inclusive UTC days `fromDay`..`toDay`: per day (of the
 * charge) and model, the calls charged, the ledger's charges, what their usage cost upstream at
 * the dollar prices each usage record keeps, and the difference. Grouped in the database by the
 * pricing each record keeps (one group per rate and margin in force), then priced exactly here.
 */
export async function marginReport(store: Store, fromDay: string, toDay: string): Promise<MarginRow[]> {
  const since = dayStart(fromDay, 'from_day');
  const until = dayStart(toDay, 'to_day') + DAY_MS;
  if (until <= since) throw invalidArgument('to_day', 'to_day must not be before from_day');
  if (until - since > MAX_REPORT_DAYS * DAY_MS)
    throw invalidArgument('to_day', `the report covers at most ${MAX_REPORT_DAYS} days`);
  const day = sql<bigint>`l.created_at - (l.created_at % ${sql.lit(DAY_MS)})`;
  const groups = await store.db
    .selectFrom('ledger_entries as l')
    .leftJoin('usage_records as u', (join) =>
      join.onRef('u.request_id', '=', 'l.request_id').onRef('u.account_id', '=', 'l.account_id'),
    )
    .select([
      day.as('day'),
      'u.resource as resource',
      'u.pricing as pricing',
      sql<bigint>`count(*)`.as('calls'),
      sql<bigint>`sum(-l.amount)`.as('revenue'),
      sql<bigint>`sum(u.input_tokens)`.as('input'),
      sql<bigint>`sum(u.output_tokens)`.as('output'),
      sql<bigint>`sum(u.cached_tokens)`.as('cached'),
      sql<bigint>`sum(u.cache_write_tokens)`.as('cache_write'),
      sql<bigint>`sum(u.cache_write_1h_tokens)`.as('cache_write_1h'),
      sql<bigint>`sum(u.media_units)`.as('media_units'),
      sql<bigint>`sum(u.image_input_tokens)`.as('image_input'),
    ])
    .where('l.kind', '=', 'charge')
    .where('l.created_at', '>=', BigInt(since))
    .where('l.created_at', '<', BigInt(until))
    .groupBy([day, 'u.resource', 'u.pricing'])
    .execute();
  const rows = new Map<
    string,
    {
      day: string;
      model: string;
      calls: bigint;
      revenue: bigint;
      /** Sixty times the dollars, and sixty times their credits at each call's rate (exact: see unitUsd60). */
      usd60: Decimal;
      credits60: Decimal;
      unpriced: bigint;
    }
  >();
  for (const g of groups) {
    const dayText = new Date(Number(big(g.day))).toISOString().slice(0, 10);
    const model = g.resource ?? '';
    const key = `${dayText}\n${model}`;
    const row = rows.get(key) ?? {
      day: dayText,
      model,
      calls: 0n,
      revenue: 0n,
      usd60: Decimal.ZERO,
      credits60: Decimal.ZERO,
      unpriced: 0n,
    };
    rows.set(key, row);
    row.calls += big(g.calls);
    row.revenue += big(g.revenue);
    const dollars = dollarsOf(g.pricing ?? null);
    if (dollars === undefined) {
      row.unpriced += big(g.calls);
      continue;
    }
    // A media call billed by its unit: its units × its dollar price; else its tokens × the tariff.
    const usd60 =
      unitUsd60(dollars, big(g.media_units)) ??
      upstreamUsd(dollars.usd, {
        input: big(g.input),
        output: big(g.output),
        cached: big(g.cached),
        cacheWrite: big(g.cache_write),
        cacheWrite1h: big(g.cache_write_1h),
        imageInput: big(g.image_input),
      }).times(Decimal.of(60n));
    row.usd60 = row.usd60.plus(usd60);
    row.credits60 = row.credits60.plus(usd60.times(Decimal.of(dollars.rate)));
  }
  return [...rows.values()]
    .sort((a, b) => (a.day === b.day ? a.model.localeCompare(b.model) : a.day < b.day ? -1 : 1))
    .map((r) => {
      // Exact where the dollars end within 12 more places (every token and unit price does, but
      // a per-minute price's sixtieth may not: then rounded up there); the credits' ceiling exact.
      const cost = r.credits60.dividedBy(60n).ceil();
      return {
        day: r.day,
        model: r.model,
        calls: r.calls,
        revenue: r.revenue,
        costUsd: r.usd60.dividedBy(60n),
        cost,
        margin: r.revenue - cost,
        unpricedCalls: r.unpriced,
      };
    });
}
