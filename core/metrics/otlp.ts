import { ValueType, type Attributes, type HrTime } from '@opentelemetry/api';
import type * as OtlpHttp from '@opentelemetry/exporter-metrics-otlp-http';
import type * as OtlpProto from '@opentelemetry/exporter-metrics-otlp-proto';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkMetrics from '@opentelemetry/sdk-metrics';
import type { MetricData, MetricProducer, PushMetricExporter } from '@opentelemetry/sdk-metrics';
import type { FamilySnapshot, Labels, MetricsRegistry } from './registry';

// The metrics SDK and its OTLP exporters (each 190–360 modules and 15–19 MiB of RSS loaded alone)
// are required only when an OTLP endpoint is configured; `GET /metrics` does not need them
// (docs/performance.md, Memory).
/* eslint-disable @typescript-eslint/no-require-imports */
const sdkMetrics = (): typeof SdkMetrics => require('@opentelemetry/sdk-metrics') as typeof SdkMetrics;
/* eslint-enable @typescript-eslint/no-require-imports */

export interface OtlpMetrics {
  /** Exports once more, then stops. */
  shutdown(): Promise<void>;
}

function setting(env: NodeJS.ProcessEnv, name: string): string {
  return (env[name] ?? '').trim();
}

function metricsUrl(env: NodeJS.ProcessEnv): string | null {
  const specific = setting(env, 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT');
  const base = setting(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const url = specific !== '' ? specific : base !== '' ? `${base.replace(/\/+$/, '')}/v1/metrics` : null;
  if (url === null) return null;
  try {
    new URL(url);
  } catch {
    const name = specific !== '' ? 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
    throw new Error(`${name} "${url}" is not a valid URL (e.g. http://127.0.0.1:4318)`);
  }
  return url;
}

/**
 * The OTLP metric exporter the standard variables ask for, or null. Metrics are exported when
 * `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set, unless
 * `OTEL_METRICS_EXPORTER=none` or `OTEL_SDK_DISABLED=true`; the protocol comes from
 * `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` (default `http/protobuf`).
 */
export function metricExporterFromEnv(env: NodeJS.ProcessEnv): PushMetricExporter | null {
  if (setting(env, 'OTEL_SDK_DISABLED').toLowerCase() === 'true') return null;
  const names = setting(env, 'OTEL_METRICS_EXPORTER')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.includes('none')) return null;
  for (const name of names) {
    if (name !== 'otlp' && name !== 'prometheus')
      throw new Error(
        `OTEL_METRICS_EXPORTER "${name}" is not supported (otlp, none; Prometheus is always at GET /metrics)`,
      );
  }
  const url = metricsUrl(env);
  if (url === null) return null;
  const protocol =
    setting(env, 'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL') ||
    setting(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ||
    'http/protobuf';
  /* eslint-disable @typescript-eslint/no-require-imports */
  if (protocol === 'http/protobuf')
    return new (require('@opentelemetry/exporter-metrics-otlp-proto') as typeof OtlpProto).OTLPMetricExporter({ url });
  if (protocol === 'http/json')
    return new (require('@opentelemetry/exporter-metrics-otlp-http') as typeof OtlpHttp).OTLPMetricExporter({ url });
  /* eslint-enable @typescript-eslint/no-require-imports */
  throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL "${protocol}" is not supported (http/protobuf, http/json)`);
}

function attributes(labels: Labels): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(labels)) if (v !== '') out[k] = v;
  return out;
}

function toHrTime(ms: number): HrTime {
  return [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];
}

/** The registry's families as OTLP data: cumulative sums, gauges and explicit-bucket histograms. */
function toMetricData(family: FamilySnapshot, startTime: HrTime, endTime: HrTime): MetricData {
  const { AggregationTemporality, DataPointType } = sdkMetrics();
  const descriptor = {
    name: family.name,
    description: family.help,
    unit: family.name.endsWith('_seconds') ? 's' : '',
    valueType: family.type === 'histogram' ? ValueType.DOUBLE : ValueType.INT,
  };
  if (family.type === 'histogram') {
    return {
      descriptor,
      aggregationTemporality: AggregationTemporality.CUMULATIVE,
      dataPointType: DataPointType.HISTOGRAM,
      dataPoints: family.series.map((s) => ({
        startTime,
        endTime,
        attributes: attributes(s.labels),
        value: {
          buckets: { boundaries: [...(s.histogram?.bounds ?? [])], counts: [...(s.histogram?.counts ?? [])] },
          sum: s.histogram?.sum ?? 0,
          count: s.histogram?.count ?? 0,
        },
      })),
    };
  }
  const dataPoints = family.series.map((s) => ({
    startTime,
    endTime,
    attributes: attributes(s.labels),
    value: Number(s.value ?? 0),
  }));
  if (family.type === 'gauge') {
    return {
      descriptor,
      aggregationTemporality: AggregationTemporality.CUMULATIVE,
      dataPointType: DataPointType.GAUGE,
      dataPoints,
    };
  }
  return {
    descriptor,
    aggregationTemporality: AggregationTemporality.CUMULATIVE,
    dataPointType: DataPointType.SUM,
    dataPoints,
    isMonotonic: true,
  };
}

/**
 * Pushes the registry's metrics over OTLP/HTTP every `OTEL_METRIC_EXPORT_INTERVAL` ms (default
 * 60000) when the standard variables configure an endpoint; null otherwise. The same numbers as
 * `GET /metrics`, so both views agree; the registry stays the one place metrics are recorded.
 */
export function startOtlpMetrics(options: {
  registry: MetricsRegistry;
  env: NodeJS.ProcessEnv;
  serviceName: string;
  now?: () => number;
}): OtlpMetrics | null {
  const exporter = metricExporterFromEnv(options.env);
  if (exporter === null) return null;
  const now = options.now ?? Date.now;
  const startTime = toHrTime(now());
  const serviceName = setting(options.env, 'OTEL_SERVICE_NAME') || options.serviceName;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { resourceFromAttributes } = require('@opentelemetry/resources') as typeof Resources;
  const { MeterProvider, PeriodicExportingMetricReader } = sdkMetrics();
  const resource = resourceFromAttributes({ 'service.name': serviceName });
  const producer: MetricProducer = {
    async collect() {
      const families = await options.registry.snapshot();
      const endTime = toHrTime(now());
      return {
        resourceMetrics: {
          resource,
          scopeMetrics: [{ scope: { name: 'svc' }, metrics: families.map((f) => toMetricData(f, startTime, endTime)) }],
        },
        errors: [],
      };
    },
  };
  const interval = Number(setting(options.env, 'OTEL_METRIC_EXPORT_INTERVAL') || '60000');
  if (!Number.isInteger(interval) || interval < 100)
    throw new Error(`OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds, at least 100`);
  const reader = new PeriodicExportingMetricReader({
    exporter,
    exportIntervalMillis: interval,
    exportTimeoutMillis: Math.min(30_000, interval),
    metricProducers: [producer],
  });
  const provider = new MeterProvider({ resource, readers: [reader] });
  return { shutdown: () => provider.shutdown() };
}
