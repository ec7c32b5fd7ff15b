/*
 * The composition root: each `svc` command reads the environment (`loadEnv`) and the config file
 * once, builds the infrastructure (logger, metrics registry, store, Redis and its limiters, the
 * one undici Agent every upstream call goes through; the tracer was started by cli/entry.ts before anything loaded)
 * and hands it to the core (`createCore` via cli/serve.ts), which builds every service; the gRPC
 * server and the in-process channel only bind them. No module below reads the environment.
 */
import fs from 'node:fs';
import type { MessagePort } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { CoreConnection } from '../adapters/http/core-client';
import type * as GatewayPart from './gateway';
import type { CoreThreadData, FromCoreThread, ToCoreThread } from './gateway';
import {
  createUpstreamAgent,
  upstreamConnections,
  loadConfig,
  type SvcConfig,
  loadEnv,
  type SvcEnv,
  type GrpcAddress,
  connectRedis,
  createRedisRateLimiter,
  redisHost,
  redisReady,
  createRedisTokenLimiter,
  createRedisConcurrencyLimiter,
  concurrentPerAccount,
  concurrentPerKey,
  createRegistry,
  type MetricsRegistry,
  type MetricsServer,
  startOtlpMetrics,
  type OtlpMetrics,
  migrate,
  openStore,
  parseGrpcAddress,
  workerConfig,
  type Store,
  type Telemetry,
} from '../core';
import type { Gateway } from '../adapters/http/server';
import { startCoreServing, startServe, type CoreServing, type CoreServingOptions } from './serve';
import type { Redis } from 'ioredis';
import { clusterWorker, workerSide } from './cluster';
import { runServePrimary, serveWorkers } from './primary';
import { announceReady, createLogger, onShutdown, readConfig, serveAdapterToken, startMetricsPart } from './process';

/** What the composition root was handed by the entry point (telemetry must start first). */
export interface RunOptions {
  readonly telemetry?: Telemetry | undefined;
}

function removeStaleSocket(address: GrpcAddress): void {
  if (address.kind === 'unix' && fs.existsSync(address.path)) fs.rmSync(address.path);
}

