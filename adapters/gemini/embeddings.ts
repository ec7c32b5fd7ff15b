import type { Context } from 'koa';
import type { Logger } from 'pino';
import { Status } from 'nice-grpc-common';
import type { EmbeddingInput, EmbedRequest } from '../../gen/svc/core/v1/embeddings';
import { invalidArgument, isSvcError, mappingFor, SvcError } from '../../core';
import { callCore, type CallMeta } from '../http/core-client';
import { outcomeOf, setCostHeaders } from '../http/core-outcome';
import { clientGoneSignal, readBody, requestIds } from '../http/request';
import type { AdapterDeps } from '../http/types';

/*
 * Gemini's embedding routes, `models/{model}:embedContent` and `:batchEmbedContents`, over the
 * core's EmbeddingService: the same models, prices and wallet as `/v1/openai/embeddings`. The
 * Gemini adapter mounts `handle`; the error shape here is Google's
 * (`{"error": {code, message, status, details}}`), kept self-contained until the adapter's
 * one error writer takes it over.
 *
 * Accepted and ignored (documented in the README): `taskType` and `title` (svc's providers embed
 * the text alone).
 */

type Obj = Record<string, unknown>;

export type GeminiEmbeddingMethod = 'embedContent' | 'batchEmbedContents';

/** Whether `method` (the part after the colon of `models/NAME:METHOD`) is one of these routes. */
export function isGeminiEmbeddingMethod(method: string): method is GeminiEmbeddingMethod {
  return method === 'embedContent' || method === 'batchEmbedContents';
}

/** The key as Google's clients send it: `x-goog-api-key`, `Authorization: Bearer`, or `?key=`. */
function authorization(ctx: Context): string | undefined {
  const header = ctx.get('x-goog-api-key');
  if (header !== '') return `Bearer ${header}`;
  const bearer = ctx.get('authorization');
  if (bearer !== '') return bearer;
  const query = ctx.query['key'];
  return typeof query === 'string' && query !== '' ? `Bearer ${query}` : undefined;
}

function meta(ctx: Context): CallMeta {
  const auth = authorization(ctx);
  if (auth === undefined)
    throw new SvcError(
      'missing_api_key',
      "Method doesn't allow unregistered callers. Please use an API key (x-goog-api-key).",
    );
  return {
    authorization: auth,
    ids: requestIds(ctx),
    signal: clientGoneSignal(ctx),
    outcome: outcomeOf(ctx.req),
  };
}

/** The text of one Content: its text parts joined; any other part is refused, naming it. */
function contentText(content: unknown, param: string): string {
  const parts = (content as { parts?: unknown } | null)?.parts;
  if (typeof content !== 'object' || content === null || !Array.isArray(parts) || parts.length === 0)
    throw invalidArgument(param, `${param} must be a Content with at least one part.`);
  return parts
    .map((part: unknown, i) => {
      const text = (part as { text?: unknown } | null)?.text;
      if (typeof text !== 'string')
        throw invalidArgument(`${param}.parts[${i}]`, `${param}.parts[${i}]: only text parts can be embedded.`);
      return text;
    })
    .join('\n');
}

function dimensionsOf(value: unknown, param: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
    throw invalidArgument(param, `${param} must be a positive integer.`);
  return value;
}

function text(value: string): EmbeddingInput {
  return { input: { $case: 'text', value } };
}

interface Parsed {
  readonly request: EmbedRequest;
  /** The core's field names in this route's words (`input[0]` → `requests[0].content`). */
  readonly fieldOf: (param: string) => string;
}

function parse(model: string, method: GeminiEmbeddingMethod, body: unknown): Parsed {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw invalidArgument('body', 'The request body must be a JSON object.');
  const b = body as Obj;
  if (method === 'embedContent') {
    return {
      request: {
        model,
        inputs: [text(contentText(b['content'], 'content'))],
        dimensions: dimensionsOf(b['outputDimensionality'], 'outputDimensionality'),
        user: '',
      },
      fieldOf: (param) =>
        param.startsWith('input') ? 'content' : param === 'dimensions' ? 'outputDimensionality' : param,
    };
  }
  const requests = b['requests'];
  if (!Array.isArray(requests) || requests.length === 0)
    throw invalidArgument('requests', 'requests must list at least one EmbedContentRequest.');
  let dimensions: number | undefined;
  const inputs = requests.map((r: unknown, i) => {
    const request = (typeof r === 'object' && r !== null ? r : {}) as Obj;
    const named = request['model'];
    if (named !== undefined && named !== `models/${model}` && named !== model)
      throw invalidArgument(
        `requests[${i}].model`,
        `requests[${i}].model '${String(named)}' differs from the model of the URL, models/${model}.`,
      );
    const d = dimensionsOf(request['outputDimensionality'], `requests[${i}].outputDimensionality`);
    if (dimensions !== undefined && d !== dimensions)
      throw invalidArgument(
        `requests[${i}].outputDimensionality`,
        `requests[${i}].outputDimensionality must be the same in every request of a batch.`,
      );
    dimensions = d;
    return text(contentText(request['content'], `requests[${i}].content`));
  });
  return {
    request: { model, inputs, dimensions: dimensions ?? 0, user: '' },
    fieldOf: (param) => {
      const input = /^input\[(\d+)\]$/.exec(param);
      if (input !== null) return `requests[${input[1]}].content`;
      if (param === 'input') return 'requests';
      if (param === 'dimensions') return 'requests[].outputDimensionality';
      return param;
    },
  };
}

