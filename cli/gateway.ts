/*
 * `svc gateway` (and the HTTP half of `svc serve` with SVC_CORE_THREAD=1): the HTTP adapters,
 * calling a core over gRPC. Kept apart from the composition root (cli/compose.ts), which builds
 * cores, so that a gateway process loads only the edge: it imports core/edge (the wire, the
 * config, the metrics), never core/index, and so holds none of the core's services, the store's
 * drivers, the upstream clients or the tokenizer's tables (docs/performance.md, "Memory, round
 * four"). `test/telemetry/lazy-load.test.ts` keeps it so.
 */
import type { Logger } from 'pino';
import { connectCore, type CoreConnection } from '../adapters/http/core-client';
import { connectionLimitsOf, startGateway, type Gateway } from '../adapters/http/server';
import {
  createRegistry,
  loadConfig,
  loadEnv,
  startOtlpMetrics,
  type MetricsRegistry,
  type MetricsServer,
  type OtlpMetrics,
  type SvcConfig,
  type SvcEnv,
  type Telemetry,
} from '../core/edge';
import { createLogger, onShutdown, startMetricsPart } from './process';

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
  const connection = connectCore(coreAddress);
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
