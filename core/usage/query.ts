import { sql, type SelectQueryBuilder } from 'kysely';
import { invalidArgument } from '../errors';
import type { Store } from '../store/db';
import type { Database } from '../store/schema';

/** One metered request as read back (see proto `UsageRecord`). */
export interface UsageView {
  readonly requestId: string;
  /** What the call was priced at, JSON text (SPEC §15); null for records from before. */
  readonly pricing?: string | null;
  /** The id the client gave, '' when none. */
  readonly clientRequestId: string;
  readonly accountId: string;
  readonly keyId: string;
  readonly kind: string;
  /** Model id for chat/responses, '' for tools. */
  readonly model: string;
  /** Tool name for tool calls, '' otherwise. */
  readonly tool: string;
  readonly provider: string;
  readonly inputTokens: bigint;
  readonly outputTokens: bigint;
  /** Cache reads and cache writes among `inputTokens`. */
  readonly cachedTokens: bigint;
  readonly cacheWriteTokens: bigint;
  /** The one-hour writes among `cacheWriteTokens` (the rest were five-minute writes). */
  readonly cacheWrite1hTokens: bigint;
  /** What the cache reads saved against the input price, in millionths of a credit. */
  readonly cacheSavedMicro: bigint;
  /** Images, characters, seconds of audio or searches of a media call; 0 otherwise. */
  readonly mediaUnits: bigint;
  readonly cost: bigint;
  readonly status: string;
  readonly errorCode: string;
  readonly latencyMs: bigint;
  readonly createdAt: Date;
}

/** Empty/undefined fields do not filter. */
export interface UsageFilter {
  readonly accountId?: string | undefined;
  readonly keyId?: string | undefined;
  /** Inclusive, Unix ms. */
  readonly sinceMs?: number | undefined;
  /** Exclusive, Unix ms. */
  readonly untilMs?: number | undefined;
  readonly model?: string | undefined;
  readonly tool?: string | undefined;
  /** svc's request id or the client's own. */
  readonly requestId?: string | undefined;
  /** ok, empty, error, refused or cancelled. */
  readonly status?: string | undefined;
}

/** What one key spent under a filter. */
export interface UsageKeyTotal {
  readonly keyId: string;
  readonly requests: bigint;
  readonly cost: bigint;
}

/**
 * The chat and Responses records of one key and one model under a filter: the cache-read share of
 * their input and what caching saved (SPEC §13).
 */
export interface UsageCacheTotal {
  readonly keyId: string;
  readonly model: string;
  readonly requests: bigint;
  /** Every input token, of which `cachedTokens` were cache reads and `cacheWriteTokens` writes. */
  readonly inputTokens: bigint;
  readonly cachedTokens: bigint;
  readonly cacheWriteTokens: bigint;
  readonly cacheWrite1hTokens: bigint;
  readonly outputTokens: bigint;
  /** What the cache reads saved, in credits, rounded down. */
  readonly saved: bigint;
  readonly cost: bigint;
}

export interface UsagePage {
  readonly records: UsageView[];
  /** '' on the last page. */
  readonly nextPageToken: string;
}

export interface UsageTotalView {
  /** YYYY-MM-DD, UTC. */
  readonly day: string;
  readonly kind: string;
  readonly model: string;
  readonly tool: string;
  readonly requests: bigint;
  readonly chargedRequests: bigint;
  readonly inputTokens: bigint;
  readonly outputTokens: bigint;
  readonly cost: bigint;
}

export interface UsageSummary {
  readonly totals: UsageTotalView[];
  readonly totalRequests: bigint;
  readonly totalCost: bigint;
}

