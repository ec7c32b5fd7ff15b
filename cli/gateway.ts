/*
 * `svc gateway`, and `svc serve` with SVC_CORE_THREAD=1 (its main thread): the HTTP adapters,
 * calling a core over gRPC (in another process, or in a worker thread that cli/core-thread.ts
 * starts). Kept apart from the composition root (cli/compose.ts), which builds
 * cores, so that a gateway process loads only the edge: it imports core/edge (the wire, the
 * config, the metrics), never core/index, and so holds none of the core's services, the store's
 * drivers, the upstream clients or the tokenizer's tables (docs/performance.md, "Memory, round
 * four"). `test/telemetry/lazy-load.test.ts` keeps it so.
 */
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { connectCore, type CoreConnection } from '../adapters/http/core-client';
import { connectionLimitsOf, startGateway, type Gateway } from '../adapters/http/server';
import {
  createRegistry,
  loadConfig,
  loadEnv,
  maskUrl,
  startOtlpMetrics,
  type FamilySnapshot,
  type MetricsRegistry,
  type MetricsServer,
  type OtlpMetrics,
  type SvcConfig,
  type SvcEnv,
  type Telemetry,
} from '../core/edge';
import { announceReady, createLogger, onShutdown, serveAdapterToken, startMetricsPart } from './process';

/** The gateway and its connection to a core elsewhere. */
export interface GatewayPart {
  readonly connection: CoreConnection;
  readonly gateway: Gateway;
}

/** The HTTP adapters on SVC_HTTP_ADDR, calling the core at `coreAddress` over gRPC. */
export async function startGatewayPart(
  env: SvcEnv,
  config: SvcConfig,
  coreAddress: string,
  logger: Logger,
  metrics: MetricsRegistry,
  adapterToken: string | undefined,
): Promise<GatewayPart> {
  const connection = connectCore(coreAddress, { tunnels: env.coreTunnels });
  const gateway = await startGateway({
    connection,
    logger,
    host: env.httpAddr.host,
    port: env.httpAddr.port,
    maxBodyBytes: config.limits.maxBodyBytes,
    ...(config.limits.maxUploadBytes === undefined ? {} : { maxUploadBytes: config.limits.maxUploadBytes }),
    streamStallMs: config.limits.streamStallSeconds * 1000,
    connectionLimits: connectionLimitsOf(config.limits),
    metrics,
    adapterToken,
    metricsToken: env.adminToken,
    publicUrl: env.publicUrl,
    allowedOrigins: env.allowedOrigins,
    operatorSignIn: env.adminToken !== undefined,
    websockets: config.responses?.websockets ?? true,
  }).catch((error: unknown) => {
    connection.close();
    throw error;
  });
  return { connection, gateway };
}

interface GatewayStarted extends GatewayPart {
  readonly metricsServer?: MetricsServer;
  readonly otlpMetrics?: OtlpMetrics | null;
}

async function stopGateway(s: Partial<GatewayStarted>, telemetry: Telemetry | undefined): Promise<void> {
  await s.gateway?.close();
  await s.metricsServer?.close();
  // After the server: the last export then holds every request it finished.
  await s.otlpMetrics?.shutdown();
  s.connection?.close();
  await telemetry?.shutdown();
}

/** `svc gateway`: the HTTP adapters alone, calling the core at `coreAddress` (default SVC_CORE_ADDR). */
export async function runGateway(
  processEnv: NodeJS.ProcessEnv,
  coreAddress?: string,
  options: { readonly telemetry?: Telemetry | undefined } = {},
): Promise<void> {
  const env = loadEnv(processEnv);
  const logger = createLogger(env);
  const metrics = createRegistry();
  const config = loadConfig(env.configPath, processEnv);
  const http = await startGatewayPart(env, config, coreAddress ?? env.coreAddr.text, logger, metrics, env.adminToken);
  const metricsServer = await startMetricsPart(env, metrics, logger).catch(async (error: unknown) => {
    await stopGateway(http, options.telemetry);
    throw error;
  });
  const started: GatewayStarted = { ...http, ...(metricsServer === undefined ? {} : { metricsServer }) };
  let otlpMetrics: OtlpMetrics | null;
  try {
    // OTLP metrics when the OTEL_* variables ask for them; a bad variable stops what was started.
    otlpMetrics = startOtlpMetrics({ registry: metrics, env: processEnv, serviceName: 'svc' });
  } catch (error) {
    await stopGateway(started, options.telemetry);
    throw error;
  }
  onShutdown(logger, () => stopGateway({ ...started, otlpMetrics }, options.telemetry));
}

/** Messages between `svc serve`'s main thread and its core thread. */
export type ToCoreThread = { readonly type: 'metrics'; readonly id: number } | { readonly type: 'stop' };
export type FromCoreThread =
  | { readonly type: 'ready'; readonly address: string }
  | { readonly type: 'failed'; readonly message: string }
  | { readonly type: 'metrics'; readonly id: number; readonly families: FamilySnapshot[] }
  | { readonly type: 'stopped' };

