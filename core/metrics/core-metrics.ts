import type { UpstreamLabel } from '../providers/http';
import type { Store } from '../store/db';
import type { UsageRecord } from '../usage/recorder';
import { createRegistry, type MetricsRegistry } from './registry';

/** What the core records; the gateway's HTTP metrics live in `adapters/http/request-log.ts`. */
export interface CoreMetrics {
  readonly registry: MetricsRegistry;
  /** One metered request, as written to `usage_records` (called once per request id). */
  onUsage(record: UsageRecord): void;
  /** One finished gRPC call: `code` is the svc error code, or "ok". */
  onCall(method: string, code: string, seconds: number): void;
  /**
   * One upstream HTTP exchange of the configured `upstream` (its name and provider kind):
   * `status` is the HTTP status, or "error" when none arrived.
   */
  onUpstream(upstream: UpstreamLabel, status: string, seconds: number): void;
  /** A payment this process created (`pending`) or moved into `paid`, `failed` or `expired`. */
  onPayment(gateway: string, state: string): void;
  /** A metered call whose usage was priced above its hold (charged at the hold, SPEC §6). */
  onOverHold(call: MeteredLabels): void;
  /** A metered call whose upstream reported no usage (charged from svc's own count, SPEC §6). */
  onEstimatedUsage(call: MeteredLabels): void;
  /**
   * How a chat call's answer was written: `fast` when the upstream's text passed through
   * (core/chat/fast-path.ts), `translated` otherwise. `method` is the core's (CreateResponse, …).
   */
  onAnswerPath(method: string, fast: boolean): void;
}

/** Which call: its kind (chat, responses, tool, embedding), model or tool, and provider. */
export interface MeteredLabels {
  readonly kind: string;
  readonly resource: string;
  readonly provider: string;
}

/**
 * The core's metrics: calls, metered requests by model/tool and status, tokens, credits charged,
 * upstream latency and errors by provider, and the holds still open (read from the database at
 * scrape time, so every replica reports the same figure).
 */
export function createCoreMetrics(deps: { store: Store; registry?: MetricsRegistry }): CoreMetrics {
  const registry = deps.registry ?? createRegistry();
  const calls = registry.counter(
    'svc_core_calls_total',
    'gRPC calls handled by the core, by method and outcome (svc error code or "ok").',
    ['method', 'code'],
  );
  const callSeconds = registry.histogram(
    'svc_core_call_duration_seconds',
    'Duration of gRPC calls handled by the core.',
    ['method', 'code'],
  );
  const requests = registry.counter(
    'svc_requests_total',
    'Metered requests (chat, responses, tool calls) by model or tool, provider and status (ok, empty, error, refused, cancelled).',
    ['kind', 'model', 'tool', 'provider', 'status'],
  );
  const requestSeconds = registry.histogram(
    'svc_request_duration_seconds',
    'Duration of metered requests, from the hold to the settle or release.',
    ['kind', 'model', 'tool', 'status'],
  );
  const tokens = registry.counter(
    'svc_tokens_total',
    'Tokens billed, by direction (input, output) and model or tool.',
    ['kind', 'model', 'tool', 'type'],
  );
  const credits = registry.counter(
    'svc_credits_charged_total',
    'Credits charged to wallets (1 credit = 1 toman); equals the sum of the ledger charges.',
    ['kind', 'model', 'tool', 'provider'],
  );
  const upstreamErrors = registry.counter(
    'svc_upstream_errors_total',
    'Metered requests that failed upstream, by provider and svc error code.',
    ['provider', 'code'],
  );
  const upstreamSeconds = registry.histogram(
    'svc_upstream_request_duration_seconds',
    'Time from sending an upstream HTTP request to its response headers, by provider, configured upstream name and HTTP status ("error": none arrived).',
    ['provider', 'upstream', 'status'],
  );
  const overHold = registry.counter(
    'svc_usage_over_hold_total',
    'Metered requests whose reported usage was priced above their hold, by provider and model or tool: each was charged at the hold (the most a call can cost).',
    ['kind', 'model', 'tool', 'provider'],
  );
  const estimated = registry.counter(
    'svc_usage_estimated_total',
    'Metered requests whose upstream reported no usage, by provider and model: each was charged from svc’s own token count (usage.estimated).',
    ['kind', 'model', 'provider'],
  );
  const answers = registry.counter(
    'svc_chat_answers_total',
    "Chat calls (chat completions, Responses, Anthropic Messages, Gemini) by core method and how the answer was written: fast (the upstream's own text passed through) or translated.",
    ['method', 'path'],
  );
  const payments = registry.counter(
    'svc_payments_total',
    'Wallet top-ups through a payment gateway, by gateway and the state this process moved them into (pending when created, then paid, failed or expired).',
    ['gateway', 'state'],
  );
  const holds = registry.gauge(
    'svc_wallet_holds_outstanding',
    'Wallet holds placed and not yet settled, released or expired (all accounts).',
  );
  const held = registry.gauge('svc_wallet_held_credits', 'Credits reserved by the outstanding holds (all accounts).');

  registry.onCollect(async () => {
    const row = await deps.store.db
      .selectFrom('holds')
      .where('status', '=', 'held')
      .select((eb) => [eb.fn.countAll<bigint>().as('n'), eb.fn.sum<bigint | null>('amount').as('amount')])
      .executeTakeFirst();
    holds.set({}, BigInt(row?.n ?? 0n));
    held.set({}, BigInt(row?.amount ?? 0n));
  });

  return {
    registry,
    onUsage(r) {
      // Label objects written out rather than spread from a shared one: this runs on every request.
      const { kind, provider, status } = r;
      const isTool = kind === 'tool';
      const model = isTool ? '' : r.resource;
      const tool = isTool ? r.resource : '';
      requests.inc({ kind, model, tool, provider, status });
      requestSeconds.observe({ kind, model, tool, status }, r.latencyMs / 1000);
      if (r.inputTokens > 0) tokens.inc({ kind, model, tool, type: 'input' }, r.inputTokens);
      if (r.outputTokens > 0) tokens.inc({ kind, model, tool, type: 'output' }, r.outputTokens);
      if (r.cost > 0n) credits.inc({ kind, model, tool, provider }, r.cost);
      if (r.errorCode?.startsWith('upstream_') === true)
        upstreamErrors.inc({ provider: r.provider, code: r.errorCode });
    },
    onCall(method, code, seconds) {
      calls.inc({ method, code });
      callSeconds.observe({ method, code }, seconds);
    },
    onOverHold(c) {
      const isTool = c.kind === 'tool';
      overHold.inc({
        kind: c.kind,
        model: isTool ? '' : c.resource,
        tool: isTool ? c.resource : '',
        provider: c.provider,
      });
    },
    onEstimatedUsage(c) {
      estimated.inc({ kind: c.kind, model: c.resource, provider: c.provider });
    },
    onUpstream(upstream, status, seconds) {
      upstreamSeconds.observe({ provider: upstream.provider, upstream: upstream.name, status }, seconds);
    },
    onPayment(gateway, state) {
      payments.inc({ gateway, state });
    },
    onAnswerPath(method, fast) {
      answers.inc({ method, path: fast ? 'fast' : 'translated' });
    },
  };
}
