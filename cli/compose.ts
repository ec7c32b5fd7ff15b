import fs from 'node:fs';
import pino, { type Logger } from 'pino';
import { connectCore, type CoreConnection } from '../adapters/http/core-client';
import { startGateway, type Gateway } from '../adapters/http/server';
import { loadConfig } from '../core/config/load';
import type { SvcConfig } from '../core/config/types';
import { loadEnv, parseTcpAddress, type SvcEnv, type GrpcAddress, type TcpAddress } from '../core/config/env';
import { createCore } from '../core/create-core';
import type { Redis } from 'ioredis';
import { connectRedis, createRedisRateLimiter, redisHost, redisReady } from '../core/limits/redis-rate-limiter';
import { createRedisTokenLimiter } from '../core/limits/redis-token-limiter';
import { createRegistry, type MetricsRegistry } from '../core/metrics/registry';
import { startMetricsServer, type MetricsServer } from '../core/metrics/server';
import { startOtlpMetrics, type OtlpMetrics } from '../core/metrics/otlp';
import { startCoreServer, type CoreServer } from '../core/server/start';
import { migrate, openStore, type Store } from '../core/store/db';
import type { Telemetry } from '../core/telemetry';

/** What the composition root was handed by the entry point (telemetry must start first). */
export interface RunOptions {
  readonly telemetry?: Telemetry | undefined;
}

function createLogger(env: SvcEnv): Logger {
  return pino({
    level: env.logLevel,
    base: { service: 'svc' },
    // Defence in depth: whatever a log call passes, these never reach the log.
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        'headers.authorization',
        'key',
        'secret',
        '*.secret',
        'apiKey',
        '*.apiKey',
      ],
      censor: '[redacted]',
    },
  });
}

function describeConfig(config: SvcConfig, logger: Logger): void {
  for (const model of config.models.values()) {
    if (model.provider === 'sandbox')
      logger.warn(
        { model: model.id },
        'model served by the built-in SANDBOX provider (offline, deterministic answers; configure a real upstream in SVC_CONFIG)',
      );
  }
  for (const tool of config.tools.values()) {
    if (tool.provider === 'sandbox')
      logger.warn(
        { tool: tool.name },
        'tool served by the built-in SANDBOX provider (offline sample data; configure a real provider in SVC_CONFIG)',
      );
  }
  logger.info(
    { config: config.source, models: [...config.models.keys()], tools: [...config.tools.keys()] },
    'configuration loaded',
  );
}

function removeStaleSocket(address: GrpcAddress): void {
  if (address.kind === 'unix' && fs.existsSync(address.path)) fs.rmSync(address.path);
}

/** Resolves when SIGTERM or SIGINT arrives, then runs `stop` once; a second signal exits at once. */
function onShutdown(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, 'shutting down');
    stop()
      .then(() => logger.info('stopped'))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
      })
      .finally(() => {
        process.off('SIGTERM', handler);
        process.off('SIGINT', handler);
      });
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

interface Started {
  readonly store?: Store;
  readonly coreServer?: CoreServer;
  readonly stopCore?: () => void;
  readonly connection?: CoreConnection;
  readonly gateway?: Gateway;
  readonly metricsServer?: MetricsServer;
  readonly otlpMetrics?: OtlpMetrics | null;
}

/** SVC_METRICS_ADDR: an extra `GET /metrics` listener (for `svc core`, which has no HTTP server). */
function metricsAddr(processEnv: NodeJS.ProcessEnv): TcpAddress | undefined {
  const value = processEnv['SVC_METRICS_ADDR']?.trim();
  return value === undefined || value === '' ? undefined : parseTcpAddress('SVC_METRICS_ADDR', value);
}

/** OTLP metrics when the OTEL_* variables ask for them; a bad variable stops what was started. */
async function exportMetrics(
  processEnv: NodeJS.ProcessEnv,
  registry: MetricsRegistry,
  started: Started,
  telemetry: Telemetry | undefined,
): Promise<OtlpMetrics | null> {
  try {
    return startOtlpMetrics({ registry, env: processEnv, serviceName: 'svc' });
  } catch (error) {
    await stopAll(started, telemetry);
    throw error;
  }
}

async function startMetricsPart(
  processEnv: NodeJS.ProcessEnv,
  registry: MetricsRegistry,
  logger: Logger,
): Promise<MetricsServer | undefined> {
  const addr = metricsAddr(processEnv);
  return addr === undefined ? undefined : startMetricsServer({ registry, host: addr.host, port: addr.port, logger });
}

async function stopAll(s: Started, telemetry: Telemetry | undefined): Promise<void> {
  await s.gateway?.close();
  await s.metricsServer?.close();
  // After the servers: the last export then holds every request they finished.
  await s.otlpMetrics?.shutdown();
  s.connection?.close();
  await s.coreServer?.close();
  s.stopCore?.();
  await s.store?.close();
  await telemetry?.shutdown();
}

