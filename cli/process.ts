/*
 * What every server process of `svc` sets up the same way, whatever it serves: the logger, the
 * config file read and described, the metrics listener and the shutdown on SIGTERM/SIGINT. Kept
 * apart from the composition root (cli/compose.ts) so that the primary of `svc serve --workers N`
 * (cli/primary.ts) uses them without loading the core: it imports core/primary only.
 */
import { randomBytes } from 'node:crypto';
import pino, { type Logger } from 'pino';
import {
  loadConfig,
  processRedactor,
  startMetricsServer,
  type MetricsRegistry,
  type MetricsServer,
  type SvcConfig,
  type SvcEnv,
} from '../core/edge';
import { svcCommand } from './self';
import { summaryText, textLine } from './startup';

/** Text for a person (a start-up summary, short lines): SVC_LOG_FORMAT=text, or unset on a terminal. */
export function textLogs(env: SvcEnv): boolean {
  return env.logFormat === 'text' || (env.logFormat === undefined && process.stdout.isTTY === true);
}

/** Writes `text` (the start-up summary) to the log's destination, in order with its lines. */
export const rawWriters = new WeakMap<Logger, (text: string) => void>();

export function createLogger(env: SvcEnv, base: Readonly<Record<string, unknown>> = {}): Logger {
  // Every line passes the redactor on its way out: a secret inside a message or an upstream's
  // error body (which the paths below cannot know) is masked too.
  // Lines gather into 12 KiB writes (one write(2) per thirty-odd request lines instead of one
  // each, off the event loop; at 4 KiB the writes were still 1% of svc's CPU under load), flushed
  // at least every 200 ms and at exit.
  const destination = pino.destination({ dest: 1, minLength: 12 * 1024, sync: false });
  setInterval(() => destination.flush(), 200).unref();
  process.once('exit', () => {
    try {
      destination.flushSync();
    } catch {
      // stdout is gone (a closed pipe): there is nobody left to read the lines.
    }
  });
  const text = textLogs(env);
  const scrubbed = {
    write: (line: string): void => {
      const clean = processRedactor.scrub(line);
      void destination.write(text ? textLine(clean) : clean);
    },
  };
  const logger = pino(
    {
      level: env.logLevel,
      base: { service: 'svc', ...base },
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
    },
    scrubbed,
  );
  if (text) rawWriters.set(logger, (summary) => void destination.write(processRedactor.scrub(summary)));
  return logger;
}

export function describeConfig(config: SvcConfig, logger: Logger): void {
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

/** Resolves when SIGTERM or SIGINT arrives, then runs `stop` once; a second signal exits at once. */
export function onShutdown(logger: Logger, stop: () => Promise<void>): void {
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

export async function startMetricsPart(
  env: SvcEnv,
  registry: MetricsRegistry,
  logger: Logger,
): Promise<MetricsServer | undefined> {
  const addr = env.metricsAddr;
  return addr === undefined ? undefined : startMetricsServer({ registry, host: addr.host, port: addr.port, logger });
}

/** The config file, read and validated once per process, and described in the log. */
export function readConfig(env: SvcEnv, processEnv: NodeJS.ProcessEnv, logger: Logger): SvcConfig {
  const config = loadConfig(env.configPath, processEnv);
  describeConfig(config, logger);
  return config;
}

/**
 * The "svc is ready" line with every address (JSON), and on a terminal the summary a person reads.
 */
export function announceReady(
  logger: Logger,
  env: SvcEnv,
  config: SvcConfig,
  url: string,
  transport: 'in-process' | 'grpc' | 'thread',
  database: string,
): void {
  const sandbox = [
    ...[...config.models.values()].filter((m) => m.provider === 'sandbox').map((m) => m.id),
    ...[...config.tools.values()].filter((t) => t.provider === 'sandbox').map((t) => t.name),
  ];
  logger.info(
    {
      transport,
      ...(transport === 'thread' ? { coreThread: true } : {}),
      openai: `${url}/v1/openai`,
      anthropic: `${url}/v1/anthropic`,
      gemini: `${url}/v1/gemini`,
      mcp: `${url}/v1/mcp`,
      console: `${url}/console/`,
      database,
      sandbox,
    },
    'svc is ready',
  );
  rawWriters.get(logger)?.(
    summaryText({
      url,
      grpc: env.grpcAddr.text,
      transport,
      database,
      config: config.source,
      sandbox,
      operatorSignIn: env.adminToken !== undefined && env.adminToken !== '',
      command: svcCommand(),
    }),
  );
}

/**
 * The console adapter's proof of itself to the core: the admin token, or, in `svc serve` without
 * one, a secret made for this process (its core and gateway are the only ones to know it).
 */
export function serveAdapterToken(env: SvcEnv): string {
  return env.adminToken ?? randomBytes(32).toString('base64url');
}
