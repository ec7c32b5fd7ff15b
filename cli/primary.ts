/*
 * The primary of `svc serve --workers N` (the supervision and messages are cli/cluster.ts): it
 * reads and checks the config, migrates, forks the workers, checkpoints SQLite's WAL for all of
 * them and serves their metrics added up. It imports only core/primary (config, store, metrics),
 * not the core it never runs: cli/servers.ts comes here before cli/compose.ts is loaded.
 */
import {
  createRegistry,
  limitsBelowWorkers,
  migrate,
  openStore,
  parseDatabaseUrl,
  startOtlpMetrics,
  type MetricsServer,
  type OtlpMetrics,
  type SvcEnv,
  type Telemetry,
} from '../core/primary';
import { startWorkers, usableCpus } from './cluster';
import { createLogger, onShutdown, readConfig, startMetricsPart } from './process';

/** What the entry point hands a server command (telemetry must start first). */
interface PrimaryOptions {
  readonly telemetry?: Telemetry | undefined;
}

/** The primary's own servers: the metrics listener and OTLP export of every worker's metrics. */
interface Started {
  readonly metricsServer?: MetricsServer;
  readonly otlpMetrics?: OtlpMetrics | null;
}

async function stopStarted(s: Started): Promise<void> {
  await s.metricsServer?.close();
  await s.otlpMetrics?.shutdown();
}

/**
 * How many processes `svc serve` runs: `--workers`, else SVC_WORKERS, else one per usable CPU
 * when the rate limits are shared exactly (SVC_REDIS_URL), and one otherwise: per-worker shares
 * of a limit would refuse a client whose requests all reach one worker (one keep-alive
 * connection) at half its limit, so several workers without Redis are asked for, never a
 * default. The default is also one where several cannot serve as one (an in-memory SQLite
 * database is private to its process; SVC_CORE_THREAD=1 is the other way to use a second core);
 * asked for explicitly there, it is an error.
 */
export function serveWorkers(env: SvcEnv, flag: number | undefined): number {
  const asked = flag ?? env.workers;
  const parsed = parseDatabaseUrl(env.databaseUrl);
  const memory = parsed.dialect === 'sqlite' && (parsed.path ?? '') === ':memory:';
  if (asked === undefined) return memory || env.coreThread || env.redisUrl === undefined ? 1 : usableCpus();
  if (asked > 1 && memory)
    throw new Error(
      `--workers ${asked} needs a database the workers can share; an in-memory SQLite database is private to one process`,
    );
  if (asked > 1 && env.coreThread)
    throw new Error(`--workers ${asked} and SVC_CORE_THREAD=1 do not combine: use one or the other`);
  return asked;
}

/**
 * `svc serve --workers N`, the primary (see cli/cluster.ts): reads and checks the config, migrates
 * the database, then forks the workers; keeps the store open for SQLite's WAL checkpoints, serves
 * SVC_METRICS_ADDR and OTLP with every worker's metrics added up, and logs the ready line once.
 */
export async function runServePrimary(
  env: SvcEnv,
  processEnv: NodeJS.ProcessEnv,
  options: PrimaryOptions,
  count: number,
): Promise<void> {
  const logger = createLogger(env);
  const config = readConfig(env, processEnv, logger);
  const shared = env.redisUrl !== undefined;
  const inexact = limitsBelowWorkers(config, count, shared);
  if (inexact.length > 0)
    logger.warn(
      { workers: count, limits: inexact },
      'these limits are below the worker count: each worker admits at least 1, so together they admit up to the worker count',
    );
  // Once, before any worker opens the database; the checkpoint thread runs here for all of them.
  const store = openStore(env.databaseUrl, { backgroundCheckpoint: true });
  let workers: Awaited<ReturnType<typeof startWorkers>>;
  try {
    const applied = await migrate(store);
    if (applied.length > 0) logger.info({ applied }, 'database migrated');
    // MySQL needs nothing more from the primary.
    if (store.dialect !== 'sqlite') await store.close();
    workers = await startWorkers(count, logger);
  } catch (error) {
    await store.close();
    await options.telemetry?.shutdown();
    throw error;
  }
  const metrics = createRegistry();
  metrics.include(() => workers.snapshot());
  const stopRest = async (): Promise<void> => {
    await store.close();
    await options.telemetry?.shutdown();
  };
  let started: Started = {};
  let otlpMetrics: OtlpMetrics | null;
  try {
    const metricsServer = await startMetricsPart(env, metrics, logger);
    if (metricsServer !== undefined) started = { metricsServer };
    otlpMetrics = startOtlpMetrics({ registry: metrics, env: processEnv, serviceName: 'svc' });
  } catch (error) {
    await workers.stop();
    await stopStarted(started);
    await stopRest();
    throw error;
  }
  logger.info(
    {
      transport: env.serveTransport,
      workers: count,
      pids: workers.pids(),
      limits: shared ? 'shared through Redis' : 'a share per worker',
      openai: `${workers.url}/v1/openai`,
      mcp: `${workers.url}/v1/mcp`,
    },
    'svc is ready',
  );
  onShutdown(logger, async () => {
    // Every worker drains as one `svc serve` does, then the metrics (the last export holds all).
    const clean = await workers.stop();
    await stopStarted({ ...started, otlpMetrics });
    await stopRest();
    if (!clean) {
      process.exitCode = 1;
      throw new Error('a worker did not stop cleanly');
    }
  });
}
