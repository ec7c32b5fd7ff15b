import { createConcurrencyLimiter, type ConcurrencyLimiter } from './limits/concurrency';
import { concurrentPerAccount, concurrentPerKey } from './config/shares';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { AccountServiceImplementation } from '../gen/svc/core/v1/accounts';
import type { AuthServiceImplementation } from '../gen/svc/core/v1/auth';
import type { ConsoleServiceImplementation } from '../gen/svc/core/v1/console';
import type { KeyServiceImplementation } from '../gen/svc/core/v1/keys';
import type { ModelServiceImplementation } from '../gen/svc/core/v1/models';
import type { OAuthServiceImplementation } from '../gen/svc/core/v1/oauth';
import type { PaymentServiceImplementation } from '../gen/svc/core/v1/payments';
import type { UsageServiceImplementation } from '../gen/svc/core/v1/usage';
import type { WalletServiceImplementation } from '../gen/svc/core/v1/wallet';
import { createAccountGrpcService } from './accounts/grpc';
import { createAudit } from './accounts/audit';
import { createAccountService, type AccountService } from './accounts/service';
import { createAuthenticator, type Authenticator } from './auth/authenticator';
import type { CoreCallExt } from './auth/context';
import type { SessionResolver } from './auth/types';
import { createAuthGrpcService } from './auth/grpc';
import { createChatGrpcService, type ChatGrpcService } from './chat/grpc';
import { createConsoleGrpcService } from './console/grpc';
import { createConsoleService } from './console/service';
import { createEmbeddingGrpcService, type EmbeddingGrpcService } from './embeddings/grpc';
import { createMediaGrpcService, type MediaGrpcService } from './media/grpc';
import { createImageGenerator } from './media/image-tool';
import { createKeyEvents } from './keys/events';
import { createKeyGrpcService } from './keys/grpc';
import { createModelGrpcService } from './models/grpc';
import { createOAuthGrpcService } from './oauth/grpc';
import { createUpstreamAgent, MODEL_CONNECTIONS, upstreamConnections, upstreamHttp } from './providers/http';
import { createFairQueues } from './net/fair-queue';
import { fairQueueMetrics } from './upstreams/metrics';
import { createToolGrpcService } from './tools/grpc';
import { createToolService } from './tools/service';
import { createIdempotency, idempotencyDeps } from './chat/idempotency';
import { createPriceBook } from './pricing/book';
import { createUsageGrpcService } from './usage/grpc';
import { createWalletGrpcService } from './wallet/grpc';
import { createMeter } from './billing/meter';
import type { SvcConfig } from './config/types';
import { DEFAULT_OAUTH } from './config/defaults';
import type { GuardedFetchOptions } from './net/guarded-fetch';
import { processRedactor } from './telemetry/redact';
import type { CoreDeps } from './deps';
import { createKeyService, type KeyService } from './keys/service';
import { oauthAccessTokens } from './oauth/principal';
import { createOAuthService, type OAuthService } from './oauth/service';
import { createRateLimiter, type RateLimiter } from './limits/rate-limiter';
import { limitTokens } from './limits/token-meter';
import { createTokenLimiter, type TokenLimiter } from './limits/token-limiter';
import type { Store } from './store/db';
import { createCoreMetrics, type CoreMetrics } from './metrics/core-metrics';
import type { MetricsRegistry } from './metrics/registry';
import { timeUpstreams } from './metrics/upstream';
import { createUpstreamMetrics } from './upstreams/metrics';
import { createUsageQuery, type UsageQuery } from './usage/query';
import { createUsageRecorder } from './usage/recorder';
import { createBatchedWalletService } from './wallet/batched';
import { createGateways } from './payments/gateways';
import { createPaymentGrpcService } from './payments/grpc';
import { createPaymentService, type PaymentService } from './payments/service';

/**
 * Every gRPC service of the core, implemented: the gRPC server and the in-process channel only
 * bind them to their definitions (`core/server/start.ts`).
 */
export interface CoreServices {
  readonly accounts: AccountServiceImplementation<CoreCallExt>;
  readonly auth: AuthServiceImplementation<CoreCallExt>;
  readonly keys: KeyServiceImplementation<CoreCallExt>;
  readonly wallet: WalletServiceImplementation<CoreCallExt>;
  readonly models: ModelServiceImplementation<CoreCallExt>;
  readonly chat: ChatGrpcService;
  readonly embeddings: EmbeddingGrpcService;
  readonly media: MediaGrpcService;
  readonly tools: ReturnType<typeof createToolGrpcService>;
  readonly console: ConsoleServiceImplementation<CoreCallExt>;
  readonly usage: UsageServiceImplementation<CoreCallExt>;
  readonly oauth: OAuthServiceImplementation<CoreCallExt>;
  readonly payments: PaymentServiceImplementation<CoreCallExt>;
}

