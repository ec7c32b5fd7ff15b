import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type { Sampler } from '@opentelemetry/sdk-trace-base';

/**
 * The sampler named by `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (the standard names and
 * values), defaulting to `parentbased_always_on`. Unlike the SDK, which logs and falls back, an
 * unknown name or a bad ratio stops the start with a message naming the variable: a typo here
 * would otherwise silently change what is recorded.
 */
export function samplerFromEnv(env: NodeJS.ProcessEnv): Sampler {
  const name = (env['OTEL_TRACES_SAMPLER'] ?? '').trim() || 'parentbased_always_on';
  // Required here, not at the top: only a process that traces needs the SDK (see ./exporter).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = require(
    '@opentelemetry/sdk-trace-base',
  ) as typeof TraceBase;
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratioFromEnv(env));
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratioFromEnv(env)) });
    default:
      throw new Error(
        `OTEL_TRACES_SAMPLER "${name}" is not supported (always_on, always_off, traceidratio, ` +
          'parentbased_always_on, parentbased_always_off, parentbased_traceidratio)',
      );
  }
}

function ratioFromEnv(env: NodeJS.ProcessEnv): number {
  const raw = (env['OTEL_TRACES_SAMPLER_ARG'] ?? '').trim();
  if (raw === '') return 1;
  const ratio = Number(raw);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new Error(`OTEL_TRACES_SAMPLER_ARG "${raw}" must be a number between 0 and 1`);
  }
  return ratio;
}