/** The Redis of SVC_REDIS_URL for shared rate limits, or undefined; a Redis still down at start is logged, not fatal. */
async function connectLimiterRedis(env: SvcEnv, logger: Logger): Promise<Redis | undefined> {
  if (env.redisUrl === undefined) return undefined;
  const redis = connectRedis(env.redisUrl);
  // The limiter logs outages once; ioredis would log every reconnect attempt.
  redis.on('error', () => undefined);
  const where = redisHost(env.redisUrl);
  if (await redisReady(redis, 2000)) logger.info({ redis: where }, 'rate limits shared through Redis');
  else
    logger.warn({ redis: where }, 'Redis does not answer yet: rate limits follow limits.redis_failure until it does');
  return redis;
}

async function startCorePart(
  env: SvcEnv,
  processEnv: NodeJS.ProcessEnv,
  logger: Logger,
  metrics: MetricsRegistry,
): Promise<Required<Pick<Started, 'store' | 'coreServer' | 'stopCore'>>> {
  const config = loadConfig(env.configPath, processEnv);
  describeConfig(config, logger);
  const store = openStore(env.databaseUrl);
  try {
    const applied = await migrate(store);
    if (applied.length > 0) logger.info({ applied }, 'database migrated');
    const redis = await connectLimiterRedis(env, logger);
    const failure = config.limits.redisFailure ?? 'open';
    const shared =
      redis === undefined
        ? {}
        : {
            rateLimiter: createRedisRateLimiter({
              redis,
              requestsPerMinute: config.limits.requestsPerMinute,
              failure,
              logger,
            }),
            tokenLimiter: createRedisTokenLimiter({
              redis,
              tokensPerMinute: config.limits.tokensPerMinute ?? 0,
              failure,
              logger,
            }),
          };
    const core = createCore({ config, store, logger, adminToken: env.adminToken, metrics, ...shared });
    removeStaleSocket(env.grpcAddr);
    const coreServer = await startCoreServer(core, env.grpcAddr.text);
    core.startReaper();
    if (env.adminToken === undefined)
      logger.info('SVC_ADMIN_TOKEN is not set: admin RPCs are disabled (the CLI works on the database directly)');
    const stopCore = (): void => {
      core.stop();
      redis?.disconnect();
    };
    return { store, coreServer, stopCore };
  } catch (error) {
    await store.close();
    throw error;
  }
}

async function startGatewayPart(
  env: SvcEnv,
  processEnv: NodeJS.ProcessEnv,
  coreAddress: string,
  logger: Logger,
  metrics: MetricsRegistry,
): Promise<Required<Pick<Started, 'connection' | 'gateway'>>> {
  const config = loadConfig(env.configPath, processEnv);
  const connection = connectCore(coreAddress);
  const gateway = await startGateway({
    connection,
    logger,
    host: env.httpAddr.host,
    port: env.httpAddr.port,
    maxBodyBytes: config.limits.maxBodyBytes,
    metrics,
  });
  return { connection, gateway };
}

/** `svc serve`: migrate, then the core and the HTTP adapters in one process (adapters → core over gRPC). */
export async function runServe(processEnv: NodeJS.ProcessEnv, options: RunOptions = {}): Promise<void> {
  const env = loadEnv(processEnv);
  const logger = createLogger(env);
  // One registry: the gateway's /metrics shows the core's metrics too (same process).
  const metrics = createRegistry();
  const core = await startCorePart(env, processEnv, logger, metrics);
  const http = await startGatewayPart(env, processEnv, core.coreServer.address, logger, metrics).catch(
    async (error: unknown) => {
      await stopAll(core, options.telemetry);
      throw error;
    },
  );
  const otlpMetrics = await exportMetrics(processEnv, metrics, { ...core, ...http }, options.telemetry);
  logger.info({ openai: `${http.gateway.url}/v1/openai`, mcp: `${http.gateway.url}/v1/mcp` }, 'svc is ready');
  onShutdown(logger, () => stopAll({ ...core, ...http, otlpMetrics }, options.telemetry));
}

/** `svc core`: the gRPC core alone. */
export async function runCore(processEnv: NodeJS.ProcessEnv, options: RunOptions = {}): Promise<void> {
  const env = loadEnv(processEnv);
  const logger = createLogger(env);
  const metrics = createRegistry();
  const core = await startCorePart(env, processEnv, logger, metrics);
  const metricsServer = await startMetricsPart(processEnv, metrics, logger).catch(async (error: unknown) => {
    await stopAll(core, options.telemetry);
    throw error;
  });
  const started: Started = { ...core, ...(metricsServer === undefined ? {} : { metricsServer }) };
  const otlpMetrics = await exportMetrics(processEnv, metrics, started, options.telemetry);
  onShutdown(logger, () => stopAll({ ...started, otlpMetrics }, options.telemetry));
}

/** `svc gateway`: the HTTP adapters alone, calling the core at `coreAddress` (default SVC_CORE_ADDR). */
export async function runGateway(
  processEnv: NodeJS.ProcessEnv,
  coreAddress?: string,
  options: RunOptions = {},
): Promise<void> {
  const env = loadEnv(processEnv);
  const logger = createLogger(env);
  const metrics = createRegistry();
  const http = await startGatewayPart(env, processEnv, coreAddress ?? env.coreAddr.text, logger, metrics);
  const otlpMetrics = await exportMetrics(processEnv, metrics, http, options.telemetry);
  onShutdown(logger, () => stopAll({ ...http, otlpMetrics }, options.telemetry));
}
