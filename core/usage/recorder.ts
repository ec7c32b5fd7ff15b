import type { Store } from '../store/db';
import { insertUsage, usageRow, type UsageRecord } from './rows';

export type { UsageEntry, UsageRecord, UsageStatus } from './rows';

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

interface Pending {
  readonly record: UsageRecord;
  readonly row: ReturnType<typeof usageRow>;
  resolve(): void;
  reject(error: unknown): void;
}

/** Most records written by one INSERT. */
const MAX_BATCH = 500;

/**
 * Writes the usage records no wallet write carries (a refused hold, or a release whose record
 * failed its transaction); the wallet writes those of settles and releases in the transaction of
 * the charge (the `usage` of `WalletService.settle`). Records are written in batches: records
 * that arrive while a write is in flight (or in the same tick) go out together in one multi-row
 * INSERT, so a busy core makes one write where it would make hundreds. Each caller's promise
 * settles once its record is stored. A batch that hits a duplicate request id is redone one row
 * at a time, so only the duplicate is ignored.
 */
export function createUsageRecorder(deps: UsageRecorderDeps): UsageRecorder {
  const { db } = deps.store;
  let queue: Pending[] = [];
  let flushing = false;

  async function write(batch: Pending[]): Promise<void> {
    const written = await insertUsage(
      db,
      batch.map((p) => p.row),
    );
    batch.forEach((p, i) => {
      if (written[i] === true) deps.onRecorded?.(p.record);
      p.resolve();
    });
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
        queue.push({ record, row: usageRow(record, deps.now()), resolve, reject });
        // Let the records of this tick join the batch before it goes out.
        if (queue.length === 1 && !flushing) queueMicrotask(flush);
      });
    },
  };
}
