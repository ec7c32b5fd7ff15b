import type { Dispatcher } from 'undici';
import { upstreamOf, type UpstreamLabel } from '../providers/http';

/** Where a timed exchange goes: `status` is the HTTP status, or "error" when no response came. */
export type UpstreamRecorder = (upstream: UpstreamLabel, status: string, seconds: number) => void;

type Controller = Dispatcher.DispatchController;

/**
 * Passes every callback on to the caller's handler, and reports the exchange once: at the
 * final response's headers (1xx answers are not the end), at an upgrade, or at the error when
 * no response came (refused, reset, timed out, aborted).
 */
class TimedHandler implements Dispatcher.DispatchHandler {
  #done = false;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly finish: (status: string) => void,
  ) {}

  #report(status: string): void {
    if (this.#done) return;
    this.#done = true;
    this.finish(status);
  }

  onRequestStart(controller: Controller, context: unknown): void {
    this.inner.onRequestStart?.(controller, context);
  }

  onRequestUpgrade(
    controller: Controller,
    statusCode: number,
    headers: Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestUpgrade']>>[2],
    socket: Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestUpgrade']>>[3],
  ): void {
    this.#report(String(statusCode));
    this.inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(
    controller: Controller,
    statusCode: number,
    headers: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseStart']>>[2],
    statusMessage?: string,
  ): void {
    if (statusCode >= 200) this.#report(String(statusCode));
    this.inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseStarted(): void {
    this.inner.onResponseStarted?.();
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    this.inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(
    controller: Controller,
    trailers: Parameters<NonNullable<Dispatcher.DispatchHandler['onResponseEnd']>>[1],
  ): void {
    this.inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Controller, error: Error): void {
    this.#report('error');
    this.inner.onResponseError?.(controller, error);
  }
}

/**
 * The undici interceptor that times every upstream HTTP exchange, so that no provider reports
 * its own latency: from the dispatch to the response headers, or to the error when none came.
 * It knows the upstream by the name its caller stated (`UpstreamHttp.forUpstream`), never by the
 * URL; a dispatch that states none (nothing in the core sends one) is passed on untimed.
 * Composed over the core's one dispatcher by `createCore`.
 */
export function timeUpstreams(record: UpstreamRecorder): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => {
    const upstream = upstreamOf(options);
    if (upstream === undefined) return dispatch(options, handler);
    const started = performance.now();
    const finish = (status: string): void => record(upstream, status, (performance.now() - started) / 1000);
    return dispatch(options, new TimedHandler(handler, finish));
  };
}
