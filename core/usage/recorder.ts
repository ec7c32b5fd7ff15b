import type { Store } from '../store/db';
import { isUniqueViolation } from '../store/db';
import type { UsageStatus } from '../billing/types';

export interface UsageRecord {
  readonly requestId: string;
  readonly accountId: string;
  readonly keyId: string;
  readonly kind: string;
  readonly resource: string;
  readonly provider: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cost: bigint;
  readonly status: UsageStatus;
  readonly errorCode: string | null;
  readonly latencyMs: number;
}

export interface UsageRecorder {
  /** Writes one record per request id; a second write for the same id is ignored. */
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

export function createUsageRecorder(deps: UsageRecorderDeps): UsageRecorder {
  return {
    async record(r) {
      try {
        await deps.store.db
          .insertInto('usage_records')
          .values({
            request_id: r.requestId,
            account_id: r.accountId,
            key_id: r.keyId,
            kind: r.kind,
            resource: r.resource,
            provider: r.provider,
            input_tokens: BigInt(r.inputTokens),
            output_tokens: BigInt(r.outputTokens),
            cost: r.cost,
            status: r.status,
            error_code: r.errorCode,
            latency_ms: BigInt(Math.max(0, Math.round(r.latencyMs))),
            created_at: BigInt(deps.now()),
          })
          .execute();
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        return;
      }
      deps.onRecorded?.(r);
    },
  };
}
