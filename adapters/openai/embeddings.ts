import type { EmbedRequest, EmbedResponse, EmbeddingInput } from '../../gen/svc/core/v1/embeddings';
import { invalidArgument, SvcError } from '../../core/edge';

/*
 * OpenAI's embeddings wire: `CreateEmbeddingRequest` in, `CreateEmbeddingResponse` out. `input`
 * is a string, an array of strings, an array of token ids or an array of token-id arrays;
 * `encoding_format` chooses between float arrays and base64 of little-endian float32, as OpenAI
 * sends them (and as its SDK decodes them).
 */

type Obj = Record<string, unknown>;

const KNOWN = new Set(['model', 'input', 'encoding_format', 'dimensions', 'user']);

export interface ParsedEmbeddingRequest {
  readonly request: EmbedRequest;
  readonly encoding: 'float' | 'base64';
}

function isTokenId(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value);
}

function tokens(ids: readonly number[]): EmbeddingInput {
  return { input: { $case: 'tokens', value: { ids: ids.map((id) => BigInt(id)) } } };
}

function inputs(raw: unknown): EmbeddingInput[] {
  if (raw === undefined || raw === null) throw invalidArgument('input', `Missing required parameter: 'input'.`);
  if (typeof raw === 'string') return [{ input: { $case: 'text', value: raw } }];
  if (!Array.isArray(raw))
    throw new SvcError('invalid_type', `Invalid type for 'input': expected a string or an array.`, { param: 'input' });
  if (raw.length === 0) throw invalidArgument('input', `Invalid 'input': expected at least one input.`);
  if (raw.every(isTokenId)) return [tokens(raw)];
  return raw.map((item: unknown, i) => {
    if (typeof item === 'string') return { input: { $case: 'text', value: item } };
    if (Array.isArray(item) && item.every(isTokenId)) return tokens(item);
    throw new SvcError(
      'invalid_type',
      `Invalid type for 'input[${i}]': expected a string or an array of integer token ids (all inputs of one kind).`,
      { param: `input[${i}]` },
    );
  });
}

/** Parses a `POST /embeddings` body into the core's request; a bad field is a 400 naming it. */
export function parseEmbeddingRequest(body: unknown): ParsedEmbeddingRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new SvcError('invalid_type', 'Invalid body: expected a JSON object.', { param: 'body' });
  const b = body as Obj;
  for (const key of Object.keys(b)) {
    if (!KNOWN.has(key))
      throw new SvcError('unknown_parameter', `Unrecognized request argument supplied: ${key}`, { param: key });
  }
  const model = b['model'];
  if (model === undefined || model === null || model === '')
    throw invalidArgument('model', `Missing required parameter: 'model'.`);
  if (typeof model !== 'string')
    throw new SvcError('invalid_type', `Invalid type for 'model': expected a string.`, { param: 'model' });
  const format = b['encoding_format'] ?? 'float';
  if (format !== 'float' && format !== 'base64')
    throw invalidArgument(
      'encoding_format',
      `Invalid 'encoding_format': expected 'float' or 'base64', got ${JSON.stringify(format)}.`,
    );
  const dimensions = b['dimensions'];
  if (dimensions !== undefined && dimensions !== null && (!isTokenId(dimensions) || dimensions < 1))
    throw invalidArgument('dimensions', `Invalid 'dimensions': expected an integer of at least 1.`);
  const user = b['user'];
  if (user !== undefined && user !== null && typeof user !== 'string')
    throw new SvcError('invalid_type', `Invalid type for 'user': expected a string.`, { param: 'user' });
  return {
    request: {
      model,
      inputs: inputs(b['input']),
      dimensions: typeof dimensions === 'number' ? Math.min(dimensions, 2 ** 31 - 1) : 0,
      user: typeof user === 'string' ? user : '',
    },
    encoding: format,
  };
}

/** A vector as OpenAI's base64: the little-endian float32 bytes. */
export function base64Vector(values: readonly number[]): string {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}

/** The core's answer as OpenAI's `CreateEmbeddingResponse`. */
export function embeddingResponseJson(response: EmbedResponse, encoding: 'float' | 'base64'): Obj {
  const tokens = Number(response.usage?.promptTokens ?? 0n);
  return {
    object: 'list',
    data: response.embeddings.map((e, index) => ({
      object: 'embedding',
      index,
      embedding: encoding === 'base64' ? base64Vector(e.values) : e.values,
    })),
    model: response.model,
    usage: {
      prompt_tokens: tokens,
      total_tokens: tokens,
      // svc's own count of an upstream that reported none (SPEC §6), as on chat.
      ...(response.usage?.estimated === true ? { estimated: true } : {}),
    },
  };
}