export interface UsageQuery {
  /** Newest first; `pageToken` is the previous page's `nextPageToken`. */
  list(filter: UsageFilter, page: { pageSize: number; pageToken: string }): Promise<UsagePage>;
  /** Totals per UTC day and per model or tool; without `sinceMs`, the last 30 days. */
  summary(filter: UsageFilter): Promise<UsageSummary>;
  /** Requests and cost per key under the filter; without `sinceMs`, the last 30 days (as `summary`). */
  byKey(filter: UsageFilter): Promise<UsageKeyTotal[]>;
  /** The chat and Responses records per key and model; without `sinceMs`, the last 30 days (as `summary`). */
  cacheByKeyAndModel(filter: UsageFilter): Promise<UsageCacheTotal[]>;
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 1000;
const DAY_MS = 86_400_000;
const DEFAULT_SUMMARY_DAYS = 30;

type UsageSelect = SelectQueryBuilder<Database, 'usage_records', object>;

function applyFilter<Q extends UsageSelect>(query: Q, filter: UsageFilter): Q {
  let q: UsageSelect = query;
  if (filter.model !== undefined && filter.model !== '' && filter.tool !== undefined && filter.tool !== '') {
    throw invalidArgument('tool', 'Filter by a model or by a tool, not both');
  }
  if (filter.accountId !== undefined && filter.accountId !== '') q = q.where('account_id', '=', filter.accountId);
  if (filter.keyId !== undefined && filter.keyId !== '') q = q.where('key_id', '=', filter.keyId);
  if (filter.sinceMs !== undefined) q = q.where('created_at', '>=', BigInt(filter.sinceMs));
  if (filter.untilMs !== undefined) q = q.where('created_at', '<', BigInt(filter.untilMs));
  if (filter.model !== undefined && filter.model !== '')
    q = q.where('kind', '!=', 'tool').where('resource', '=', filter.model);
  if (filter.tool !== undefined && filter.tool !== '')
    q = q.where('kind', '=', 'tool').where('resource', '=', filter.tool);
  if (filter.status !== undefined && filter.status !== '') q = q.where('status', '=', filter.status);
  if (filter.requestId !== undefined && filter.requestId !== '') {
    const id = filter.requestId;
    q = q.where((eb) => eb.or([eb('request_id', '=', id), eb('client_request_id', '=', id)]));
  }
  return q as Q;
}

// The cursor is the (created_at, request_id) of the last record shown: keyset pagination stays
// exact while new records arrive, unlike an offset.
function encodeCursor(createdAt: bigint, requestId: string): string {
  return Buffer.from(`${createdAt}|${requestId}`, 'utf8').toString('base64url');
}

function decodeCursor(token: string): { createdAt: bigint; requestId: string } {
  const text = Buffer.from(token, 'base64url').toString('utf8');
  const bar = text.indexOf('|');
  const at = text.slice(0, bar);
  if (bar < 1 || !/^\d{1,16}$/.test(at) || bar === text.length - 1) {
    throw invalidArgument('page_token', 'page_token is not one this service returned; start again without it');
  }
  return { createdAt: BigInt(at), requestId: text.slice(bar + 1) };
}

function splitResource(kind: string, resource: string): { model: string; tool: string } {
  return kind === 'tool' ? { model: '', tool: resource } : { model: resource, tool: '' };
}

function big(value: unknown): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number') return BigInt(value);
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value);
  return 0n;
}

