import type * as Undici from 'undici';
import { Agent, Pool, type Dispatcher } from '../net/undici';
import type { SvcConfig } from '../config/types';
import type { FairQueues } from '../net/fair-queue';

/*
 * The core's one way out to the upstreams (issue 17): every LLM and tool provider sends its HTTP
 * through one undici dispatcher that the composition root builds (`createUpstreamAgent`), handed
 * to each provider under the configured name of its upstream (`UpstreamHttp.forUpstream`). The
 * name travels as a dispatch option, so an interceptor composed over the dispatcher (the upstream
 * timing of `core/metrics/upstream.ts`) knows whose exchange it sees without reading the URL.
 */

/** Which configured upstream an HTTP exchange is for. */
export interface UpstreamLabel {
  /**
   * The configured name: a model's upstream name (`svc-pro#1:openai@api.example.com`, see
   * `UpstreamConfig.name`), or a tool's provider name (`perplexity`; each serves one tool).
   */
  readonly name: string;
  /** The provider kind (`openai`, `anthropic`, `perplexity`, …). */
  readonly provider: string;
}

/**
 * The dispatch option that carries the label. undici hands options it does not know on
 * unchanged, through every interceptor, to the pool (which ignores it).
 */
const UPSTREAM_OPTION = 'svcUpstream';

type LabelledOptions = Dispatcher.DispatchOptions & { readonly [UPSTREAM_OPTION]?: UpstreamLabel };

/** The upstream a dispatch is for, as its caller stated it; undefined for anything else. */
export function upstreamOf(options: Dispatcher.DispatchOptions): UpstreamLabel | undefined {
  return (options as LabelledOptions)[UPSTREAM_OPTION];
}

/** The core's dispatcher, as the providers receive it. */
export interface UpstreamHttp {
  /** A view of the one dispatcher whose every request states `label` (shares its connections; never closed by its user). */
  forUpstream(label: UpstreamLabel): Dispatcher;
  /**
   * The fair queues of the origins' connections (core/net/fair-queue.ts), as many slots per
   * origin as its pool has connections; the model routers take their slots here.
   */
  readonly queues?: FairQueues | undefined;
}

/** Hands `dispatcher` (the Agent with its interceptors) out under each upstream's name. */
export function upstreamHttp(dispatcher: Dispatcher, queues?: FairQueues): UpstreamHttp {
  return {
    queues,
    forUpstream(label) {
      // Object.assign, not `{ ...options, [UPSTREAM_OPTION]: label }`: a spread followed by a key
      // the source lacks gives each request's options a map of its own in V8's optimised code
      // (core/chat/prepare.ts).
      const stamp: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (options, handler) =>
        dispatch(Object.assign({}, options, { [UPSTREAM_OPTION]: label }) as LabelledOptions, handler);
      return dispatcher.compose(stamp);
    },
  };
}

/** Keep-alive limits of the connection pool to one origin. */
export interface ConnectionLimits {
  /** Connections at most. */
  readonly connections: number;
  /** How long an idle connection is kept, in milliseconds (a server's shorter `keep-alive: timeout` wins). */
  readonly keepAliveTimeoutMs: number;
}

/** The LLM upstreams' pools: long streams, many at once; a connection is worth keeping for a minute. */
export const MODEL_CONNECTIONS: ConnectionLimits = { connections: 128, keepAliveTimeoutMs: 60_000 };
/** The tool providers' pools: short search calls to smaller services. */
export const TOOL_CONNECTIONS: ConnectionLimits = { connections: 64, keepAliveTimeoutMs: 10_000 };

export interface UpstreamAgentOptions {
  /** Limits of an origin not in `origins` (default MODEL_CONNECTIONS). */
  readonly defaults?: ConnectionLimits;
  /** Limits by origin (`https://host:port`), e.g. from `upstreamConnections(config)`. */
  readonly origins?: ReadonlyMap<string, ConnectionLimits>;
}

function poolOptions(limits: ConnectionLimits): Undici.Pool.Options {
  return {
    connections: limits.connections,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    keepAliveMaxTimeout: 10 * 60_000,
    pipelining: 1,
  };
}

function originOf(url: string | URL): string {
  try {
    return new URL(String(url)).origin;
  } catch {
    return String(url);
  }
}

/**
 * The one undici Agent for every upstream: a keep-alive pool per origin, created on first use,
 * with that origin's limits. Its owner closes it after the calls that used it.
 */
export function createUpstreamAgent(options: UpstreamAgentOptions = {}): Agent {
  const defaults = options.defaults ?? MODEL_CONNECTIONS;
  const origins = options.origins ?? new Map<string, ConnectionLimits>();
  return new Agent({
    ...poolOptions(defaults),
    factory: (origin, agentOptions) =>
      new Pool(origin, {
        ...(agentOptions as Undici.Pool.Options),
        ...poolOptions(origins.get(originOf(origin)) ?? defaults),
      }),
  });
}

/**
 * Each configured origin's limits: a model upstream's origin gets `limits.upstream_connections`
 * connections (MODEL_CONNECTIONS' 128 by default); a tool provider's origin gets TOOL_CONNECTIONS, unless a
 * model's upstream is on the same origin (a proxy in front of both): one pool serves the origin,
 * and it keeps the larger model limits.
 */
export function upstreamConnections(config: SvcConfig): Map<string, ConnectionLimits> {
  const modelOrigins = new Set<string>();
  for (const model of config.models.values())
    for (const upstream of model.upstreams)
      if (upstream.provider !== 'sandbox' && upstream.baseUrl !== '') modelOrigins.add(originOf(upstream.baseUrl));
  const limits = new Map<string, ConnectionLimits>();
  const model = { ...MODEL_CONNECTIONS, connections: config.limits.upstreamConnections };
  for (const origin of modelOrigins) limits.set(origin, model);
  for (const tool of config.tools.values()) {
    if (tool.provider === 'sandbox' || tool.baseUrl === '') continue;
    const origin = originOf(tool.baseUrl);
    if (!modelOrigins.has(origin)) limits.set(origin, TOOL_CONNECTIONS);
  }
  return limits;
}
