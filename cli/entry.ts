import type { Telemetry } from '../core/telemetry';

const SERVER_COMMANDS = new Set(['serve', 'core', 'gateway']);

/**
 * The process entry (bin/svc.js). Tracing must be installed before http, grpc, koa and mysql2
 * are loaded, so it starts here and the rest of the CLI is required only afterwards.
 */
export async function main(argv: string[]): Promise<void> {
  let telemetry: Telemetry | undefined;
  if (SERVER_COMMANDS.has(argv[0] ?? '')) {
    const { startTelemetry } = await import('../core/telemetry');
    telemetry = startTelemetry({ serviceName: 'svc', env: process.env });
  }
  const cli = await import('./main');
  await cli.main(argv, { telemetry });
}
