import { upstreamCause } from './cause';
import { trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { ModelConfig, UpstreamConfig } from '../config/types';
import { isSvcError, SvcError } from '../errors';
import type { ChatProvider, JsonObject, NativeCalls, PassThroughCalls, WireChatRequest } from '../providers/llm/types';
import { createBreaker, type Breaker } from './breaker';
import { originOfBaseUrl, tenantOf, type FairQueue, type FairQueues, type Release } from '../net/fair-queue';
import type { UpstreamMetrics } from './metrics';

/** One upstream of a model with its provider (`P`: chat, embeddings, …) and its routing state. */
export interface RoutedUpstream<P = ChatProvider> {
  readonly config: UpstreamConfig;
  readonly provider: P;
  readonly breaker: Breaker;
  /** Calls in flight now. */
  inFlight: number;
}

export interface RouterDeps {
  readonly logger: Logger;
  readonly metrics: UpstreamMetrics;
  /** Unix milliseconds, for the breakers. */
  readonly now: () => number;
  /** A number in [0, 1) for the weighted spread; injectable so tests can pin an order. */
  readonly random?: () => number;
  /**
   * The fair queues of the upstream origins' connections (core/net/fair-queue.ts): an
   * attempt on an upstream with a base URL waits its tenant's turn for a slot of its origin and
   * keeps it until it ends (a stream until its last chunk). Absent: no queue (tests, tools).
   */
  readonly queues?: FairQueues | undefined;
}

/**
 * Routing over one model's upstreams, for any kind of provider (DESIGN point 6: the chat runner
 * and the embedding runner alike; providers know nothing of fallback).
 */
export interface UpstreamRouter<P> {
  readonly upstreams: readonly RoutedUpstream<P>[];
  /** One call: `attempt` on each upstream in turn until one answers or fails for good. */
  call<T>(attempt: (provider: P) => Promise<T>, signal: AbortSignal): Promise<T>;
  /**
   * One stream: the first item is pulled from each upstream in turn before anything is yielded,
   * so a failed attempt has sent the caller nothing; after the first item the upstream owns it.
   */
  stream<T>(open: (provider: P) => AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T>;
}

/** A routed chat provider plus a look at its upstreams' breakers (tests, diagnostics). */
export interface RoutedProvider extends ChatProvider {
  readonly upstreams: readonly RoutedUpstream[];
}

// Failures of the upstream itself, which another upstream may not share. A refusal of the
// client's request (4xx other than 429) would be refused by every upstream alike, and a
// cancelled call has nobody left to answer.
const RETRIABLE = new Set(['upstream_error', 'upstream_unavailable', 'upstream_timeout', 'upstream_rate_limited']);

/** Whether an upstream's failure lets a call move on to the next upstream (SPEC §4). */
export function isRetriable(error: unknown): boolean {
  return isSvcError(error) && RETRIABLE.has(error.code);
}

/**
 * Orders a model's upstreams for one call: priorities ascending; within one priority a weighted
 * random order (each pick takes an upstream with probability weight / remaining weight).
 */
export function attemptOrder<T extends { readonly config: Pick<UpstreamConfig, 'priority' | 'weight'> }>(
  upstreams: readonly T[],
  random: () => number,
): T[] {
  const groups = new Map<number, T[]>();
  for (const u of upstreams) {
    const group = groups.get(u.config.priority);
    if (group === undefined) groups.set(u.config.priority, [u]);
    else group.push(u);
  }
  const order: T[] = [];
  for (const priority of [...groups.keys()].sort((a, b) => a - b)) {
    const left = [...(groups.get(priority) ?? [])];
    while (left.length > 1) {
      const total = left.reduce((sum, u) => sum + u.config.weight, 0);
      let point = random() * total;
      let pick = left.length - 1;
      for (let i = 0; i < left.length; i += 1) {
        point -= (left[i] as T).config.weight;
        if (point < 0) {
          pick = i;
          break;
        }
      }
      order.push(...left.splice(pick, 1));
    }
    order.push(...left);
  }
  return order;
}

/**
 * The router of one model. A call goes to the upstreams in `attemptOrder`, skipping those whose
 * breaker is open (models with several upstreams) or that are at `max_concurrency`, and moves on
 * after a retriable failure **before the first chunk**. With every upstream skipped the call is
 * `upstream_unavailable` (503); with every attempt failed, the last failure. The wallet is not
 * involved: the runner holds and settles once around the whole routed call.
 */
export function createUpstreamRouter<P>(
  model: Pick<ModelConfig, 'id' | 'breaker'>,
  members: readonly { readonly config: UpstreamConfig; readonly provider: P }[],
  deps: RouterDeps,
): UpstreamRouter<P> {
  const random = deps.random ?? Math.random;
  // A breaker routes around an upstream; a model with one has nowhere to go, and failing fast
  // would only replace the upstream's own error with a 503 and delay its recovery by open_s.
  const breaker = members.length > 1 ? model.breaker : { failures: Number.POSITIVE_INFINITY, openS: 0 };
  const upstreams: RoutedUpstream<P>[] = members.map((m) => ({
    config: m.config,
    provider: m.provider,
    breaker: createBreaker(breaker, deps.now, (state) => {
      deps.metrics.breakerOpen(m.config.name, state === 'open');
      deps.logger.warn({ model: model.id, upstream: m.config.name, breaker: state }, 'upstream breaker changed');
    }),
    inFlight: 0,
  }));
  for (const u of upstreams) deps.metrics.breakerOpen(u.config.name, false);
  const queues = new Map<RoutedUpstream<P>, FairQueue>();
  if (deps.queues !== undefined)
    for (const u of upstreams) {
      const origin = originOfBaseUrl(u.config.baseUrl);
      if (origin !== undefined && u.config.provider !== 'sandbox') queues.set(u, deps.queues.forOrigin(origin));
    }
  const nothing: Release = () => undefined;

  /**
   * A slot of `u`'s origin for this call, in its tenant's turn. Waiting it out is the attempt's
   * failure `unavailable` (the next upstream may be tried; the breaker is not told: the upstream
   * did nothing wrong); a client that leaves while it waits fails the call `cancelled` at once.
   */
  function slot(u: RoutedUpstream<P>, signal: AbortSignal): Promise<Release> | Release {
    const queue = queues.get(u);
    return queue === undefined ? nothing : queue.acquire(tenantOf(signal), signal);
  }

  /** The wait for a slot failed: true when the call may move on to the next upstream. */
  function missedSlot(u: RoutedUpstream<P>, error: unknown): boolean {
    u.inFlight -= 1;
    u.breaker.abandon();
    const outcome = isSvcError(error) && error.code === 'unavailable' ? 'queue_timeout' : outcomeOf(error);
    deps.metrics.attempt(u.config.name, outcome);
    return outcome === 'queue_timeout';
  }

  function admit(u: RoutedUpstream<P>): boolean {
    const limit = u.config.maxConcurrency;
    if (limit !== undefined && u.inFlight >= limit) {
      deps.metrics.attempt(u.config.name, 'skipped_full');
      return false;
    }
    if (!u.breaker.tryAcquire()) {
      deps.metrics.attempt(u.config.name, 'skipped_open');
      return false;
    }
    u.inFlight += 1;
    return true;
  }

  function record(u: RoutedUpstream<P>, started: number, outcome: string, attempt: number, error?: unknown): void {
    const latencyMs = deps.now() - started;
    deps.metrics.attempt(u.config.name, outcome);
    // The failure's cause (ECONNREFUSED, DNS, TLS, timeout, HTTP status): the operator's to see.
    const cause = error === undefined ? undefined : upstreamCause(error);
    trace.getActiveSpan()?.addEvent('svc.upstream.attempt', {
      'svc.upstream.name': u.config.name,
      'svc.upstream.attempt': attempt,
      'svc.upstream.outcome': outcome,
      'svc.upstream.latency_ms': latencyMs,
      ...(cause === undefined ? {} : { 'svc.upstream.cause': cause }),
    });
    const line = {
      model: model.id,
      upstream: u.config.name,
      attempt,
      outcome,
      latencyMs,
      ...(cause === undefined ? {} : { cause }),
    };
    if (outcome === 'ok') deps.logger.debug(line, 'upstream attempt');
    else deps.logger.info(line, 'upstream attempt failed');
  }

  /** Judges a failed attempt: the breaker's verdict, and whether the call may move on. */
  function judge(u: RoutedUpstream<P>, error: unknown, signal: AbortSignal): boolean {
    if (signal.aborted || (isSvcError(error) && error.code === 'cancelled')) {
      u.breaker.abandon();
      return false;
    }
    if (isRetriable(error)) {
      u.breaker.failure();
      return true;
    }
    // The upstream answered, refusing the client's own request: it is healthy.
    u.breaker.success();
    return false;
  }

  function unavailable(): SvcError {
    return new SvcError('upstream_unavailable', 'The model provider is unavailable', {
      cause: new Error(`${model.id}: every upstream is open or at its concurrency limit`),
    });
  }

  const outcomeOf = (error: unknown): string => (isSvcError(error) ? error.code : 'internal');

  async function call<T>(attemptOn: (provider: P) => Promise<T>, signal: AbortSignal): Promise<T> {
    let lastError: unknown;
    let attempt = 0;
    let previous: RoutedUpstream<P> | undefined;
    for (const u of attemptOrder(upstreams, random)) {
      if (!admit(u)) continue;
      let release: Release;
      try {
        release = await slot(u, signal);
      } catch (error) {
        if (!missedSlot(u, error)) throw error;
        lastError = error;
        continue;
      }
      if (previous !== undefined) deps.metrics.fallback(model.id, previous.config.name);
      attempt += 1;
      const started = deps.now();
      try {
        const result = await attemptOn(u.provider);
        u.breaker.success();
        record(u, started, 'ok', attempt);
        return result;
      } catch (error) {
        record(u, started, outcomeOf(error), attempt, error);
        if (!judge(u, error, signal)) throw error;
        lastError = error;
        previous = u;
      } finally {
        u.inFlight -= 1;
        release();
      }
    }
    throw lastError ?? unavailable();
  }

  async function* stream<T>(open: (provider: P) => AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T> {
    let lastError: unknown;
    let attempt = 0;
    let previous: RoutedUpstream<P> | undefined;
    for (const u of attemptOrder(upstreams, random)) {
      if (!admit(u)) continue;
      let release: Release;
      try {
        release = await slot(u, signal);
      } catch (error) {
        if (!missedSlot(u, error)) throw error;
        lastError = error;
        continue;
      }
      if (previous !== undefined) deps.metrics.fallback(model.id, previous.config.name);
      attempt += 1;
      const started = deps.now();
      let iterator: AsyncIterator<T> | undefined;
      let first: IteratorResult<T>;
      try {
        iterator = open(u.provider)[Symbol.asyncIterator]();
        first = await iterator.next();
      } catch (error) {
        u.inFlight -= 1;
        release();
        record(u, started, outcomeOf(error), attempt, error);
        if (!judge(u, error, signal)) throw error;
        lastError = error;
        previous = u;
        continue;
      }
      // The first item arrived: from here on this upstream owns the call, for better or worse.
      u.breaker.success();
      record(u, started, 'ok', attempt);
      let finished = false;
      try {
        if (first.done === true) return;
        yield first.value;
        for (;;) {
          const next = await iterator.next();
          if (next.done === true) break;
          yield next.value;
        }
        finished = true;
      } catch (error) {
        finished = true;
        if (isRetriable(error) && !signal.aborted) {
          // Not retried (the caller has output already), but it counts against the upstream.
          u.breaker.failure();
          deps.metrics.attempt(u.config.name, `midstream_${outcomeOf(error)}`);
        }
        throw error;
      } finally {
        u.inFlight -= 1;
        try {
          if (!finished) await iterator.return?.();
        } finally {
          release();
        }
      }
      return;
    }
    throw lastError ?? unavailable();
  }

  return { upstreams, call, stream };
}

/**
 * A `ChatProvider` over a model's upstreams: `createUpstreamRouter` with the chat calls. Native
 * pass-through (a client body in an upstream's own wire) is offered only when every upstream
 * speaks that wire, so that a fallback never has to send a body its upstream cannot read; a model
 * that mixes wires serves every call through the translation.
 */
export function createRoutedProvider(
  model: Pick<ModelConfig, 'id' | 'breaker'>,
  members: readonly { readonly config: UpstreamConfig; readonly provider: ChatProvider }[],
  deps: RouterDeps,
): RoutedProvider {
  const router = createUpstreamRouter(model, members, deps);
  const kinds = [...new Set(members.map((m) => m.provider.name))];
  const wires = new Set(members.map((m) => m.provider.native?.wire));
  const [wire] = wires;
  const native: NativeCalls | undefined =
    wires.size === 1 && wire !== undefined
      ? {
          wire,
          // The client's allow-listed headers (anthropic-beta) go to whichever upstream answers.
          complete: (body, request, signal, headers) =>
            router.call((provider) => nativeOf(provider).complete(body, request, signal, headers), signal),
          stream: (body, request, signal, headers) =>
            router.stream((provider) => nativeOf(provider).stream(body, request, signal, headers), signal),
          // The wire's fast path likewise only when every upstream has it (core/chat/fast-path.ts).
          ...(members.every((m) => m.provider.native?.passThrough !== undefined)
            ? {
                passThrough: (
                  body: JsonObject,
                  request: WireChatRequest,
                  signal: AbortSignal,
                  headers?: Readonly<Record<string, string>>,
                ) => router.stream((provider) => nativePassThroughOf(provider)(body, request, signal, headers), signal),
              }
            : {}),
          // Native compaction likewise only when every upstream has it: a fallback never gets a
          // compaction_trigger, or another upstream's compaction item, it cannot serve.
          ...(members.every((m) => m.provider.native?.compact !== undefined)
            ? {
                compact: (body: JsonObject, request: WireChatRequest, signal: AbortSignal) =>
                  router.call((provider) => compactOf(provider)(body, request, signal), signal),
              }
            : {}),
        }
      : undefined;
  // The fast path likewise, only when every upstream can serve it (core/chat/fast-path.ts).
  const passThrough: PassThroughCalls | undefined = members.every((m) => m.provider.passThrough !== undefined)
    ? {
        wire: 'openai',
        stream: (request, includeUsage, signal) =>
          router.stream((provider) => passThroughOf(provider).stream(request, includeUsage, signal), signal),
        // Non-stream calls only when every upstream can serve them as well.
        ...(members.every((m) => m.provider.passThrough?.complete !== undefined)
          ? {
              complete: (request: WireChatRequest, signal: AbortSignal) =>
                router.call((provider) => passThroughCompleteOf(provider)(request, signal), signal),
            }
          : {}),
      }
    : undefined;
  return {
    name: kinds.length === 1 ? (kinds[0] as string) : kinds.join('+'),
    upstreams: router.upstreams,
    complete: (request, signal) => router.call((provider) => provider.complete(request, signal), signal),
    stream: (request, signal) => router.stream((provider) => provider.stream(request, signal), signal),
    ...(native === undefined ? {} : { native }),
    ...(passThrough === undefined ? {} : { passThrough }),
  };
}

function compactOf(provider: ChatProvider): NonNullable<NativeCalls['compact']> {
  const compact = provider.native?.compact;
  if (compact === undefined) throw new SvcError('internal', `provider ${provider.name} does not compact natively`);
  return compact;
}

function nativePassThroughOf(provider: ChatProvider): NonNullable<NativeCalls['passThrough']> {
  const passThrough = provider.native?.passThrough;
  if (passThrough === undefined) throw new SvcError('internal', `provider ${provider.name} has no native fast path`);
  return passThrough;
}

function nativeOf(provider: ChatProvider): NativeCalls {
  if (provider.native === undefined) throw new SvcError('internal', `provider ${provider.name} has no native calls`);
  return provider.native;
}

function passThroughOf(provider: ChatProvider): PassThroughCalls {
  if (provider.passThrough === undefined) throw new SvcError('internal', `provider ${provider.name} has no fast path`);
  return provider.passThrough;
}

function passThroughCompleteOf(provider: ChatProvider): NonNullable<PassThroughCalls['complete']> {
  const complete = provider.passThrough?.complete;
  if (complete === undefined) throw new SvcError('internal', `provider ${provider.name} has no non-stream fast path`);
  return complete;
}
