import type { MetricsRegistry } from '../metrics/registry';

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