/** What the core thread is started with besides the environment. */
export interface CoreThreadData {
  readonly adapterToken: string;
}

/** The core running in its own thread of this process. */
interface CoreThread {
  /** Where its gRPC server listens. */
  readonly address: string;
  /** Its metrics, for the gateway's `GET /metrics` and OTLP export. */
  metrics(): Promise<FamilySnapshot[]>;
  /** Stops it as `svc core` stops on SIGTERM (drains calls, closes the store), then ends the thread. */
  stop(): Promise<void>;
}

/**
 * Starts the core in a worker thread (cli/core-thread.ts, which runs `runCoreThread` of cli/compose.ts):
 * the same `startCorePart` as `svc core`, reached over gRPC as
 * before, but on the machine's second core instead of sharing one event loop with the gateway.
 * A thread that dies on its own takes the process down (a supervisor then restarts svc whole).
 */
function startCoreThread(processEnv: NodeJS.ProcessEnv, logger: Logger, adapterToken: string): Promise<CoreThread> {
  const fromSource = __filename.endsWith('.ts');
  const worker = new Worker(path.join(__dirname, fromSource ? 'core-thread.ts' : 'core-thread.js'), {
    env: processEnv,
    workerData: { adapterToken } satisfies CoreThreadData,
    // Under tsx (no build), the thread needs the same loader to read the TypeScript sources;
    // otherwise it inherits the process's flags.
    ...(fromSource ? { execArgv: ['--require', require.resolve('tsx/cjs')] } : {}),
  });
  const pending = new Map<number, (families: FamilySnapshot[]) => void>();
  let nextId = 0;
  let stopping: Promise<void> | undefined;
  return new Promise<CoreThread>((resolve, reject) => {
    let ready = false;
    worker.on('message', (message: FromCoreThread) => {
      if (message.type === 'ready') {
        ready = true;
        resolve(thread(message.address));
      } else if (message.type === 'failed') reject(new Error(message.message));
      else if (message.type === 'metrics') {
        pending.get(message.id)?.(message.families);
        pending.delete(message.id);
      }
    });
    worker.on('error', (error: Error) => {
      if (!ready) reject(error);
      else logger.fatal({ err: error }, 'the core thread failed; stopping');
    });
    worker.on('exit', (code: number) => {
      for (const answer of pending.values()) answer([]);
      pending.clear();
      if (!ready) reject(new Error(`the core thread exited with ${code} before it was ready`));
      else if (stopping === undefined) {
        logger.fatal({ code }, 'the core thread exited; stopping');
        process.exit(1);
      }
    });
  });

  function thread(address: string): CoreThread {
    return {
      address,
      metrics: () =>
        new Promise<FamilySnapshot[]>((resolve) => {
          const id = nextId++;
          pending.set(id, resolve);
          worker.postMessage({ type: 'metrics', id } satisfies ToCoreThread);
        }),
      stop() {
        stopping ??= new Promise<void>((resolve) => {
          worker.once('exit', () => resolve());
          worker.postMessage({ type: 'stop' } satisfies ToCoreThread);
        });
        return stopping;
      },
    };
  }
}

/** `svc serve` with SVC_CORE_THREAD=1: the gateway on the main thread, the core in a worker thread. */
export async function runServeThreaded(
  env: SvcEnv,
  processEnv: NodeJS.ProcessEnv,
  options: { readonly telemetry?: Telemetry | undefined } = {},
): Promise<void> {
  const logger = createLogger(env);
  // The gateway's /metrics (and OTLP export) shows the core thread's metrics too.
  const metrics = createRegistry();
  const adapterToken = serveAdapterToken(env);
  // Read here for the gateway's limits; the core thread reads it for itself (its own process state).
  const config = loadConfig(env.configPath, processEnv);
  const core = await startCoreThread(processEnv, logger, adapterToken);
  metrics.include(() => core.metrics());
  const http = await startGatewayPart(env, config, core.address, logger, metrics, adapterToken).catch(
    async (error: unknown) => {
      await core.stop();
      await options.telemetry?.shutdown();
      throw error;
    },
  );
  let otlpMetrics: OtlpMetrics | null;
  let started: Partial<GatewayStarted> = http;
  try {
    const metricsServer = await startMetricsPart(env, metrics, logger);
    if (metricsServer !== undefined) started = { ...http, metricsServer };
    otlpMetrics = startOtlpMetrics({ registry: metrics, env: processEnv, serviceName: 'svc' });
  } catch (error) {
    await stopGateway(started, undefined);
    await core.stop();
    await options.telemetry?.shutdown();
    throw error;
  }
  announceReady(logger, env, config, http.gateway.url, 'thread', maskUrl(env.databaseUrl));
  onShutdown(logger, async () => {
    // The gateway first (it finishes what it serves), then the core it was calling.
    await stopGateway({ ...started, otlpMetrics }, undefined);
    await core.stop();
    await options.telemetry?.shutdown();
  });
}
