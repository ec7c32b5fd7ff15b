import type { Insertable } from 'kysely';
import { insertInto } from '../store/compiled';
import type { Store } from '../store/db';
import type { UsageRecordsTable } from '../store/schema';
import { isUniqueViolation } from '../store/db';

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
  readonly cost: bigint;
  readonly status: UsageStatus;
  readonly errorCode: string | null;
  readonly latencyMs: number;
}

export interface UsageRecorder {
  /** Writes one record per account and request id; a second write for the same pair is ignored. */
  record(record: UsageRecord): Promise<void>;
}

export interface UsageRecorderDeps {
  readonly store: Store;
  readonly now: () => number;
  /**
   * Called after a record is written, never for an ignored duplicate: metrics fed from here count
   * each request once, exactly as the table (and the ledger) does.
   */
  readonly onRecorded?: (record: UsageRecord) => void;
}

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
  'cost',
  'status',
  'error_code',
  'latency_ms',
  'created_at',
]);

interface Pending {
  readonly record: UsageRecord;
  readonly row: Row;
  resolve(): void;
  reject(error: unknown): void;
}

/** How a metered call ended, as its usage record says. */
export type UsageStatus = 'ok' | 'empty' | 'error' | 'refused' | 'cancelled';

/** Most records written by one INSERT. */
const MAX_BATCH = 500;

/**
 * Usage records are written in batches: records that arrive while a write is in flight (or in
 * the same tick) go out together in one multi-row INSERT, so a busy core makes one write where it
 * would make hundreds. Each caller's promise settles once its record is stored. A batch that hits
 * a duplicate request id is redone one row at a time, so only the duplicate is ignored.
 */
export function createUsageRecorder(deps: UsageRecorderDeps): UsageRecorder {
  const { db } = deps.store;
  let queue: Pending[] = [];
  let flushing = false;

  function toRow(r: UsageRecord): Row {
    return {
      request_id: r.requestId,
      client_request_id: r.clientRequestId,
      account_id: r.accountId,
      key_id: r.keyId,
      kind: r.kind,
      resource: r.resource,
      provider: r.provider,
      input_tokens: BigInt(r.inputTokens),
      output_tokens: BigInt(r.outputTokens),
      cached_tokens: BigInt(r.cachedTokens ?? 0),
      cache_write_tokens: BigInt(r.cacheWriteTokens ?? 0),
      cost: r.cost,
      status: r.status,
      error_code: r.errorCode,
      latency_ms: BigInt(Math.max(0, Math.round(r.latencyMs))),
      created_at: BigInt(deps.now()),
    };
  }

  async function writeOne(p: Pending): Promise<void> {
    try {
      await db.executeQuery(INSERT([p.row]));
    } catch (error) {
      if (isUniqueViolation(error)) return p.resolve();
      return p.reject(error);
    }
    deps.onRecorded?.(p.record);
    p.resolve();
  }

  async function write(batch: Pending[]): Promise<void> {
    if (batch.length === 1) return writeOne(batch[0] as Pending);
    try {
      await db.executeQuery(INSERT(batch.map((p) => p.row)));
    } catch (error) {
      if (!isUniqueViolation(error)) {
        for (const p of batch) p.reject(error);
        return;
      }
      for (const p of batch) await writeOne(p);
      return;
    }
    for (const p of batch) {
      deps.onRecorded?.(p.record);
      p.resolve();
    }
  }

  function flush(): void {
    if (flushing || queue.length === 0) return;
    flushing = true;
    const batch = queue.slice(0, MAX_BATCH);
    queue = queue.slice(batch.length);
    void write(batch)
      .catch((error: unknown) => {
        for (const p of batch) p.reject(error);
      })
      .finally(() => {
        flushing = false;
        flush();
      });
  }

  return {
    record(record) {
      return new Promise<void>((resolve, reject) => {
        queue.push({ record, row: toRow(record), resolve, reject });
        // Let the records of this tick join the batch before it goes out.
        if (queue.length === 1 && !flushing) queueMicrotask(flush);
      });
    },
  };
}