// Google's HTTP status of each gRPC code, as its API answers them.
const GOOGLE_HTTP: Partial<Record<Status, number>> = {
  [Status.INVALID_ARGUMENT]: 400,
  [Status.FAILED_PRECONDITION]: 400,
  [Status.OUT_OF_RANGE]: 400,
  [Status.UNAUTHENTICATED]: 401,
  [Status.PERMISSION_DENIED]: 403,
  [Status.NOT_FOUND]: 404,
  [Status.ALREADY_EXISTS]: 409,
  [Status.ABORTED]: 409,
  [Status.RESOURCE_EXHAUSTED]: 429,
  [Status.CANCELLED]: 499,
  [Status.UNIMPLEMENTED]: 501,
  [Status.UNAVAILABLE]: 503,
  [Status.DEADLINE_EXCEEDED]: 504,
};

const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';

/** Google's error body and status for a core error, with field names in this route's words. */
export function googleError(
  error: unknown,
  fieldOf: (param: string) => string = (p) => p,
): { status: number; body: Obj } {
  const svc = isSvcError(error) ? error : new SvcError('internal', 'An internal error has occurred.', { cause: error });
  const mapping = mappingFor(svc.code);
  let status = GOOGLE_HTTP[mapping.grpc] ?? 500;
  let name = Status[mapping.grpc] ?? 'INTERNAL';
  const details: Obj[] = [];
  let message = svc.code === 'internal' ? 'An internal error has occurred.' : svc.message;
  if (svc.code === 'missing_api_key' || svc.code === 'invalid_api_key') {
    // As Google answers a bad key: 400 INVALID_ARGUMENT with the reason in ErrorInfo.
    status = 400;
    name = 'INVALID_ARGUMENT';
    message = 'API key not valid. Please pass a valid API key.';
    details.push({ '@type': ERROR_INFO, reason: 'API_KEY_INVALID', domain: 'svc' });
  } else if (svc.code === 'insufficient_credit' || svc.code === 'key_cap_exceeded') {
    status = 429;
    name = 'RESOURCE_EXHAUSTED';
    details.push({ '@type': ERROR_INFO, reason: svc.code.toUpperCase(), domain: 'svc' });
  } else if (
    svc.code === 'rate_limited' ||
    svc.code === 'tokens_rate_limited' ||
    svc.code === 'upstream_rate_limited'
  ) {
    const retry = svc.details?.['retry_after_s'];
    details.push({
      '@type': 'type.googleapis.com/google.rpc.RetryInfo',
      retryDelay: `${typeof retry === 'number' ? retry : 1}s`,
    });
  } else if (mapping.http >= 500) {
    status = mapping.http === 504 ? 504 : mapping.http === 500 ? 500 : 503;
  }
  if (svc.param !== undefined && status === 400) {
    const field = fieldOf(svc.param);
    message = message.split(`'${svc.param}'`).join(`'${field}'`);
    details.push({
      '@type': 'type.googleapis.com/google.rpc.BadRequest',
      fieldViolations: [{ field, description: message }],
    });
  }
  return { status, body: { error: { code: status, message, status: name, details } } };
}

/** What the Gemini adapter mounts: `handle` serves one POST to `models/{model}:{method}`. */
export interface GeminiEmbeddings {
  /** Answers the request (Google's success or error body); never throws. */
  handle(ctx: Context, model: string, method: GeminiEmbeddingMethod): Promise<void>;
}

export function createGeminiEmbeddings(
  deps: Pick<AdapterDeps, 'core' | 'maxBodyBytes'> & { logger: Logger },
): GeminiEmbeddings {
  return {
    async handle(ctx, model, method) {
      let fieldOf: (param: string) => string = (p) => p;
      try {
        const m = meta(ctx);
        const raw = await readBody(ctx, deps.maxBodyBytes);
        let body: unknown;
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          throw invalidArgument('body', 'Invalid JSON payload received.');
        }
        const parsed = parse(model.replace(/^models\//, ''), method, body);
        fieldOf = parsed.fieldOf;
        const result = await callCore(m, (o) => deps.core.embeddings.embed(parsed.request, o));
        if (result.sandbox) ctx.set('x-svc-sandbox', 'true');
        setCostHeaders(ctx, result.billing);
        const vectors = result.embeddings.map((e) => ({ values: e.values }));
        ctx.type = 'application/json';
        ctx.body = method === 'embedContent' ? { embedding: vectors[0] } : { embeddings: vectors };
      } catch (error) {
        if (!isSvcError(error) || error.code === 'internal' || error.code.startsWith('upstream_'))
          deps.logger.warn({ err: error, requestId: ctx.state['requestId'] as unknown }, 'gemini embeddings failed');
        const { status, body } = googleError(error, fieldOf);
        ctx.status = status;
        ctx.type = 'application/json';
        ctx.body = body;
      }
    },
  };
}
