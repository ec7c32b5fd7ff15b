/**
 * Process-wide OpenTelemetry tracing.
 *
 * ORDER MATTERS: call `startTelemetry` before anything requires `http`, `@grpc/grpc-js`, `koa`,
 * `mysql2` or `undici`. Their instrumentations patch a module when it is first required, so a
 * module loaded earlier is never traced. The CLI entry calls it first and only then requires the
 * server code (with `require()`/`await import()` after the call, not a top-level import).
 */
import type { IncomingMessage } from 'node:http';
import type * as InstrumentationGrpc from '@opentelemetry/instrumentation-grpc';
import type * as InstrumentationHttp from '@opentelemetry/instrumentation-http';
import type * as InstrumentationKoa from '@opentelemetry/instrumentation-koa';
import type * as InstrumentationMysql2 from '@opentelemetry/instrumentation-mysql2';
import type * as InstrumentationUndici from '@opentelemetry/instrumentation-undici';
import type * as SdkNode from '@opentelemetry/sdk-node';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { traceExporterFromEnv } from './exporter';
import { RedactingSpanExporter } from './redact';
import { samplerFromEnv } from './sampler';

export interface TelemetryOptions {
  /** `service.name` unless `OTEL_SERVICE_NAME` (or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) says otherwise. */
  readonly serviceName: string;
  /** The environment, read once here (the composition root passes `process.env`). */
  readonly env: NodeJS.ProcessEnv;
  /** Exports here instead of where the `OTEL_*` variables say (tests). */
  readonly spanExporter?: SpanExporter;
  /**
   * The route template a served request took (`/v1/openai/responses/:id`), for `http.route` and
   * the span name. The gateway knows it (mount prefix + the adapter's router); the Koa
   * instrumentation alone would record the adapter's template without the mount prefix.
   */
  readonly httpRoute?: (request: IncomingMessage) => string | undefined;
}

export interface Telemetry {
  /** True when spans are recorded and exported somewhere. */
  readonly enabled: boolean;
  /** Exports the spans still buffered. */
  forceFlush(): Promise<void>;
  /** Flushes, then stops exporting. */
  shutdown(): Promise<void>;
}

/**
 * Starts tracing: W3C trace context (carried in HTTP headers and gRPC metadata), spans from the
 * HTTP server and clients (node:http, undici/fetch), Koa routes, gRPC clients and servers and
 * mysql2 (SQL text with literals masked, so prompts and hashes never reach a trace). SQLite
 * queries get their spans from `core/store/db.ts`.
 *
 * Nothing is exported unless the standard variables ask for it (see `traceExporterFromEnv`);
 * then no instrumentation is installed at all and tracing costs nothing: the SDK, the exporters and
 * the instrumentations are not even loaded (some 1,500 modules, ~45 MiB of RSS). Only traces are
 * produced: metrics and logs go elsewhere (pino), so the SDK's default OTLP log and metric
 * exporters are turned off.
 */
export function startTelemetry(options: TelemetryOptions): Telemetry {
  const exporter = options.spanExporter ?? traceExporterFromEnv(options.env);
  if (exporter === null) {
    return { enabled: false, forceFlush: () => Promise.resolve(), shutdown: () => Promise.resolve() };
  }
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base') as typeof TraceBase;
  const { NodeSDK } = require('@opentelemetry/sdk-node') as typeof SdkNode;
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http') as typeof InstrumentationHttp;
  const { UndiciInstrumentation } = require('@opentelemetry/instrumentation-undici') as typeof InstrumentationUndici;
  const { KoaInstrumentation, KoaLayerType } = require('@opentelemetry/instrumentation-koa') as typeof InstrumentationKoa;
  const { GrpcInstrumentation } = require('@opentelemetry/instrumentation-grpc') as typeof InstrumentationGrpc;
  const { MySQL2Instrumentation } = require('@opentelemetry/instrumentation-mysql2') as typeof InstrumentationMysql2;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const processor = new BatchSpanProcessor(new RedactingSpanExporter(exporter));
  const sdk = new NodeSDK({
    ...serviceNameOption(options),
    sampler: samplerFromEnv(options.env),
    spanProcessors: [processor],
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        // Runs when the response is finished, after the instrumentation's own http.route.
        applyCustomAttributesOnSpan(span, request) {
          if (!('headers' in request) || 'getHeader' in request) return;
          const route = options.httpRoute?.(request);
          if (route === undefined) return;
          span.setAttribute('http.route', route);
          span.updateName(`${request.method ?? 'GET'} ${route}`);
        },
      }),
      new UndiciInstrumentation(),
      // Middleware layers would add one span per middleware to every request; routes are enough.
      new KoaInstrumentation({ ignoreLayersType: [KoaLayerType.MIDDLEWARE] }),
      // A gateway's tunnel is a stream that lives a minute and carries many calls: each call in
      // it has its own spans (adapters/http/tunnel.ts, core/server/tunnel.ts), the stream none.
      new GrpcInstrumentation({ ignoreGrpcMethods: ['OpenTunnel'] }),
      new MySQL2Instrumentation({ maskStatement: true }),
    ],
  });
  sdk.start();
  return {
    enabled: true,
    forceFlush: () => processor.forceFlush(),
    shutdown: () => sdk.shutdown(),
  };
}

function serviceNameOption(options: TelemetryOptions): { serviceName?: string } {
  const fromEnv = (options.env['OTEL_SERVICE_NAME'] ?? '').trim();
  if (fromEnv !== '') return { serviceName: fromEnv };
  // The SDK's env detector already applied it; overriding would break the standard precedence.
  if (/(^|,)\s*service\.name\s*=/.test(options.env['OTEL_RESOURCE_ATTRIBUTES'] ?? '')) return {};
  return { serviceName: options.serviceName };
}
