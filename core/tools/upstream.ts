import type { Dispatcher } from 'undici';
import { SvcError } from '../errors';
import { deadline } from '../net/deadline';
import { descriptorsExhausted, outOfDescriptors } from '../net/descriptors';
import { requestUpstream } from '../net/request-again';

export interface UpstreamOptions {
  /** Provider name, used in messages ("neshan"). */
  readonly provider: string;
  /** Origin plus an optional path prefix, e.g. https://api.neshan.org or http://proxy/neshan. */
  readonly baseUrl: string;
  /** Whole-request deadline in milliseconds. */
  readonly timeoutMs: number;
  /** The core's upstream dispatcher, stating this provider's name (`UpstreamHttp.forUpstream`). */
  readonly dispatcher: Dispatcher;
}

export interface UpstreamRequest {
  readonly method?: 'GET' | 'POST';
  /** Path below the base URL, e.g. "/v1/search". */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly signal: AbortSignal;
}

export interface UpstreamResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly text: string;
}

/**
 * A provider's HTTP client, created once per provider over the core's one dispatcher (whose
 * owner closes it; the pool to each origin lives in the dispatcher).
 */
export interface Upstream {
  request(request: UpstreamRequest): Promise<UpstreamResponse>;
  /** Parses a JSON body, or fails as upstream_error naming the provider. */
  json(response: UpstreamResponse): unknown;
}

// Upstream answers bigger than this are not search results; refuse rather than buffer them.
const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

export function createUpstream(options: UpstreamOptions): Upstream {
  const base = new URL(options.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  const provider = options.provider;

  async function request(req: UpstreamRequest): Promise<UpstreamResponse> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(req.query ?? {}))
      if (value !== undefined) params.append(key, String(value));
    const search = params.size > 0 ? `?${params.toString()}` : '';
    const limit = deadline(options.timeoutMs, req.signal);
    const signal = limit.signal;
    try {
      // A connection closed under the request before any answer is tried once more (core/net/request-again.ts).
      const res = await requestUpstream(
        options.dispatcher,
        {
          origin: base.origin,
          method: req.method ?? 'GET',
          path: `${prefix}${req.path}${search}`,
          headers: { 'user-agent': 'svc/0.1 (+tools)', accept: 'application/json', ...req.headers },
          ...(req.body !== undefined ? { body: req.body } : {}),
        },
        signal,
      );
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          res.body.destroy();
          throw new SvcError(
            'upstream_error',
            `The ${provider} search service sent an oversized answer; try again later`,
            {
              cause: new Error(`${provider}: response over ${MAX_RESPONSE_BYTES} bytes`),
            },
          );
        }
        chunks.push(chunk);
      }
      return { status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks, size).toString('utf8') };
    } catch (error) {
      if (error instanceof SvcError) throw error;
      if (req.signal.aborted) throw new SvcError('cancelled', 'The request was cancelled', { cause: error });
      if (outOfDescriptors(error)) throw descriptorsExhausted(error);
      if (limit.expired) {
        throw new SvcError(
          'upstream_timeout',
          `The ${provider} search service did not answer within ${options.timeoutMs} ms; try again in a moment`,
          {
            cause: error,
          },
        );
      }
      throw new SvcError(
        'upstream_unavailable',
        `The ${provider} search service could not be reached; try again in a moment`,
        { cause: error },
      );
    } finally {
      limit.clear();
    }
  }

  return {
    request,
    json(response) {
      try {
        return JSON.parse(response.text) as unknown;
      } catch (error) {
        throw new SvcError(
          'upstream_error',
          `The ${provider} search service sent an unreadable answer; try again later`,
          {
            cause: new Error(`${provider}: HTTP ${response.status}, body is not JSON: ${response.text.slice(0, 200)}`, {
              cause: error,
            }),
          },
        );
      }
    },
  };
}

/** An upstream failure: `message` is for the model, `detail` for the operator's log only. */
export function upstreamFailure(
  code: 'upstream_error' | 'upstream_unavailable' | 'upstream_timeout',
  message: string,
  detail: string,
): SvcError {
  return new SvcError(code, message, { cause: new Error(detail) });
}

/** A plain-object view of an unknown JSON value, for defensive reads of upstream bodies. */
export function asRecord(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** A provider's date or date-time as YYYY-MM-DD; null when absent or not a date. */
export function asDate(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const match = /^(\d{4}-\d{2}-\d{2})(?:$|[T ])/.exec(value.trim());
  return match !== null && !Number.isNaN(Date.parse(match[1] ?? '')) ? (match[1] ?? null) : null;
}

export function asString(value: unknown): string {
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : '';
}

export function asNumber(value: unknown): number | undefined {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) ? n : undefined;
}

/** JSON.parse that answers undefined instead of throwing, for reading error bodies. */
export function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The result list of an answer. A missing list is a changed or broken answer, never "nothing
 * found": an empty result is free and tells the model to give up, so it must be a real one.
 */
export function resultList(provider: string, value: unknown, where: string): unknown[] {
  if (Array.isArray(value)) return value;
  throw upstreamFailure(
    'upstream_error',
    `The ${provider} search service sent an answer svc could not read; try again later`,
    `${provider}: no ${where} list in the answer (got ${value === undefined ? 'nothing' : typeof value})`,
  );
}
