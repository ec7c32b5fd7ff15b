/**
 * The entry of the core's thread under `svc serve` (see `startCoreThread` in cli/gateway.ts).
 * Like cli/entry.ts, it starts tracing before anything loads gRPC, HTTP or the database
 * drivers: a worker thread loads its modules afresh, so they are instrumented in it too.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type * as TelemetryModule from '../core/telemetry';
import type * as Compose from './compose';
import type { CoreThreadData } from './gateway';

if (parentPort === null) throw new Error('cli/core-thread runs only as the worker thread of svc serve');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startTelemetry } = require('../core/telemetry') as typeof TelemetryModule;
const telemetry = startTelemetry({ serviceName: 'svc', env: process.env });
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { runCoreThread } = require('./compose') as typeof Compose;
runCoreThread(parentPort, process.env, telemetry, workerData as CoreThreadData);