/** Everything the core is made of, wired once; the gRPC server and the CLI both use it. */
export interface Core {
  readonly deps: CoreDeps;
  readonly accounts: AccountService;
  readonly keys: KeyService;
  /** The console's OAuth 2.1 authorization server for MCP clients (SPEC §8). */
  readonly oauth: OAuthService;
  readonly authenticator: Authenticator;
  /** Console sessions, for the context middleware (`authorization: Session TOKEN`). */
  readonly sessions: SessionResolver;
  readonly rateLimiter: RateLimiter;
  /** Model tokens per minute per key (`limits.tokens_per_minute`); counted by the meter. */
  readonly tokenLimiter: TokenLimiter;
  /** Calls in flight per key and account (`limits.concurrent_per_*`), taken at admission. */
  readonly concurrency: ConcurrencyLimiter;
  readonly adminToken: string | undefined;
  /** What the console adapter presents to state a browser's address (see CoreOptions). */
  readonly adapterToken: string | undefined;
  /** The core's metrics (in `metrics.registry`, which `GET /metrics` renders). */
  readonly metrics: CoreMetrics;
  /** Usage history (the UsageService and `svc usage` read it). */
  readonly usage: UsageQuery;
  /** Wallet top-ups through the payment gateways (SPEC §12). */
  readonly payments: PaymentService;
  /** The implementation of every gRPC service, for the server and the in-process channel to bind. */
  readonly services: CoreServices;
  /**
   * Closes the upstream dispatcher when the core made its own (not one it was handed: its owner
   * closes that); after the calls that used it. Closing twice is harmless.
   */
  closeUpstreams(): Promise<void>;
  /** Starts the hold reaper (every `intervalMs`; default half the hold TTL, at most 30 s). */
  startReaper(intervalMs?: number): void;
  /**
   * Starts payment reconciliation (every `intervalMs`, default a minute; SPEC §12): safe on every
   * replica at once. Nothing runs when no gateway is configured.
   */
  startReconciler(intervalMs?: number): void;
  /** Stops the reaper and the reconciler. Does not close the store (its owner does). */
  stop(): void;
}

export interface CoreOptions {
  readonly config: SvcConfig;
  readonly store: Store;
  readonly logger: Logger;
  readonly adminToken: string | undefined;
  /**
   * The secret by which the console adapter proves itself (metadata `x-svc-adapter-token`) so
   * that the browser address it states is used for sign-in limits. Default: the admin token;
   * `svc serve` makes one per process when there is none.
   */
  readonly adapterToken?: string | undefined;
  readonly now?: () => number;
  /** Auth cache lifetime; tests shorten it. */
  readonly authCacheTtlMs?: number;
  /** How long the stored exchange rate is trusted (default 2 s; SPEC §15 allows 5 s); tests shorten it. */
  readonly priceCacheMs?: number;
  /** Where the core's metrics go; by default a registry of its own (`core.metrics.registry`). */
  readonly metrics?: MetricsRegistry;
  /** A limiter shared by several cores (Redis); by default one in this process. */
  readonly rateLimiter?: RateLimiter;
  /** A tokens-per-minute limiter shared by several cores (Redis); by default one in this process. */
  readonly tokenLimiter?: TokenLimiter;
  /** A calls-in-flight limiter shared by several cores (Redis); by default one in this process. */
  readonly concurrency?: ConcurrencyLimiter;
  /**
   * The one undici dispatcher for every upstream HTTP call (LLM and tool providers), built by the
   * composition root (`createUpstreamAgent`) and closed by it; a test may hand in its own. The
   * core composes its upstream timing interceptor over it. By default the core makes an Agent of
   * its own, which `closeUpstreams()` closes.
   */
  readonly dispatcher?: Dispatcher;
  /**
   * Tests only: OAuth Client ID Metadata Documents may be served over http from loopback (the
   * operator's form of this switch is `oauth.insecure_metadata_documents`).
   */
  readonly oauthLoopbackMetadataDocuments?: boolean;
  /** Tests only: the guarded fetcher's options for metadata documents (a resolver, a deadline). */
  readonly oauthDocumentFetch?: GuardedFetchOptions;
}

