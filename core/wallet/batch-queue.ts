/** One queued operation and the promise waiting for its answer. */
export interface Waiter<Op> {
  readonly op: Op;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export interface BatchQueueOptions {
  /** Most operations handed to one run. */
  readonly maxBatch: number;
  /** Runs of one key at once. */
  readonly maxInFlight: number;
  /**
   * When a lane's first operation starts its batch: 'microtask' (default; callers in the same
   * tick share it) or 'immediate' (after the I/O callbacks of this event-loop turn, so that the
   * requests that arrived together share it: for a store whose transactions run synchronously,
   * like SQLite's, and would otherwise finish before the next request is even read).
   */
  readonly gather?: 'microtask' | 'immediate';
}

/**
 * Per-key queues that hand whatever has arrived to `run` as one batch whenever fewer than
 * `maxInFlight` runs of that key are going. `run` must settle every waiter it is given. Idle
 * keys are forgotten, so the memory held is what is queued or running.
 */
export function createBatchQueue<Op>(
  run: (key: string, batch: Waiter<Op>[]) => Promise<void>,
  options: BatchQueueOptions,
): { submit(key: string, op: Op): Promise<unknown> } {
  interface Lane {
    readonly queue: Waiter<Op>[];
    inFlight: number;
    scheduled: boolean;
  }
  const lanes = new Map<string, Lane>();

  function pump(key: string, lane: Lane): void {
    while (lane.inFlight < options.maxInFlight && lane.queue.length > 0) {
      const batch = lane.queue.splice(0, options.maxBatch);
      lane.inFlight++;
      void run(key, batch)
        .catch((error: unknown) => {
          for (const w of batch) w.reject(error);
        })
        .finally(() => {
          lane.inFlight--;
          if (lane.queue.length > 0) pump(key, lane);
          else if (lane.inFlight === 0) lanes.delete(key);
        });
    }
  }

  return {
    submit(key, op) {
      return new Promise((resolve, reject) => {
        let lane = lanes.get(key);
        if (lane === undefined) {
          lane = { queue: [], inFlight: 0, scheduled: false };
          lanes.set(key, lane);
        }
        lane.queue.push({ op, resolve, reject });
        if (lane.scheduled) return;
        // A microtask or the end of this loop turn, never a timer: nothing waits for a clock.
        lane.scheduled = true;
        const scheduled = lane;
        const start = (): void => {
          scheduled.scheduled = false;
          pump(key, scheduled);
        };
        if (options.gather === 'immediate') setImmediate(start);
        else queueMicrotask(start);
      });
    },
  };
}