interface Started {
  /** The core (and in `svc serve`, the gateway) with the servers that bind it. */
  readonly serving?: CoreServing;
  /** What the core was built from: the upstream Agent, Redis, the store. Closed after the core. */
  readonly infra?: Infrastructure;
  /** `svc gateway` and the threaded `svc serve`: the gateway and its connection to a core elsewhere. */
  readonly connection?: CoreConnection;
  readonly gateway?: Gateway;
  readonly metricsServer?: MetricsServer;
  readonly otlpMetrics?: OtlpMetrics | null;
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

async function stopAll(s: Started, telemetry: Telemetry | undefined): Promise<void> {
  await s.gateway?.close();
  await s.serving?.close();
  await s.metricsServer?.close();
  // After the servers: the last export then holds every request they finished.
  await s.otlpMetrics?.shutdown();
  s.connection?.close();
  await s.infra?.close();
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

/**
 * Everything the core is built from, made once per process: the store (migrated), Redis and the
 * limiters on it, and the one undici Agent for every upstream HTTP call (LLM and tool providers,
 * a keep-alive pool per origin with that origin's limits; the core composes its timing
 * interceptor over it). The config is read by the caller.
 */
interface Infrastructure {
  readonly store: Store;
  readonly core: NonNullable<Parameters<typeof startCoreServing>[0]['core']>;
  close(): Promise<void>;
}

async function openInfrastructure(
  env: SvcEnv,
  config: SvcConfig,
  logger: Logger,
  worker = false,
): Promise<Infrastructure> {
  // A long-running process: SQLite's WAL checkpoints run in a thread of their own, or, in a
  // worker of `svc serve --workers N`, in the primary's, which migrated before forking.
  const store = openStore(
    env.databaseUrl,
    worker ? { checkpointElsewhere: true, otherWriters: true } : { backgroundCheckpoint: true },
  );
  try {
    if (!worker) {
      const applied = await migrate(store);
      if (applied.length > 0) logger.info({ applied }, 'database migrated');
    }
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
            concurrency: createRedisConcurrencyLimiter({
              redis,
              limits: { perKey: concurrentPerKey(config), perAccount: concurrentPerAccount(config) },
              failure,
              logger,
            }),
          };
    const upstreamAgent = createUpstreamAgent({ origins: upstreamConnections(config) });
    return {
      store,
      core: { ...shared, dispatcher: upstreamAgent },
      async close() {
        await upstreamAgent.close();
        shared.concurrency?.close();
        redis?.disconnect();
        await store.close();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/** What `svc core` and `svc serve` bind the core to. */
function coreServingOptions(
  env: SvcEnv,
  config: SvcConfig,
  infra: Infrastructure,
  logger: Logger,
  metrics: MetricsRegistry,
  adapterToken: string | undefined,
): CoreServingOptions {
  removeStaleSocket(env.grpcAddr);
  if (env.adminToken === undefined)
    logger.info('SVC_ADMIN_TOKEN is not set: admin RPCs are disabled (the CLI works on the database directly)');
  return {
    config,
    store: infra.store,
    logger,
    metrics,
    adminToken: env.adminToken,
    adapterToken,
    grpcAddress: env.grpcAddr.text,
    core: infra.core,
  };
}

/** `svc core` and the core thread: the core on its gRPC address, built from the infrastructure. */
async function startCorePart(
  env: SvcEnv,
  config: SvcConfig,
  logger: Logger,
  metrics: MetricsRegistry,
  adapterToken: string | undefined,
): Promise<Required<Pick<Started, 'serving' | 'infra'>>> {
  const infra = await openInfrastructure(env, config, logger);
  try {
    const serving = await startCoreServing(coreServingOptions(env, config, infra, logger, metrics, adapterToken));
    return { serving, infra };
  } catch (error) {
    await infra.close();
    throw error;
  }
}

// The HTTP half of the threaded `svc serve`, required when it starts: `svc core` never loads the adapters.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const gatewayPart = (): typeof GatewayPart => require('./gateway') as typeof GatewayPart;

/** The core thread's side (cli/core-thread.ts): start the core, answer metrics, stop on request. */
export function runCoreThread(
  port: MessagePort,
  processEnv: NodeJS.ProcessEnv,
  telemetry: Telemetry,
  data: CoreThreadData,
): void {
  const post = (message: FromCoreThread): void => port.postMessage(message);
  const env = loadEnv(processEnv);
  const logger = createLogger(env);
  const metrics = createRegistry();
  // Inside the promise: a bad config file is reported to the main thread like any start failure.
  Promise.resolve()
    .then(() => startCorePart(env, readConfig(env, processEnv, logger), logger, metrics, data.adapterToken))
    .then(
      (core) => {
        port.on('message', (message: ToCoreThread) => {
          if (message.type === 'metrics') {
            void metrics.snapshot().then((families) => post({ type: 'metrics', id: message.id, families }));
          } else {
            void stopAll(core, telemetry)
              .catch((error: unknown) => logger.error({ err: error }, 'core shutdown failed'))
              .finally(() => {
                post({ type: 'stopped' });
                port.close();
              });
          }
        });
        post({ type: 'ready', address: core.serving.coreServer.address });
      },
      async (error: unknown) => {
        await telemetry.shutdown().catch(() => undefined);
        post({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
        port.close();
      },
    );
}

/**
 * `svc serve`: migrate, then the core and the HTTP adapters in one process (`startServe`, the
 * assembly the tests start too), the adapters calling the core in process or, with
 * SVC_SERVE_TRANSPORT=grpc, over gRPC; with SVC_CORE_THREAD=1 the core runs in a worker thread.
 */
export async function runServe(
  processEnv: NodeJS.ProcessEnv,
  options: RunOptions = {},
  workersFlag?: number,
): Promise<void> {
  const env = loadEnv(processEnv);
  const worker = clusterWorker(processEnv);
  if (worker !== undefined) return runServeWorker(env, processEnv, options, worker);
  const workers = serveWorkers(env, workersFlag);
  if (env.coreThread) return gatewayPart().runServeThreaded(env, processEnv, options);
  if (workers > 1) return runServePrimary(env, processEnv, options, workers);
  const logger = createLogger(env);
  // One registry: the gateway's /metrics shows the core's metrics too (same process).
  const metrics = createRegistry();
  const config = readConfig(env, processEnv, logger);
  const infra = await openInfrastructure(env, config, logger);
  const serving = await startServe({
    ...coreServingOptions(env, config, infra, logger, metrics, serveAdapterToken(env)),
    transport: env.serveTransport,
    coreTunnels: env.coreTunnels,
    httpHost: env.httpAddr.host,
    httpPort: env.httpAddr.port,
    publicUrl: env.publicUrl,
    allowedOrigins: env.allowedOrigins,
  }).catch(async (error: unknown) => {
    await stopAll({ infra }, options.telemetry);
    throw error;
  });
  const metricsServer = await startMetricsPart(env, metrics, logger).catch(async (error: unknown) => {
    await stopAll({ serving, infra }, options.telemetry);
    throw error;
  });
  const started: Started = { serving, infra, ...(metricsServer === undefined ? {} : { metricsServer }) };
  const otlpMetrics = await exportMetrics(processEnv, metrics, started, options.telemetry);
  announceReady(logger, env, config, serving.gateway.url, env.serveTransport, infra.store.displayUrl);
  onShutdown(logger, () => stopAll({ ...started, otlpMetrics }, options.telemetry));
}

/**
 * A worker of `svc serve --workers N`: the one-process `svc serve` on the shared HTTP port, with
 * what the primary does once left out (migration, WAL checkpoints, SVC_METRICS_ADDR, OTLP, the
 * ready line), the limits held in memory cut to its share, and the gRPC core address for worker
 * 1 only (the others' cores listen on a loopback port of their own, for SVC_SERVE_TRANSPORT=grpc).
 */
async function runServeWorker(
  env: SvcEnv,
  processEnv: NodeJS.ProcessEnv,
  options: RunOptions,
  worker: { readonly index: number; readonly total: number },
): Promise<void> {
  const logger = createLogger(env, { worker: worker.index });
  const metrics = createRegistry();
  let stop: () => Promise<void> = () => Promise.resolve();
  let stopRequested = false;
  const side = workerSide(
    () => metrics.snapshot(),
    () => {
      stopRequested = true;
      logger.info('worker draining (the primary is stopping)');
      void stopOnce();
    },
  );
  let stopping: Promise<void> | undefined;
  const stopOnce = (): Promise<void> =>
    (stopping ??= stop()
      .then(() => logger.info('worker stopped'))
      .finally(() => side.leave()));
  try {
    const config = workerConfig(loadConfig(env.configPath, processEnv), worker.total, env.redisUrl !== undefined);
    const own = worker.index === 1 ? env : { ...env, grpcAddr: parseGrpcAddress('SVC_GRPC_ADDR', '127.0.0.1:0') };
    const infra = await openInfrastructure(own, config, logger, true);
    const serving = await startServe({
      ...coreServingOptions(own, config, infra, logger, metrics, serveAdapterToken(env)),
      transport: env.serveTransport,
      coreTunnels: env.coreTunnels,
      httpHost: env.httpAddr.host,
      httpPort: env.httpAddr.port,
      publicUrl: env.publicUrl,
      allowedOrigins: env.allowedOrigins,
      worker: {
        worker: worker.index,
        renderMetrics: () => {
          const all = createRegistry();
          all.include(() => side.allMetrics());
          return all.render();
        },
      },
    }).catch(async (error: unknown) => {
      await stopAll({ infra }, options.telemetry);
      throw error;
    });
    stop = () => stopAll({ serving, infra }, options.telemetry);
    // The primary's stop message and this process's own signals (Ctrl-C reaches every process
    // of the group) end in the same one drain.
    onShutdown(logger, stopOnce);
    if (stopRequested) void stopOnce();
    else side.ready(serving.gateway.url);
  } catch (error) {
    side.leave();
    throw error;
  }
}

/** `svc core`: the gRPC core alone. */
export async function runCore(processEnv: NodeJS.ProcessEnv, options: RunOptions = {}): Promise<void> {
  const env = loadEnv(processEnv);
  const logger = createLogger(env);
  const metrics = createRegistry();
  // Split, the gateway proves itself with the admin token; without one, the sign-in limits count
  // the gateway's address for every browser behind it.
  const core = await startCorePart(env, readConfig(env, processEnv, logger), logger, metrics, env.adminToken);
  const metricsServer = await startMetricsPart(env, metrics, logger).catch(async (error: unknown) => {
    await stopAll(core, options.telemetry);
    throw error;
  });
  const started: Started = { ...core, ...(metricsServer === undefined ? {} : { metricsServer }) };
  const otlpMetrics = await exportMetrics(processEnv, metrics, started, options.telemetry);
  onShutdown(logger, () => stopAll({ ...started, otlpMetrics }, options.telemetry));
}
