import type { Insertable } from 'kysely';
import { insertInto, type QueryRunner } from '../store/compiled';
import { isUniqueViolation } from '../store/db';
import type { UsageRecordsTable } from '../store/schema';

/** How a metered call ended, as its usage record says. */
export type UsageStatus = 'ok' | 'empty' | 'error' | 'refused' | 'cancelled';

export interface UsageRecord {
  readonly requestId: string;
  /** The id the client gave the request, when it gave one (correlation only). */
  readonly clientRequestId: string | null;
  readonly accountId: string;
  readonly keyId: string;
  readonly kind: string;
  readonly resource: string;
  readonly provider: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Cache reads among `inputTokens` (default 0). */
  readonly cachedTokens?: number;
  /** Cache writes among `inputTokens` (default 0). */
  readonly cacheWriteTokens?: number;
  /** One-hour cache writes among `cacheWriteTokens` (default 0); the rest were five-minute writes. */
  readonly cacheWrite1hTokens?: number;
  /** What the cache reads saved against the input price, in millionths of a credit (default 0). */
  readonly cacheSavedMicro?: bigint;
  /** A media call's units (images, characters, seconds, searches; default 0). */
  readonly mediaUnits?: number;
  /** A token-billed image call's input image tokens among `inputTokens` (default 0). */
  readonly imageInputTokens?: number;
  readonly cost: bigint;
  readonly status: UsageStatus;
  readonly errorCode: string | null;
  readonly latencyMs: number;
  /** What the call was priced at (JSON text, `pricingJson`); absent: null. */
  readonly pricing?: string | undefined;
}

/**
 * The usage record of a call whose wallet write carries it (a settle or a release): its cost is
 * what that write charges, filled in inside the same transaction.
 */
export type UsageEntry = Omit<UsageRecord, 'cost'>;

type Row = Insertable<UsageRecordsTable>;

// One INSERT per batch, its text built once per batch size (core/store/compiled.ts).
const INSERT = insertInto<Row>('usage_records', [
  'request_id',
  'client_request_id',
  'account_id',
  'key_id',
  'kind',
  'resource',
  'provider',
  'input_tokens',
  'output_tokens',
  'cached_tokens',
  'cache_write_tokens',
  'cache_write_1h_tokens',
  'cache_saved_micro',
  'media_units',
  'image_input_tokens',
  'cost',
  'status',
  'error_code',
  'latency_ms',
  'created_at',
  'pricing',
]);

/** The `usage_records` row of `record`, stamped `createdAt` (ms). */
export function usageRow(record: UsageRecord, createdAt: number): Row {
  return {
    request_id: record.requestId,
    client_request_id: record.clientRequestId,
    account_id: record.accountId,
    key_id: record.keyId,
    kind: record.kind,
    resource: record.resource,
    provider: record.provider,
    input_tokens: BigInt(record.inputTokens),
    output_tokens: BigInt(record.outputTokens),
    cached_tokens: BigInt(record.cachedTokens ?? 0),
    cache_write_tokens: BigInt(record.cacheWriteTokens ?? 0),
    cache_write_1h_tokens: BigInt(record.cacheWrite1hTokens ?? 0),
    cache_saved_micro: record.cacheSavedMicro ?? 0n,
    media_units: BigInt(record.mediaUnits ?? 0),
    image_input_tokens: BigInt(record.imageInputTokens ?? 0),
    cost: record.cost,
    status: record.status,
    error_code: record.errorCode,
    latency_ms: BigInt(Math.max(0, Math.round(record.latencyMs))),
    created_at: BigInt(createdAt),
    pricing: record.pricing ?? null,
  };
}

/**
 * Inserts `rows` with one multi-row INSERT through `q` (the database, or a transaction that
 * carries the rows' charges) and says which were written: a row whose (account, request id) is
 * stored already is ignored. A duplicate fails only its statement, on SQLite and on InnoDB alike
 * (the transaction goes on), so such a batch is redone one row at a time and only the duplicate
 * is left out. Any other error is thrown.
 */
export async function insertUsage(q: QueryRunner, rows: readonly Row[]): Promise<boolean[]> {
  if (rows.length === 0) return [];
  if (rows.length > 1) {
    try {
      await q.executeQuery(INSERT(rows));
      return rows.map(() => true);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
  }
  const written: boolean[] = [];
  for (const row of rows) {
    try {
      await q.executeQuery(INSERT([row]));
      written.push(true);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      written.push(false);
    }
  }
  return written;
}