/** The composition of the core's domains. */
export function createCore(options: CoreOptions): Core {
  const { config, store, logger } = options;
  // Upstream keys never leave in a log line, a span or an error message.
  // Upstream keys never leave in a log line, a span or an error message; nor do configured
  // header values, which often carry a second credential.
  processRedactor.add([
    ...[...config.models.values()].flatMap((model) =>
      model.upstreams.flatMap((upstream) => [upstream.apiKey, ...Object.values(upstream.headers)]),
    ),
    ...[...config.tools.values()].map((entry) => entry.apiKey),
    ...[...(config.payments?.gateways.values() ?? [])].map((gateway) => gateway.merchant),
  ]);
  const now = options.now ?? Date.now;
  const metrics = createCoreMetrics({ store, ...(options.metrics === undefined ? {} : { registry: options.metrics }) });
  // The wallet writes the usage record a settle or release carries in the same transaction (the
  // meter's calls); the recorder writes the others. Both announce each written record once.
  const wallet = createBatchedWalletService({
    store,
    now,
    holdTtlSeconds: config.limits.holdTtlSeconds,
    onRecorded: metrics.onUsage,
  });
  // Every upstream exchange goes through this one dispatcher and is timed under the configured
  // name of its upstream (the providers get it through `http.forUpstream`).
  const ownDispatcher = options.dispatcher === undefined;
  const connections = upstreamConnections(config);
  const dispatcher = options.dispatcher ?? createUpstreamAgent({ origins: connections });
  // The calls to an origin wait their tenant's turn for one of its pool's connections (issue 48).
  const queues = createFairQueues({
    slotsOf: (origin) => (connections.get(origin) ?? MODEL_CONNECTIONS).connections,
    waitMs: config.limits.upstreamQueueMs,
    events: fairQueueMetrics(metrics.registry, () => queues),
  });
  const http = upstreamHttp(dispatcher.compose(timeUpstreams(metrics.onUpstream)), queues);
  const usage = createUsageRecorder({ store, now, onRecorded: metrics.onUsage });
  const tokenLimiter =
    options.tokenLimiter ?? createTokenLimiter({ tokensPerMinute: config.limits.tokensPerMinute ?? 0, now });
  const meter = limitTokens(
    createMeter({
      wallet,
      usage,
      logger,
      now,
      holdTtlSeconds: config.limits.holdTtlSeconds,
      metrics: { overHold: metrics.onOverHold, estimated: metrics.onEstimatedUsage },
    }),
    tokenLimiter,
    logger,
  );
  const authenticator = createAuthenticator({
    store,
    accessTokens: oauthAccessTokens(store),
    logger,
    now,
    ...(options.authCacheTtlMs === undefined ? {} : { cacheTtlMs: options.authCacheTtlMs }),
  });
  const accounts = createAccountService({ store, now });
  const audit = createAudit({ store, now, logger });
  const keys = createKeyService({
    store,
    now,
    onRevoke: (keyId) => authenticator.invalidate(keyId),
    catalog: config,
  });
  const oauthConfig = config.oauth ?? DEFAULT_OAUTH;
  const oauth = createOAuthService({
    store,
    logger,
    now,
    onRevoke: (grantId) => authenticator.invalidate(grantId),
    insecureMetadataDocuments: options.oauthLoopbackMetadataDocuments === true || oauthConfig.insecureMetadataDocuments,
    registrationLimits: {
      perAddressPerHour: oauthConfig.registrationsPerAddressPerHour,
      perMinute: oauthConfig.registrationsPerMinute,
    },
    ...(options.oauthDocumentFetch === undefined ? {} : { documentFetchOptions: options.oauthDocumentFetch }),
  });
  if (oauthConfig.insecureMetadataDocuments)
    logger.warn(
      'oauth.insecure_metadata_documents is on: metadata documents may be fetched over http from any address (test setups only)',
    );
  if (config.responses?.mcpInsecureServers === true)
    logger.warn(
      'responses.mcp_insecure_servers is on: the hosted mcp tool may reach servers over http on any address (test setups only)',
    );
  const rateLimiter =
    options.rateLimiter ?? createRateLimiter({ requestsPerMinute: config.limits.requestsPerMinute, now });
  const prices = createPriceBook({
    store,
    config,
    now,
    logger,
    ...(options.priceCacheMs === undefined ? {} : { cacheMs: options.priceCacheMs }),
  });
  const deps: CoreDeps = { config, store, wallet, meter, logger, http, now, prices };
  const adapterToken = options.adapterToken ?? options.adminToken;
  const usageQuery = createUsageQuery({ store, now });
  const payments = createPaymentService({
    store,
    logger,
    now,
    config: config.payments,
    gateways: createGateways(config.payments, http),
    onState: metrics.onPayment,
  });
  const consoleService = createConsoleService({ ...deps, keys, adminToken: options.adminToken });
  // Built once and shared: the tool providers serve MCP's tools and the Responses API's hosted
  // web_search alike; one Idempotency-Key store serves chat, Responses and embeddings.
  const tools = createToolService(deps);
  const idempotency = createIdempotency(idempotencyDeps(deps));
  // Routing's /metrics families, shared by the chat and embedding models' upstreams.
  const upstreamMetrics = createUpstreamMetrics(metrics.registry);
  const services: CoreServices = {
    accounts: createAccountGrpcService({ accounts, audit, signIns: consoleService.signIns }),
    auth: createAuthGrpcService(),
    keys: createKeyGrpcService({ keys, events: createKeyEvents({ store, now }), now }),
    wallet: createWalletGrpcService({ wallet, audit }),
    models: createModelGrpcService(deps),
    chat: createChatGrpcService(deps, {
      upstreamMetrics,
      tools,
      idempotency,
      onAnswerPath: metrics.onAnswerPath,
      // The Responses API's hosted image_generation tool, when the configuration names its model.
      images: createImageGenerator(deps, { upstreamMetrics }),
    }),
    embeddings: createEmbeddingGrpcService(deps, { idempotency, upstreamMetrics }),
    media: createMediaGrpcService(deps, { upstreamMetrics, idempotency }),
    tools: createToolGrpcService(deps, { tools }),
    console: createConsoleGrpcService({ console: consoleService, adapterToken }),
    usage: createUsageGrpcService({ usage: usageQuery }),
    oauth: createOAuthGrpcService({ oauth, adapterToken }),
    payments: createPaymentGrpcService({ payments }),
  };
  let reaper: NodeJS.Timeout | undefined;
  let reconciler: NodeJS.Timeout | undefined;
  let reconciling: AbortController | undefined;

  return {
    deps,
    accounts,
    keys,
    oauth,
    authenticator,
    sessions: { resolve: consoleService.caller },
    rateLimiter,
    tokenLimiter,
    concurrency:
      options.concurrency ??
      createConcurrencyLimiter({
        perKey: concurrentPerKey(config),
        perAccount: concurrentPerAccount(config),
        workers: config.limits.sharedByWorkers ?? 1,
      }),
    adminToken: options.adminToken,
    adapterToken,
    metrics,
    usage: usageQuery,
    payments,
    services,
    async closeUpstreams() {
      if (ownDispatcher) await dispatcher.close();
    },
    // A short hold TTL is reaped about as often: the holds of a crashed core free their credit
    // soon after they expire, not up to 30 s later.
    startReaper(intervalMs = Math.min(30_000, Math.max(500, (config.limits.holdTtlSeconds * 1000) / 2))) {
      if (reaper !== undefined) return;
      reaper = setInterval(() => {
        wallet
          .reapExpired()
          .then((n) => n > 0 && logger.info({ released: n }, 'released expired holds'))
          .catch((error: unknown) => logger.error({ err: error }, 'hold reaper failed'));
      }, intervalMs);
      reaper.unref();
    },
    startReconciler(intervalMs = 60_000) {
      const offer = payments.offer();
      if (reconciler !== undefined || offer === undefined) return;
      logger.info({ gateways: offer.gateways, everyMs: intervalMs }, 'payment reconciliation started');
      let running = false;
      reconciler = setInterval(() => {
        // A round still running (a slow gateway) is not started again on top of itself.
        if (running) return;
        running = true;
        reconciling = new AbortController();
        payments
          .reconcile(reconciling.signal)
          .then((r) => (r.paid > 0 || r.expired > 0) && logger.info(r, 'payments reconciled'))
          .catch((error: unknown) => logger.error({ err: error }, 'payment reconciliation failed'))
          .finally(() => (running = false));
      }, intervalMs);
      reconciler.unref();
    },
    stop() {
      if (reaper !== undefined) clearInterval(reaper);
      reaper = undefined;
      if (reconciler !== undefined) clearInterval(reconciler);
      reconciler = undefined;
      reconciling?.abort();
    },
  };
}
