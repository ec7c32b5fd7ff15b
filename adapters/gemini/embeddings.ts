import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { EmbeddingInput, EmbedRequest } from '../../gen/svc/core/v1/embeddings';
import { invalidArgument, SvcError } from '../../core/edge';
import { callCore, type CallMeta } from '../http/core-client';
import { outcomeOf, setCostHeaders } from '../http/core-outcome';
import { clientGoneSignal, readBody, requestIds } from '../http/request';
import type { AdapterDeps } from '../http/types';
import { asSvcError } from '../openai/errors';
import { sendError } from './errors';

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
/** The error with its field named in this route's words (`requests[0].content`, not the core's). */
function inRouteWords(error: unknown, fieldOf: (param: string) => string): SvcError {
  const svc = asSvcError(error);
  if (svc.param === undefined) return svc;
  const field = fieldOf(svc.param);
  if (field === svc.param) return svc;
  return new SvcError(svc.code, svc.message.split(`'${svc.param}'`).join(`'${field}'`), {
    param: field,
    ...(svc.details === undefined ? {} : { details: svc.details }),
  });
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
        // The adapter's one error writer: the error table's Gemini column, scrubbed messages.
        sendError(ctx, inRouteWords(error, fieldOf), deps.logger);
      }
    },
  };
}
