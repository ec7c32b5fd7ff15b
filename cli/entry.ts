import type * as TelemetryModule from '../core/telemetry';
import type { Telemetry } from '../core/telemetry';
import type * as Route from '../adapters/http/route';
import type * as Cli from './main';

const SERVER_COMMANDS = new Set(['serve', 'core', 'gateway']);

/**
 * The process entry (bin/svc.js). Tracing must be installed before http, grpc, koa and mysql2
 * are loaded, so it starts here and the rest of the CLI is required only afterwards.
 */
export async function main(argv: string[]): Promise<void> {
  let telemetry: Telemetry | undefined;
  if (SERVER_COMMANDS.has(argv[0] ?? '')) {
    // `require`, not `import()`: under tsx's CommonJS hook (bin/svc.js without a build) a dynamic
    // import goes to Node's ESM loader, which cannot load .ts sources.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { startTelemetry } = require('../core/telemetry') as typeof TelemetryModule;
    // adapters/http/route loads only @opentelemetry/api: nothing that needs instrumenting.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { routeOf } = require('../adapters/http/route') as typeof Route;
    telemetry = startTelemetry({ serviceName: 'svc', env: process.env, httpRoute: routeOf });
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const cli = require('./main') as typeof Cli;
  await cli.main(argv, { telemetry });
}
