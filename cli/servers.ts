import cluster from 'node:cluster';
import { loadEnv, parseGrpcAddress, parseWorkers } from '../core/edge';
import type * as Compose from './compose';
import type * as Gateway from './gateway';
import type * as Primary from './primary';
import type { CommandContext } from './context';
import { UsageError } from './args';

// The composition root (cli/compose.ts) owns start-up and shutdown; these only hand over. It is
// required here, not at the top: cli/entry.ts has started OpenTelemetry by now, and compose
// loads gRPC, HTTP and the database drivers, which must be instrumented as they first load.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const compose = (): typeof Compose => require('./compose') as typeof Compose;
// The primary of `svc serve --workers N` loads only what it runs (config, store, metrics): the
// core and the adapters stay out of its memory.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const primary = (): typeof Primary => require('./primary') as typeof Primary;
// `svc gateway` loads the edge only (cli/gateway.ts imports core/edge, not the core it calls).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const gatewayPart = (): typeof Gateway => require('./gateway') as typeof Gateway;

/**
 * A listener that could not bind, in words that name the variable to change: Node's `listen
 * EADDRINUSE` for HTTP, grpc-js's `No address added out of total 1 resolved` for the core.
 */
export function explainListenError(error: unknown, env: NodeJS.ProcessEnv): unknown {
  if (!(error instanceof Error)) return error;
  const e = error as Error & { code?: unknown; port?: unknown };
  const settings = loadEnv(env);
  const http = settings.httpAddr;
  const metrics = settings.metricsAddr;
  let variable: string | undefined;
  let address = '';
  let example = '';
  if (e.code === 'EADDRINUSE' || e.code === 'EACCES') {
    if (metrics !== undefined && e.port === metrics.port) {
      variable = 'SVC_METRICS_ADDR';
      address = metrics.text;
      example = `${metrics.host}:${metrics.port + 1}`;
    } else {
      variable = 'SVC_HTTP_ADDR';
      address = http.text;
      example = `${http.host}:${http.port + 1}`;
    }
  } else if (/No address added out of total \d+ resolved/.test(e.message)) {
    variable = 'SVC_GRPC_ADDR';
    address = settings.grpcAddr.text;
    example =
      settings.grpcAddr.kind === 'tcp'
        ? `${settings.grpcAddr.host}:${settings.grpcAddr.port + 1}`
        : 'unix:/tmp/svc-core.sock';
  }
  if (variable === undefined) return error;
  const why =
    e.code === 'EACCES' ? 'may not be used by this user' : 'is already in use (is another svc still running?)';
  return new Error(
    `${address} ${why}: stop what listens there, or set ${variable} to a free address, e.g. ${variable}=${example}`,
    { cause: error },
  );
}

export async function serve(ctx: CommandContext): Promise<void> {
  const flag = ctx.args.strings.get('workers');
  let workers: number | undefined;
  if (flag !== undefined) {
    try {
      workers = parseWorkers('--workers', flag);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  const started = async (): Promise<void> => {
    if (cluster.isPrimary) {
      const env = loadEnv(ctx.env);
      // SVC_CORE_THREAD=1 (one process): this thread is a gateway (cli/gateway.ts), and only the
      // core thread loads the core and the store. With more workers asked, serveWorkers refuses.
      if (env.coreThread && (workers ?? env.workers ?? 1) <= 1)
        return gatewayPart().runServeThreaded(env, ctx.env, { telemetry: ctx.telemetry });
      const { runServePrimary, serveWorkers } = primary();
      const count = serveWorkers(env, workers);
      // More than one only without SVC_CORE_THREAD (serveWorkers refuses the two together).
      if (count > 1) return runServePrimary(env, ctx.env, { telemetry: ctx.telemetry }, count);
    }
    return compose().runServe(ctx.env, { telemetry: ctx.telemetry }, workers);
  };
  await started().catch((error: unknown) => {
    throw explainListenError(error, ctx.env);
  });
}

export async function core(ctx: CommandContext): Promise<void> {
  const { runCore } = compose();
  await runCore(ctx.env, { telemetry: ctx.telemetry }).catch((error: unknown) => {
    throw explainListenError(error, ctx.env);
  });
}

export async function gateway(ctx: CommandContext): Promise<void> {
  const flag = ctx.args.strings.get('core');
  let coreAddress: string | undefined;
  if (flag !== undefined) {
    try {
      coreAddress = parseGrpcAddress('--core', flag).text;
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  const { runGateway } = gatewayPart();
  await runGateway(ctx.env, coreAddress, { telemetry: ctx.telemetry }).catch((error: unknown) => {
    throw explainListenError(error, ctx.env);
  });
}
