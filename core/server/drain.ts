import type { CallContext, ServerMiddlewareCall } from 'nice-grpc-common';

/** Counts the calls whose handlers are still running, so that shutdown can wait for them. */
export interface Drain {
  /** The outermost server middleware: a call counts until its handler has fully returned. */
  middleware<Req, Res>(
    call: ServerMiddlewareCall<Req, Res>,
    context: CallContext,
  ): AsyncGenerator<Res, Res | void, undefined>;
  /** Resolves once no handler runs, or after `timeoutMs`; true when none runs. */
  idle(timeoutMs: number): Promise<boolean>;
}

/**
 * A cancelled call ends on the wire at once, but its handler still settles what a stream produced
 * or releases its hold; the store must not close under it. grpc-js's shutdown waits for calls on
 * the wire only, so the core waits on this too before it lets its owner close the store.
 */
export function createDrain(): Drain {
  let running = 0;
  let waiters: (() => void)[] = [];
  return {
    async *middleware(call, context) {
      running += 1;
      try {
        return yield* call.next(call.request, context);
      } finally {
        running -= 1;
        if (running === 0) {
          const ready = waiters;
          waiters = [];
          for (const w of ready) w();
        }
      }
    },
    idle(timeoutMs) {
      if (running === 0) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(running === 0), timeoutMs);
        timer.unref();
        waiters.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },
  };
}
