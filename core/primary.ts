/*
 * The light entry for the primary of `svc serve --workers N` (cli/primary.ts, cli/cluster.ts) and
 * for what the CLI reads before it knows which process it is (cli/servers.ts): the environment,
 * the config file, the store (to migrate and checkpoint) and the metrics (to add up the
 * workers'). Nothing here loads the core's services, gRPC, the upstream clients or the adapters,
 * so that the primary, which only migrates, forks, checkpoints and serves metrics, does not hold
 * them in memory (`core/index.ts` re-exports all of it; `scripts/check-structure.mjs` lets cli/
 * import this file besides core/index).
 */
export { loadEnv, parseGrpcAddress, parseWorkers, type SvcEnv } from './config/env';
export { loadConfig } from './config/load';
export { limitsBelowWorkers } from './config/shares';
export type { SvcConfig } from './config/types';
export { migrate, openStore, parseDatabaseUrl } from './store/db';
export { createRegistry, mergeSnapshots, type FamilySnapshot, type MetricsRegistry } from './metrics/registry';
export { startMetricsServer, type MetricsServer } from './metrics/server';
export { startOtlpMetrics, type OtlpMetrics } from './metrics/otlp';
export { processRedactor } from './telemetry/redact';
export type { Telemetry } from './telemetry';
