import type { MetricsRegistry } from '../metrics/registry';
import type { FairQueueEvents, FairQueues } from '../net/fair-queue';

/** What routing records per upstream (its stable name, never shown to users). */
export interface UpstreamMetrics {
  /** One attempt: `outcome` is "ok", an svc error code, or "skipped_open" / "skipped_full". */
  attempt(upstream: string, outcome: string): void;
  /** A call moved on from `from` to another upstream after `from` failed. */
  fallback(model: string, from: string): void;
  /** The breaker of `upstream` is open (1) or not (0). */
  breakerOpen(upstream: string, open: boolean): void;
}

/** The `/metrics` families of upstream routing, in `registry` (none recorded without one). */
export function createUpstreamMetrics(registry: MetricsRegistry | undefined): UpstreamMetrics {
  if (registry === undefined) return { attempt() {}, fallback() {}, breakerOpen() {} };
  const attempts = registry.counter(
    'svc_upstream_attempts_total',
    'Calls sent to (or skipped at) each configured upstream, by outcome ("ok", an svc error code, "skipped_open", "skipped_full").',
    ['upstream', 'outcome'],
  );
  const fallbacks = registry.counter(
    'svc_upstream_fallbacks_total',
    'Calls that moved on to another upstream after this one failed before the first byte.',
    ['model', 'upstream'],
  );
  const open = registry.gauge(
    'svc_upstream_breaker_open',
    'Whether the circuit breaker of an upstream is open (1) or closed/half-open (0), in this replica.',
    ['upstream'],
  );
  return {
    attempt: (upstream, outcome) => attempts.inc({ upstream, outcome }),
    fallback: (model, upstream) => fallbacks.inc({ model, upstream }),
    breakerOpen: (upstream, isOpen) => open.set({ upstream }, isOpen ? 1 : 0),
  };
}

/**
 * The `/metrics` families of the origins' fair queues: calls waiting now (read at each scrape),
 * and how the waits ended. Hands `createFairQueues` its per-origin observers.
 */
export function fairQueueMetrics(
  registry: MetricsRegistry,
  queues: () => FairQueues,
): (origin: string) => FairQueueEvents {
  const waiting = registry.gauge(
    'svc_upstream_queue_waiting',
    'Calls waiting for a connection of an upstream origin (its fair queue), in this replica.',
    ['origin'],
  );
  const busy = registry.gauge(
    'svc_upstream_queue_busy',
    'Connection slots of an upstream origin taken by calls now, in this replica.',
    ['origin'],
  );
  const waits = registry.counter(
    'svc_upstream_queue_waits_total',
    'Calls that waited for a connection of an upstream origin, by how the wait ended ("granted", "timeout": refused with 503, "abandoned": the client left).',
    ['origin', 'outcome'],
  );
  registry.onCollect(() => {
    for (const [origin, queue] of queues().entries()) {
      waiting.set({ origin }, queue.waiting);
      busy.set({ origin }, queue.busy);
    }
    return Promise.resolve();
  });
  return (origin) => ({
    granted: (waitedMs) => {
      if (waitedMs > 0) waits.inc({ origin, outcome: 'granted' });
    },
    timedOut: () => waits.inc({ origin, outcome: 'timeout' }),
    abandoned: () => waits.inc({ origin, outcome: 'abandoned' }),
  });
}
