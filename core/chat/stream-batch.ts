import type { CallContext } from 'nice-grpc-common';

/**
 * The request metadata with which a caller of a server stream (the gateway's core client) asks
 * for batched messages: several items per message when several are ready at once.
 */
export const STREAM_BATCH_HEADER = 'x-svc-stream-batch';

/** Whether the caller asked for batched stream messages (`x-svc-stream-batch: 1`). */
export function wantsBatches(context: Pick<CallContext, 'metadata'>): boolean {
  return context.metadata.get(STREAM_BATCH_HEADER) === '1';
}

/** At most this many items wait for the writer; past it the source is not read (back-pressure). */
const DEFAULT_LIMIT = 16;

/**
 * Reads `source` ahead of its consumer and hands the consumer everything that is ready at once:
 * an item that arrives while the consumer waits is passed on within the same turn of the event
 * loop (after the microtasks of that turn, so a burst that one upstream read produced leaves
 * together), never held back for a timer; items that arrive while the consumer is busy (writing
 * the previous batch, or waiting for the transport to drain) queue up and leave as one batch.
 * So an idle stream sends each item at once (the time to first token does not grow) and a busy
 * one sends fewer, larger messages. At most `limit` items are read ahead; past that the source
 * waits, so the transport's flow control still reaches the upstream.
 *
 * Order and every item are kept; an error of the source is thrown after the items read before it.
 * Leaving early (the call was cancelled) ends the source (`return()`), after the read in flight.
 */
export async function* batches<T>(source: AsyncIterable<T>, limit = DEFAULT_LIMIT): AsyncGenerator<T[]> {
  const iterator = source[Symbol.asyncIterator]();
  let queue: T[] = [];
  let done = false;
  let failure: { readonly error: unknown } | undefined;
  let closed = false;
  let wake: (() => void) | undefined;
  let pumping: Promise<void> | undefined;
  const signal = (): void => {
    const w = wake;
    wake = undefined;
    // After this turn's microtasks: the rest of the burst being parsed joins the batch.
    if (w !== undefined) process.nextTick(w);
  };
  const pump = async (): Promise<void> => {
    try {
      while (!closed && queue.length < limit) {
        const next = await iterator.next();
        if (next.done === true) {
          done = true;
          break;
        }
        queue.push(next.value);
        signal();
      }
    } catch (error) {
      failure = { error };
      done = true;
    } finally {
      pumping = undefined;
      signal();
    }
  };
  try {
    for (;;) {
      if (queue.length === 0) {
        if (done) break;
        const waiting = new Promise<void>((resolve) => (wake = resolve));
        pumping ??= pump();
        await waiting;
        if (queue.length === 0) continue;
      }
      const batch = queue;
      queue = [];
      if (!done) pumping ??= pump();
      yield batch;
    }
    if (failure !== undefined) throw failure.error;
  } finally {
    closed = true;
    if (!done) {
      // The read in flight first: an async generator runs `return()` only after it anyway.
      await pumping;
      if (!done) await iterator.return?.();
    }
  }
}
