/**
 * A signal that aborts `ms` after it is made, or as soon as one of `signals` aborts.
 *
 * Why not `AbortSignal.any([signal, AbortSignal.timeout(ms)])`: on Node 20 the timer of
 * `AbortSignal.timeout()` holds its signal weakly, and `AbortSignal.any()` holds its sources
 * weakly, so a timeout signal that nothing else references can be garbage-collected before it
 * fires; the request it guards then waits forever (nodejs/node#57736; reproduced here: a hung
 * payment gateway held a top-up for good once a GC ran during the wait). This one is held by a
 * real timer until it fires or `clear()` is called, which the caller does when the work is done.
 */
export interface Deadline {
  readonly signal: AbortSignal;
  /** True once the time ran out (as opposed to one of the other signals aborting). */
  readonly expired: boolean;
  /** Stops the timer and lets go of the other signals; call it when the guarded work is over. */
  clear(): void;
}

export function deadline(ms: number, ...signals: readonly (AbortSignal | undefined)[]): Deadline {
  const controller = new AbortController();
  const sources = signals.filter((s): s is AbortSignal => s !== undefined);
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    controller.abort(new DOMException(`The operation timed out after ${ms} ms.`, 'TimeoutError'));
    detach();
  }, ms);
  // The timer must not keep a process alive that has nothing else to do; unref() does not weaken
  // the timer's hold on the controller.
  timer.unref();
  const onAbort = (event: Event): void => {
    clearTimeout(timer);
    controller.abort((event.target as AbortSignal).reason);
    detach();
  };
  function detach(): void {
    for (const source of sources) source.removeEventListener('abort', onAbort);
  }
  for (const source of sources) {
    if (source.aborted) {
      clearTimeout(timer);
      controller.abort(source.reason);
      break;
    }
    source.addEventListener('abort', onAbort, { once: true });
  }
  if (controller.signal.aborted) detach();
  return {
    signal: controller.signal,
    get expired() {
      return expired;
    },
    clear() {
      clearTimeout(timer);
      detach();
    },
  };
}
