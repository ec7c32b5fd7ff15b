import type * as TelemetryModule from '../core/telemetry';
import type { Telemetry } from '../core/telemetry';
import type * as Route from '../adapters/http/route';
import type * as Cli from './main';
import v8 from 'node:v8';

const SERVER_COMMANDS = new Set(['serve', 'core', 'gateway']);

/**
 * How far V8 lets the old generation grow past what the last full GC found live: 30%, V8's own
 * factor when it is asked to save memory, instead of its dynamic factor (up to 4× with this
 * process's heap limit). A server allocates steadily, so the default lets short-lived request
 * garbage that survived the young generation pile up to hundreds of MiB between full GCs; with
 * this, `svc serve`'s RSS at 500 req/s stays under 200 MiB at the same throughput (measured in
 * docs/performance.md, Memory). The flag is read at every full GC, so setting it here, at start,
 * is enough; a `--heap-growing-percent` given to node itself (or in NODE_OPTIONS) wins.
 */
export const HEAP_GROWING_PERCENT = 30;

function tuneHeap(): void {
  const given = [...process.execArgv, ...(process.env['NODE_OPTIONS'] ?? '').split(/\s+/)];
  if (given.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg))) return;
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

/**
 * The process entry (bin/svc.js). Tracing must be installed before http, grpc, koa and mysql2
 * are loaded, so it starts here and the rest of the CLI is required only afterwards.
 */
export async function main(argv: string[]): Promise<void> {
  let telemetry: Telemetry | undefined;
  if (SERVER_COMMANDS.has(argv[0] ?? '')) {
    tuneHeap();
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
