import type { Logger } from 'pino';
import type * as CoreClient from '../adapters/http/core-client';
import type { CoreConnection } from '../adapters/http/core-client';
import type * as Server from '../adapters/http/server';
import type { Gateway, GatewayOptions } from '../adapters/http/server';
import {
  createCore,
  startCoreServer,
  storeAnswers,
  type Core,
  type CoreOptions,
  type CoreServer,
  type MetricsRegistry,
  type Store,
  type SvcConfig,
} from '../core';

// The adapters are required by `startServe` only: `svc core` (which serves gRPC alone) never
// loads Koa, the adapters or their dependencies (docs/performance.md, "Memory, round four").
/* eslint-disable @typescript-eslint/no-require-imports */
const coreClient = (): typeof CoreClient => require('../adapters/http/core-client') as typeof CoreClient;
const server = (): typeof Server => require('../adapters/http/server') as typeof Server;
/* eslint-enable @typescript-eslint/no-require-imports */

/** What the core is built from; the composition root (or a test) made each piece. */
export interface CoreServingOptions {
  readonly config: SvcConfig;
  /** Migrated; owned by the caller, which closes it after `close()`. */
  readonly store: Store;
  readonly logger: Logger;
  readonly metrics: MetricsRegistry;
  readonly adminToken: string | undefined;
  /** The console adapter's proof of itself (see CoreOptions.adapterToken). */
  readonly adapterToken: string | undefined;
  /** Where the gRPC server listens: HOST:PORT (port 0: any) or unix:PATH. */
  readonly grpcAddress: string;
  /** The rest of what `createCore` takes: clock, shared limiters, the upstream dispatcher, test switches. */
  readonly core?: Omit<CoreOptions, 'config' | 'store' | 'logger' | 'adminToken' | 'adapterToken' | 'metrics'>;
  /** Start the hold reaper (default true). */
  readonly reaper?: boolean;
}

/** The core and the gRPC server (and in-process channel) that bind its services. */
export interface CoreServing {
  readonly core: Core;
  readonly coreServer: CoreServer;
  /** Drains and closes the server, then stops the core; the store stays open. */
  close(graceMs?: number): Promise<void>;
}

/** Builds the core from its pieces and binds it to a gRPC server (`svc core`, `svc serve`, tests). */
export async function startCoreServing(options: CoreServingOptions): Promise<CoreServing> {
  const core = createCore({
    ...options.core,
    config: options.config,
    store: options.store,
    logger: options.logger,
    adminToken: options.adminToken,
    adapterToken: options.adapterToken,
    metrics: options.metrics,
  });
  let coreServer: CoreServer;
  try {
    // The file's exchange rate is the first one stored (SPEC §15), before any call is priced.
    await core.deps.prices.start();
    coreServer = await startCoreServer(core, options.grpcAddress);
  } catch (error) {
    core.stop();
    await core.closeUpstreams();
    throw error;
  }
  if (options.reaper !== false) {
    core.startReaper();
    core.startReconciler();
  }
  return {
    core,
    coreServer,
    async close(graceMs) {
      await coreServer.close(graceMs);
      core.stop();
    },
  };
}

export interface ServeOptions extends CoreServingOptions {
  /** How the adapters reach the core: the in-process channel, or a real gRPC hop to `grpcAddress`. */
  readonly transport: 'in-process' | 'grpc';
  /** With `transport: 'grpc'`: the tunnels the adapters keep to the core (SVC_CORE_TUNNELS; default 0). */
  readonly coreTunnels?: number;
  readonly httpHost: string;
  /** 0: any free port. */
  readonly httpPort: number;
  /** Default `config.limits.maxBodyBytes`. */
  readonly maxBodyBytes?: number;
  /** SVC_PUBLIC_URL. */
  readonly publicUrl?: string | undefined;
  /** SVC_ALLOWED_ORIGINS. */
  readonly allowedOrigins?: readonly string[];
  /** A worker of `svc serve --workers N` (cli/cluster.ts): its number, and the metrics of all. */
  readonly worker?: Pick<GatewayOptions, 'worker' | 'renderMetrics'>;
}

/** `svc serve` as one value: the core, its gRPC server, the adapters' connection and the gateway. */
export interface Serving extends CoreServing {
  /** The gateway's connection to the core (in-process or gRPC, as asked). */
  readonly connection: CoreConnection;
  readonly gateway: Gateway;
}

/**
 * The core and the HTTP adapters in one process: what `svc serve` runs and what the tests start
 * (`test/helpers/harness.ts`), so both exercise one assembly. The metrics registry is shared: the
 * gateway's `GET /metrics` shows the core's metrics too.
 */
export async function startServe(options: ServeOptions): Promise<Serving> {
  const { connectCore, connectInProcess } = coreClient();
  const { connectionLimitsOf, startGateway } = server();
  const serving = await startCoreServing(options);
  const { core, coreServer } = serving;
  const connection =
    options.transport === 'grpc'
      ? connectCore(coreServer.address, options.coreTunnels === undefined ? {} : { tunnels: options.coreTunnels })
      : connectInProcess(coreServer.inProcess, () => storeAnswers(core.deps.store));
  let gateway: Gateway;
  try {
    gateway = await startGateway({
      connection,
      logger: options.logger,
      host: options.httpHost,
      port: options.httpPort,
      maxBodyBytes: options.maxBodyBytes ?? options.config.limits.maxBodyBytes,
      ...(options.config.limits.maxUploadBytes === undefined
        ? {}
        : { maxUploadBytes: options.config.limits.maxUploadBytes }),
      streamStallMs: options.config.limits.streamStallSeconds * 1000,
      connectionLimits: connectionLimitsOf(options.config.limits),
      metrics: options.metrics,
      adapterToken: core.adapterToken,
      metricsToken: options.adminToken,
      publicUrl: options.publicUrl,
      allowedOrigins: options.allowedOrigins ?? [],
      operatorSignIn: options.adminToken !== undefined && options.adminToken !== '',
      websockets: options.config.responses?.websockets ?? true,
      ...options.worker,
    });
  } catch (error) {
    connection.close();
    await serving.close();
    throw error;
  }
  return {
    core,
    coreServer,
    connection,
    gateway,
    async close(graceMs) {
      // The gateway first (it finishes what it serves), then the core it was calling.
      await gateway.close(graceMs);
      connection.close();
      await serving.close(graceMs);
    },
  };
}