/** Reads `usage_records` (written by the meter through the recorder). */
export function createUsageQuery(deps: { store: Store; now: () => number }): UsageQuery {
  const { db } = deps.store;
  return {
    async list(filter, page) {
      const pageSize = page.pageSize === 0 ? DEFAULT_PAGE_SIZE : page.pageSize;
      if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
        throw invalidArgument('page_size', `page_size must be from 1 to ${MAX_PAGE_SIZE}`);
      }
      let query = applyFilter(db.selectFrom('usage_records').selectAll(), filter);
      if (page.pageToken !== '') {
        const cursor = decodeCursor(page.pageToken);
        query = query.where((eb) =>
          eb.or([
            eb('created_at', '<', cursor.createdAt),
            eb.and([eb('created_at', '=', cursor.createdAt), eb('request_id', '<', cursor.requestId)]),
          ]),
        );
      }
      const rows = await query
        .orderBy('created_at', 'desc')
        .orderBy('request_id', 'desc')
        .limit(pageSize + 1)
        .execute();
      const shown = rows.slice(0, pageSize);
      const last = shown[shown.length - 1];
      return {
        records: shown.map((r) => ({
          requestId: r.request_id,
          clientRequestId: r.client_request_id ?? '',
          accountId: r.account_id,
          keyId: r.key_id,
          kind: r.kind,
          ...splitResource(r.kind, r.resource),
          provider: r.provider,
          inputTokens: big(r.input_tokens),
          outputTokens: big(r.output_tokens),
          cachedTokens: big(r.cached_tokens),
          cacheWriteTokens: big(r.cache_write_tokens),
          cacheWrite1hTokens: big(r.cache_write_1h_tokens),
          cacheSavedMicro: big(r.cache_saved_micro),
          mediaUnits: big(r.media_units),
          cost: big(r.cost),
          status: r.status,
          errorCode: r.error_code ?? '',
          latencyMs: big(r.latency_ms),
          createdAt: new Date(Number(r.created_at)),
          pricing: r.pricing ?? null,
        })),
        nextPageToken:
          rows.length > pageSize && last !== undefined ? encodeCursor(big(last.created_at), last.request_id) : '',
      };
    },

    async summary(filter) {
      const sinceMs = filter.sinceMs ?? Math.floor(deps.now() / DAY_MS) * DAY_MS - (DEFAULT_SUMMARY_DAYS - 1) * DAY_MS;
      // Integer arithmetic both SQLite and MySQL evaluate the same way (no date functions).
      const day = sql<bigint>`created_at - (created_at % ${sql.lit(DAY_MS)})`;
      const rows = await applyFilter(db.selectFrom('usage_records'), { ...filter, sinceMs })
        .select([
          day.as('day'),
          'kind',
          'resource',
          (eb) => eb.fn.countAll<bigint>().as('requests'),
          (eb) => eb.fn.sum<bigint>(eb.case().when('cost', '>', 0n).then(1n).else(0n).end()).as('charged'),
          (eb) => eb.fn.sum<bigint>('input_tokens').as('input_tokens'),
          (eb) => eb.fn.sum<bigint>('output_tokens').as('output_tokens'),
          (eb) => eb.fn.sum<bigint>('cost').as('cost'),
        ])
        .groupBy([day, 'kind', 'resource'])
        .orderBy('day')
        .orderBy('kind')
        .orderBy('resource')
        .execute();
      const totals = rows.map((r) => ({
        day: new Date(Number(big(r.day))).toISOString().slice(0, 10),
        kind: r.kind,
        ...splitResource(r.kind, r.resource),
        requests: big(r.requests),
        chargedRequests: big(r.charged),
        inputTokens: big(r.input_tokens),
        outputTokens: big(r.output_tokens),
        cost: big(r.cost),
      }));
      return {
        totals,
        totalRequests: totals.reduce((sum, t) => sum + t.requests, 0n),
        totalCost: totals.reduce((sum, t) => sum + t.cost, 0n),
      };
    },

    async byKey(filter) {
      // The same period as `summary` when none is given, so the two always add up alike.
      const sinceMs = filter.sinceMs ?? Math.floor(deps.now() / DAY_MS) * DAY_MS - (DEFAULT_SUMMARY_DAYS - 1) * DAY_MS;
      const rows = await applyFilter(db.selectFrom('usage_records'), { ...filter, sinceMs })
        .select([
          'key_id',
          (eb) => eb.fn.countAll<bigint>().as('requests'),
          (eb) => eb.fn.sum<bigint>('cost').as('cost'),
        ])
        .groupBy('key_id')
        .orderBy('key_id')
        .execute();
      return rows.map((r) => ({ keyId: r.key_id, requests: big(r.requests), cost: big(r.cost) }));
    },

    async cacheByKeyAndModel(filter) {
      const sinceMs = filter.sinceMs ?? Math.floor(deps.now() / DAY_MS) * DAY_MS - (DEFAULT_SUMMARY_DAYS - 1) * DAY_MS;
      const rows = await applyFilter(db.selectFrom('usage_records'), { ...filter, sinceMs })
        .where('kind', 'in', ['chat', 'responses'])
        .select([
          'key_id',
          'resource',
          (eb) => eb.fn.countAll<bigint>().as('requests'),
          (eb) => eb.fn.sum<bigint>('input_tokens').as('input_tokens'),
          (eb) => eb.fn.sum<bigint>('cached_tokens').as('cached_tokens'),
          (eb) => eb.fn.sum<bigint>('cache_write_tokens').as('cache_write_tokens'),
          (eb) => eb.fn.sum<bigint>('cache_write_1h_tokens').as('cache_write_1h_tokens'),
          (eb) => eb.fn.sum<bigint>('output_tokens').as('output_tokens'),
          (eb) => eb.fn.sum<bigint>('cache_saved_micro').as('cache_saved_micro'),
          (eb) => eb.fn.sum<bigint>('cost').as('cost'),
        ])
        .groupBy(['key_id', 'resource'])
        .orderBy('key_id')
        .orderBy('resource')
        .execute();
      return rows.map((r) => {
        const micro = big(r.cache_saved_micro);
        return {
          keyId: r.key_id,
          model: r.resource,
          requests: big(r.requests),
          inputTokens: big(r.input_tokens),
          cachedTokens: big(r.cached_tokens),
          cacheWriteTokens: big(r.cache_write_tokens),
          cacheWrite1hTokens: big(r.cache_write_1h_tokens),
          outputTokens: big(r.output_tokens),
          // Rounded down (toward zero): never more saved than the reads' price difference.
          saved: micro / 1_000_000n,
          cost: big(r.cost),
        };
      });
    },
  };
}
