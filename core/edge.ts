/*
 * The light entry for the HTTP edge: the adapters (adapters/), and `svc gateway` (cli/gateway.ts),
 * which call a core over gRPC and never run one. What they use of the core is its wire (errors,
 * request ids, metadata names, outcome trailers, the chat field table, the tool list's words), the
 * environment and the config file, and the metrics; none of it loads the core's services, the
 * store's drivers (Kysely, better-sqlite3), the upstream clients or the tokenizer's tables, so a
 * gateway does not hold them in memory. `core/index.ts` re-exports all of it for `svc serve`;
 * `scripts/check-structure.mjs` lets cli/ and adapters/ import this file besides core/index.
 */
export {
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
export { maskUrl } from './store/url';
export type { SvcConfig } from './config/types';
export { DEFAULT_LIMITS } from './config/defaults';
export type { InProcessChannel, ServiceDefinitionLike } from './server/in-process';
export {
  CONTENT_TYPE as METRICS_CONTENT_TYPE,
  createRegistry,
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
export {
  entriesOfMetadata,
  metadataOfEntries,
  TunnelFrameKind,
  tunnelFrame,
  type TunnelFrame,
  type TunnelMetadataEntry,
} from './server/tunnel-wire';
export { newRequestId } from './ids';
export { OUTCOME_TRAILERS } from './telemetry/outcome-middleware';
export { TOOL_CATALOG, type ToolCatalogEntry } from './tools/catalog';
export { checkChatInteger, INT32_MAX, RESERVED_CHAT_PARAMS } from './conversation/fields';
export { MAX_PASSWORD, MIN_PASSWORD } from './console/validate';
