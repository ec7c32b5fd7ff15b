import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as OtlpProto from '@opentelemetry/exporter-trace-otlp-proto';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';

// The exporter packages are required only once tracing is asked for: with tracing off (the
// default) `svc serve` never loads them (the protobuf one alone: 321 modules, ~17 MiB of RSS;
// docs/performance.md, Memory).
/* eslint-disable @typescript-eslint/no-require-imports */

/**
 * The span exporter the standard variables ask for, or null when nothing should be exported.
 *
 * Tracing exports only when asked: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (with `/v1/traces` appended) is set, or `OTEL_TRACES_EXPORTER`
 * names `console`. `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off.
 * The protocol is `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`:
 * `http/protobuf` (the standard default) or `http/json`.
 *
 * The exporters read their secondary settings (headers, TLS files, timeout, compression) from
 * `process.env` themselves; the composition root passes `process.env` as `env`, so both agree.
 */
export function traceExporterFromEnv(env: NodeJS.ProcessEnv): SpanExporter | null {
  if ((env['OTEL_SDK_DISABLED'] ?? '').trim().toLowerCase() === 'true') return null;
  const names = (env['OTEL_TRACES_EXPORTER'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.includes('none')) return null;
  for (const name of names) {
    if (name !== 'otlp' && name !== 'console') {
      throw new Error(`OTEL_TRACES_EXPORTER "${name}" is not supported (otlp, console, none)`);
    }
  }
  if (names.includes('console'))
    return new (require('@opentelemetry/sdk-trace-base') as typeof TraceBase).ConsoleSpanExporter();
  const url = otlpTracesUrl(env);
  if (url === null) return null;
  const protocol =
    (env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'] ?? '').trim() || 'http/protobuf';
  switch (protocol) {
    case 'http/protobuf':
      return new (require('@opentelemetry/exporter-trace-otlp-proto') as typeof OtlpProto).OTLPTraceExporter({ url });
    case 'http/json':
      return new (require('@opentelemetry/exporter-trace-otlp-http') as typeof OtlpHttp).OTLPTraceExporter({ url });
    default:
      throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL "${protocol}" is not supported (http/protobuf, http/json)`);
  }
}

function otlpTracesUrl(env: NodeJS.ProcessEnv): string | null {
  const specific = (env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? '').trim();
  const base = (env['OTEL_EXPORTER_OTLP_ENDPOINT'] ?? '').trim();
  const url = specific !== '' ? specific : base !== '' ? `${base.replace(/\/+$/, '')}/v1/traces` : null;
  if (url === null) return null;
  try {
    new URL(url);
  } catch {
    const name = specific !== '' ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
    throw new Error(`${name} "${url}" is not a valid URL (e.g. http://127.0.0.1:4318)`);
  }
  return url;
}
