import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/**
 * Removes secrets from text that leaves the process: log lines, exported spans, and error
 * messages sent to callers. It knows two kinds: shapes (svc's own `svc_sk_` keys, the common
 * provider key formats, bearer tokens, key-like query parameters) and the exact secrets the
 * configuration holds (every upstream's `api_key`), which it is told as the configuration loads.
 */
export interface Redactor {
  /** Registers exact secrets (shorter than 8 characters are ignored: they would mask ordinary words). */
  add(secrets: Iterable<string | undefined>): void;
  /** `text` with every known secret and key-shaped string replaced. */
  scrub(text: string): string;
}

const MASK = '[redacted]';
const SHAPES: readonly (readonly [RegExp, string])[] = [
  [/svc_sk_[A-Za-z0-9]{8,}/g, MASK],
  // OAuth access and refresh tokens and authorization codes (core/oauth/format.ts).
  [/svc_o(?:at|rt|ac)_[A-Za-z0-9]{8,}/g, MASK],
  [/\bsk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_-]{16,}/g, `sk-${MASK}`],
  [/\bAIza[0-9A-Za-z_-]{30,}/g, MASK],
  [/\bpplx-[A-Za-z0-9]{16,}/g, `pplx-${MASK}`],
  // A credential has a digit somewhere and some length: ordinary words after 'basic' are left
  // alone. `Session` is how the console adapter passes a console session to the core.
  [/\b(Bearer|Basic|Session)\s+(?=[A-Za-z._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*/gi, `$1 ${MASK}`],
  [/([?&](?:api[_-]?key|key|token|access_token|auth)=)[^&\s"'#]+/gi, `$1${MASK}`],
];
// A cheap screen: most text holds none of these, and then no replacement runs.
const HINT = /svc_sk_|svc_o|sk-|AIza|pplx-|bearer|basic|session|key=|token=|auth=/i;

export function createRedactor(): Redactor {
  const exact = new Set<string>();
  let exactRe: RegExp | undefined;
  return {
    add(secrets) {
      let changed = false;
      for (const s of secrets) {
        if (s === undefined || s.length < 8 || exact.has(s)) continue;
        exact.add(s);
        changed = true;
      }
      if (!changed) return;
      const alternatives = [...exact]
        .sort((a, b) => b.length - a.length)
        .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      exactRe = new RegExp(alternatives.join('|'), 'g');
    },
    scrub(text) {
      let out = text;
      if (exactRe !== undefined) {
        exactRe.lastIndex = 0;
        out = out.replace(exactRe, MASK);
      }
      if (!HINT.test(out)) return out;
      for (const [re, replacement] of SHAPES) out = out.replace(re, replacement);
      return out;
    },
  };
}

/**
 * The process's redactor. Process-wide on purpose: the OpenTelemetry SDK and the log stream are
 * process-wide and start before the configuration is read; the composition root adds the
 * configured secrets to it when it loads the configuration.
 */
export const processRedactor: Redactor = createRedactor();

function scrubValue(redactor: Redactor, value: unknown): unknown {
  if (typeof value === 'string') return redactor.scrub(value);
  if (Array.isArray(value)) return value.map((v: unknown) => (typeof v === 'string' ? redactor.scrub(v) : v));
  return value;
}

function scrubAttributes(redactor: Redactor, attributes: Record<string, unknown> | undefined): void {
  if (attributes === undefined) return;
  for (const [name, value] of Object.entries(attributes)) attributes[name] = scrubValue(redactor, value);
}

/** Scrubs every string a span carries (attributes, events, status, name) before it is exported. */
export class RedactingSpanExporter implements SpanExporter {
  constructor(
    private readonly inner: SpanExporter,
    private readonly redactor: Redactor = processRedactor,
  ) {}

  export(spans: ReadableSpan[], resultCallback: Parameters<SpanExporter['export']>[1]): void {
    for (const span of spans) {
      // Ended spans are plain records here: rewriting their strings in place costs no copy.
      const s = span as unknown as {
        name: string;
        attributes: Record<string, unknown>;
        events: { name: string; attributes?: Record<string, unknown> }[];
        status: { code: number; message?: string };
      };
      s.name = this.redactor.scrub(s.name);
      scrubAttributes(this.redactor, s.attributes);
      for (const event of s.events) scrubAttributes(this.redactor, event.attributes);
      if (s.status.message !== undefined) s.status = { ...s.status, message: this.redactor.scrub(s.status.message) };
    }
    this.inner.export(spans, resultCallback);
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
