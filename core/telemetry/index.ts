export { startTelemetry, type Telemetry, type TelemetryOptions } from './start';
export { traceExporterFromEnv } from './exporter';
export { samplerFromEnv } from './sampler';
