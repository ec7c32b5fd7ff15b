/*
 * The core's one entry for cli/ and adapters/ (package.json `main`): what they may use of it.
 * Everything else under core/ is internal; `scripts/check-structure.mjs` (run by `npm run lint`)
 * fails when cli/ or adapters/ import past this file. The one other entry is `core/telemetry`,
 * which the CLI requires before anything else so that the instrumentations see every module load.
 */

// Composition: the core's services, its gRPC server and the in-process channel that binds them.
export { createCore, type Core, type CoreOptions } from './create-core';
export { startCoreServer, type CoreServer } from './server/start';
export type { InProcessChannel, ServiceDefinitionLike } from './server/in-process';

// Configuration: the environment and the config file, each read once by the composition root.
export {
  defaultDatabaseUrl,
  installationDir,
  loadEnv,
  parseGrpcAddress,
  parseTcpAddress,
  parseWorkers,
  type GrpcAddress,
  type SvcEnv,
  type TcpAddress,
} from './config/env';
export { loadConfig } from './config/load';
export { limitsBelowWorkers, workerConfig } from './config/shares';
export type { SvcConfig, TokenPrice } from './config/types';

// Infrastructure the composition root builds and hands in.
export { DatabaseMissingError, maskUrl, migrate, openStore, parseDatabaseUrl, type Store } from './store/db';
export { createUpstreamAgent, upstreamConnections } from './providers/http';
export { DEFAULT_LIMITS } from './config/defaults';
export { connectRedis, createRedisRateLimiter, redisHost, redisReady } from './limits/redis-rate-limiter';
export { createRedisTokenLimiter } from './limits/redis-token-limiter';
export { createConcurrencyLimiter, createRedisConcurrencyLimiter } from './limits/concurrency';
export { concurrentPerAccount, concurrentPerKey } from './config/shares';
export {
  CONTENT_TYPE as METRICS_CONTENT_TYPE,
  createRegistry,
  mergeSnapshots,
  type FamilySnapshot,
  type MetricsRegistry,
} from './metrics/registry';
export { startMetricsServer, type MetricsServer } from './metrics/server';
export { startOtlpMetrics, type OtlpMetrics } from './metrics/otlp';
export { processRedactor } from './telemetry/redact';
export type { Telemetry } from './telemetry';

// The wire between adapters and core: errors, request ids and outcome trailers.
export * from './errors';
export { CLIENT_REQUEST_ID, SESSION_ID_METADATA } from './auth/context';
export { STREAM_BATCH_HEADER } from './chat/stream-batch';
export { newRequestId, randomBase64url, randomHex } from './ids';
export { OUTCOME_TRAILERS } from './telemetry/outcome-middleware';

// The tool list's words the adapters show without a call (MCP instructions, console labels).
export { TOOL_CATALOG, type ToolCatalogEntry } from './tools/catalog';
export { describeMediaPrice, mediaPriceLines, type MediaPriceLine } from './media/pricing';

// The chat field table the adapters read (what the neutral form carries, and integer bounds).
export { checkChatInteger, INT32_MAX, RESERVED_CHAT_PARAMS } from './conversation/fields';

// What the operator CLI (`svc admin`, `svc usage`) does on the database directly.
export { createAccountService, type AccountService } from './accounts/service';
export { formatKeyGrant, parseExpiry, parseGrace, parseKeyGrant } from './auth/scope';
export { parseCap } from './keys/caps';
export { splitNames } from './keys/limits';
export { checkConcurrentLimit, createKeyService, type ApiKeyView, type KeyService } from './keys/service';
export { createWalletService } from './wallet/service';
export type { LedgerEntryView, WalletService, WalletView } from './wallet/types';
export { createUsageQuery, MAX_PAGE_SIZE, type UsageFilter, type UsageView } from './usage/query';
export { consoleDb } from './console/tables';
export { createAccountWithSignIn, listAccounts, setSignIn } from './console/accounts';
export { MAX_PASSWORD, MIN_PASSWORD } from './console/validate';

// Prices from the dollar (`svc price …`, SPEC §15).
export { createRateStore, rateRefusal, type RateStore, type RateView } from './pricing/rates';
export { listPrices, mediaPriceAt, type ModelPrices } from './pricing/prices';
export { createAccountMargins } from './pricing/margins';
export { Decimal } from './config/decimal';
export { fullTariff } from './config/tariff';
export { createAudit } from './accounts/audit';

// Wallet top-ups through payment gateways (`svc payment list`).
export { createPaymentService, type PaymentService } from './payments/service';
export type { PaymentState, PaymentView } from './payments/types';
export { isStoreUnreachable, storeAnswers, storeUnavailable } from './store/outage';
